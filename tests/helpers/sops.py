"""SOPS material for tests: Flux's pinned files and keys, age keys made by ``age-keygen``,
and files encrypted by our own writer.

Input: a directory for the keys a test makes. Output: ``FLUX`` (the pinned
kustomize-controller testdata), ``flux_keys``, ``AgeKey`` (a key file with mode 0600 and
its recipient), ``encrypt`` (a file as ``reconciler encrypt`` writes it). Runs
``age-keygen``; changes nothing else.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from reconciler.manifests.sops.keys import Keys
from reconciler.manifests.sops.sealing import Rule, encrypt_file
from tests.helpers.files import DATA

if TYPE_CHECKING:
    from pathlib import Path

FLUX = DATA / "sops" / "flux"
SECRET_REGEX = "^(data|stringData)$"


def flux_keys(name: str = "age.txt") -> Keys:
    """The age identity Flux's test files are encrypted for."""
    path = FLUX / "keys" / name
    return Keys.from_age_keys(path.read_text(), str(path))


@dataclass(frozen=True)
class AgeKey:
    path: Path  # the key file, as age-keygen writes it (mode 0600)
    recipient: str  # age1…

    def keys(self) -> Keys:
        return Keys.from_age_keys(self.path.read_text(), str(self.path))


def age_key(directory: Path, name: str = "age.key") -> AgeKey:
    """An age key made by ``age-keygen`` (the tool users run); the one of that name
    already there is used again."""
    path = directory / name
    directory.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        subprocess.run(["age-keygen", "-o", str(path)], check=True, capture_output=True)
        path.chmod(0o600)
    recipient = subprocess.run(
        ["age-keygen", "-y", str(path)], check=True, capture_output=True, text=True
    ).stdout.strip()
    return AgeKey(path, recipient)


def encrypt(text: str | bytes, recipient: str, fmt: str = "yaml", regex: str | None = SECRET_REGEX) -> bytes:
    """``text`` encrypted for ``recipient`` by our writer (``encrypted_regex`` for YAML)."""
    data = text.encode() if isinstance(text, str) else text
    rule = Rule(age=(recipient,), encrypted_regex=(regex or "") if fmt == "yaml" else "")
    return encrypt_file(data, fmt, rule, datetime.now(UTC))
