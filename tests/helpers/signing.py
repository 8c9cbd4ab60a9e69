"""SSH commit signing for tests: a key pair, and a repository set to sign with it.

Input: a directory, a ``GitRepo``. Output: key files (``ssh-keygen``) and git config.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo


def ssh_key(tmp_path: Path, name: str) -> Path:
    key = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key


def ssh_sign_config(repo: GitRepo, key: Path | None) -> None:
    if key is None:
        repo.git("config", "commit.gpgsign", "false")
        return
    repo.git("config", "gpg.format", "ssh")
    repo.git("config", "user.signingkey", str(key))
    repo.git("config", "commit.gpgsign", "true")
