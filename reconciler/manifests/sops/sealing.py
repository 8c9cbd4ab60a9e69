"""SOPS files sealed: a file in clear encrypted for age recipients, as ``sops`` writes it.

Input: the bytes of a ``yaml``, ``json``, ``dotenv`` or ``binary`` file in clear, a
``Rule`` (the age recipients and which values to encrypt, ``.sops.yaml``'s terms) and
the time. Output: the encrypted file ``sops --encrypt`` would write (a fresh data key
sealed for each recipient, each value sealed with a fresh IV, the MAC and the metadata
in the format's place), which ``sops`` itself and ``sops.files`` decrypt;
``ValueError`` (no value in its message) for a file that cannot be encrypted.

What ``reconciler encrypt`` writes. Never reads the clock, the environment or a key
file: the time and the recipients are given; pyrage and AES-GCM come through
``sops.keys`` and ``sops.values``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from reconciler.manifests.printer import dump_documents
from reconciler.manifests.reader import parse_yaml_value
from reconciler.manifests.sops.files import dotenv_items
from reconciler.manifests.sops.keys import load_pyrage
from reconciler.manifests.sops.values import (
    DEFAULT_UNENCRYPTED_SUFFIX,
    MAC_ONLY_ENCRYPTED_INIT,
    Rules,
    aes,
    go_float,
    to_bytes,
)
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Iterator

_NONCE = 32  # bytes of a value's IV, as sops writes them
VERSION = "3.9.0"  # the sops file format written (as sops 3.9 writes it)


def seal_value(value: Any, key: bytes, aad: str, kind: str = "") -> str:
    """One ``ENC[…]`` value (``kind``: "comment" for a comment's text, else by type)."""
    if kind == "comment":
        plain = str(value).encode()
    elif isinstance(value, bool):
        kind, plain = "bool", b"True" if value else b"False"
    elif isinstance(value, int):
        kind, plain = "int", str(value).encode()
    elif isinstance(value, float):
        kind, plain = "float", go_float(value).encode()
    else:
        kind, plain = "str", str(value).encode()
    if not plain and kind == "str":
        return ""
    iv = os.urandom(_NONCE)
    sealed = aes(key).encrypt(iv, plain, aad.encode())
    data, tag = sealed[:-16], sealed[-16:]
    b64 = base64.b64encode
    return (
        f"ENC[AES256_GCM,data:{b64(data).decode()},iv:{b64(iv).decode()},tag:{b64(tag).decode()},type:{kind}]"
    )


class _Sealer:
    def __init__(self, rules: Rules, key: bytes) -> None:
        self.rules = rules
        self.key = key
        self.mac = hashlib.sha512()
        if rules.mac_only_encrypted:
            self.mac.update(MAC_ONLY_ENCRYPTED_INIT)

    def value(self, node: Any, path: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            # The order the printer writes (sorted keys) is the order sops reads and MACs.
            out = {}
            for k in sorted(node, key=str):
                if not isinstance(k, str):
                    raise ValueError("only string keys can be encrypted")
                if k == "sops":
                    raise ValueError("a key named 'sops' is reserved for SOPS metadata")
                out[k] = self.value(node[k], (*path, k))
            return out
        if isinstance(node, list):
            return [self.value(v, path) for v in node]
        if node is None:
            return None
        encrypted = self.rules.encrypted(path)
        if not self.rules.mac_only_encrypted or encrypted:
            self.mac.update(to_bytes(node))
        return seal_value(node, self.key, ":".join(path) + ":") if encrypted else node


@dataclass(frozen=True, slots=True)
class Rule:
    """How to encrypt a file: age recipients and which values (``.sops.yaml``'s terms)."""

    age: tuple[str, ...]
    encrypted_regex: str = ""
    unencrypted_regex: str = ""
    encrypted_suffix: str = ""
    unencrypted_suffix: str = ""
    mac_only_encrypted: bool = False


def _metadata(rule: Rule, key: bytes, mac_text: str, now: datetime) -> dict[str, Any]:
    pyrage = load_pyrage()
    try:
        recipients = [pyrage.x25519.Recipient.from_str(r) for r in rule.age]
    except pyrage.RecipientError as err:
        raise ValueError("not an age recipient (age1…)") from err
    if not recipients:
        raise ValueError("no age recipient to encrypt for")
    lastmodified = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    age = []
    for text, recipient in zip(rule.age, recipients, strict=True):
        armored = pyrage.encrypt(key, [recipient], armored=True)
        age.append({"recipient": text, "enc": armored.decode() if isinstance(armored, bytes) else armored})
    meta: dict[str, Any] = {"age": age, "lastmodified": lastmodified}
    meta["mac"] = seal_value(mac_text, key, lastmodified)
    for name in ("encrypted_regex", "unencrypted_regex", "encrypted_suffix", "unencrypted_suffix"):
        if getattr(rule, name):
            meta[name] = getattr(rule, name)
    if rule.mac_only_encrypted:
        meta["mac_only_encrypted"] = True
    meta["version"] = VERSION
    return meta


def encrypt_file(data: bytes, fmt: str, rule: Rule, now: datetime) -> bytes:
    """``data`` (a ``yaml``, ``json``, ``dotenv`` or ``binary`` file in clear) encrypted
    for ``rule``'s age recipients, as ``sops --encrypt`` writes it. ``ValueError`` (no
    value in its message) for a file that cannot be encrypted."""
    key = os.urandom(32)
    rules = Rules(
        rule.unencrypted_suffix,
        rule.encrypted_suffix,
        rule.unencrypted_regex,
        rule.encrypted_regex,
        rule.mac_only_encrypted,
    )
    if not any(
        (rule.unencrypted_suffix, rule.encrypted_suffix, rule.unencrypted_regex, rule.encrypted_regex)
    ):
        rules = Rules(
            unencrypted_suffix=DEFAULT_UNENCRYPTED_SUFFIX, mac_only_encrypted=rule.mac_only_encrypted
        )
    sealer = _Sealer(rules, key)
    if fmt == "binary":
        doc = {"data": sealer.value(data.decode("utf-8"), ("data",))}
        doc["sops"] = _metadata(rule, key, sealer.mac.hexdigest().upper(), now)
        return (json.dumps(doc, indent=4) + "\n").encode()
    if fmt == "json":
        tree = json.loads(data)
        if not isinstance(tree, dict):
            raise ValueError("a JSON file to encrypt must hold an object")
        doc = sealer.value(tree, ())
        doc["sops"] = _metadata(rule, key, sealer.mac.hexdigest().upper(), now)
        return (json.dumps(doc, indent=4) + "\n").encode()
    if fmt == "dotenv":
        pairs = [(k, v) for _n, k, v in dotenv_items(data)]
        lines = []
        for k, v in pairs:
            if k.startswith("sops_"):
                raise ValueError("a key starting with sops_ is reserved for SOPS metadata")
            if not rules.mac_only_encrypted or rules.encrypted((k,)):
                sealer.mac.update(v.encode())
            sealed = seal_value(v, key, f"{k}:") if rules.encrypted((k,)) else v
            lines.append(f"{k}={sealed.replace(chr(10), chr(92) + 'n')}")
        meta = _metadata(rule, key, sealer.mac.hexdigest().upper(), now)
        for k, v in _flatten(meta, "sops_"):
            lines.append(f"{k}={v.replace(chr(10), chr(92) + 'n')}")
        return ("\n".join(lines) + "\n").encode()
    docs = parse_yaml_value(data, "")
    if not docs or not all(isinstance(d, dict) for d in docs):
        raise ValueError("a YAML file to encrypt must hold mappings")
    sealed_docs = [sealer.value(d, ()) for d in docs]
    block = dump_documents([{"sops": _metadata(rule, key, sealer.mac.hexdigest().upper(), now)}])
    return "---\n".join(dump_documents([d]) + block for d in sealed_docs).encode()


def _flatten(value: Any, prefix: str, top: bool = True) -> Iterator[tuple[str, str]]:
    """sops' dotenv form of the metadata: ``sops_age__list_0__map_enc=…``."""
    if isinstance(value, dict):
        for k in sorted(value):
            yield from _flatten(value[k], f"{prefix}{k}" if top else f"{prefix}__map_{k}", False)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _flatten(item, f"{prefix}__list_{i}", False)
    elif isinstance(value, bool):
        yield prefix, "true" if value else "false"
    else:
        yield prefix, str(value)


def format_for(name: str) -> str:
    """The format sops reads a file of this name in (by its extension)."""
    lower = name.lower()
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    if lower.endswith(".json"):
        return "json"
    if lower.endswith(".env"):
        return "dotenv"
    return "binary"
