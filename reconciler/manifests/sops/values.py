"""One SOPS value and the walk over a file's values: open each, verify the MAC.

Input: a file's ``sops`` metadata and its documents' tree (or a dotenv file's pairs),
and ``Keys``. Output: each value in clear, typed as ``sops`` typed it (``str``,
``int``, ``float``, ``bool``, ``bytes``, ``time``), or, with ``SEALED``, a stand-in
derived from its ciphertext; the MAC over every value in order (or only the encrypted
ones, ``mac_only_encrypted``) checked against the file's; a ``Problem`` naming the
field (never the value) for one that does not decrypt, parse or verify.

Which values a file encrypts follows ``sops``' rules (suffixes and regular
expressions, ``_unencrypted`` by default); a value is
``ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]``, authenticated with the path of keys
above it. ``cryptography`` (AES-GCM) is imported here (lazily, through ``aes``) and
nowhere else. Pure: never reads a file, the environment or the clock.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import field
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from reconciler.manifests.patterns import Pattern, PatternError, compile_pattern
from reconciler.manifests.reader import ScalarText
from reconciler.manifests.sops import Problem
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.manifests.sops.keys import Keys

# The marks of an encrypted file, by format (Flux's ``sopsFormatToMarkerBytes``).
YAML_MARK = b"mac: ENC["
JSON_MARK = b'"mac": "ENC['
DOTENV_MARK = b"sops_mac=ENC["

VALUE = re.compile(
    r"ENC\[AES256_GCM,data:([A-Za-z0-9+/=]*),iv:([A-Za-z0-9+/=]+),tag:([A-Za-z0-9+/=]+),type:([a-z]+)\]"
)
_TYPES = ("str", "int", "float", "bool", "bytes", "time", "comment")
MAC_ONLY_ENCRYPTED_INIT = bytes.fromhex("8a3fd2ad54ce66527b1034f3d147be0b0b975b3bf44f72c6fdadec8176f27d69")
DEFAULT_UNENCRYPTED_SUFFIX = "_unencrypted"
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def aes(key: bytes) -> Any:
    """AES-GCM with ``key``, ``cryptography`` imported when a value is first opened or sealed."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


@dataclass(frozen=True, slots=True)
class Rules:
    """Which values of a file are encrypted (``sops``' ``shouldBeEncrypted``). Its regular
    expressions run as Go runs them (``manifests.patterns``: RE2, linear time); one that
    does not compile is a ``Problem`` at its field (``of``) or a ``PatternError``."""

    unencrypted_suffix: str = ""
    encrypted_suffix: str = ""
    unencrypted_regex: str = ""
    encrypted_regex: str = ""
    mac_only_encrypted: bool = False
    _unencrypted: Pattern | None = field(default=None, init=False, repr=False, compare=False)
    _encrypted: Pattern | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.unencrypted_regex:
            object.__setattr__(self, "_unencrypted", compile_pattern(self.unencrypted_regex))
        if self.encrypted_regex:
            object.__setattr__(self, "_encrypted", compile_pattern(self.encrypted_regex))

    @classmethod
    def of(cls, meta: dict[str, Any]) -> Rules:
        for unsupported in ("unencrypted_comment_regex", "encrypted_comment_regex"):
            if meta.get(unsupported):
                raise Problem(f"sops.{unsupported} is not supported", ("sops", unsupported))
        rules = {}
        for name in ("unencrypted_suffix", "encrypted_suffix", "unencrypted_regex", "encrypted_regex"):
            value = meta.get(name)
            if value is not None and not isinstance(value, str):
                raise Problem(f"sops.{name} must be a string", ("sops", name))
            if value and name.endswith("regex"):
                try:
                    compile_pattern(value)
                except PatternError as err:
                    raise Problem(
                        f"sops.{name} is not a regular expression as sops (Go, RE2 syntax) reads it: "
                        f"{err.message}",
                        ("sops", name),
                    ) from err
            rules[name] = value or ""
        if not any(rules.values()):
            rules["unencrypted_suffix"] = DEFAULT_UNENCRYPTED_SUFFIX
        only = meta.get("mac_only_encrypted")
        return cls(**rules, mac_only_encrypted=only is True or str(only).lower() == "true")

    def encrypted(self, path: Sequence[str]) -> bool:
        out = True
        if self.unencrypted_suffix and any(p.endswith(self.unencrypted_suffix) for p in path):
            out = False
        if self.encrypted_suffix:
            out = any(p.endswith(self.encrypted_suffix) for p in path)
        if self._unencrypted is not None and any(self._unencrypted.search(p) for p in path):
            out = False
        if self._encrypted is not None:
            out = any(self._encrypted.search(p) for p in path)
        return out


def go_float(value: float) -> str:
    """Go's ``strconv.FormatFloat(v, 'f', -1, 64)``: the shortest digits, never an exponent."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def to_bytes(value: Any) -> bytes:
    """The bytes of a value in the MAC (sops' ``ToBytes``)."""
    if isinstance(value, bool):
        return b"True" if value else b"False"
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, float):
        return go_float(value).encode()
    if isinstance(value, bytes):
        return value
    return str(value).encode()


def _b64(text: str, what: str, field: tuple[str | int, ...]) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as err:
        raise Problem(f"{what} of {dotted(field)} is not valid base64", field) from err


def dotted(field: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in field) or "(the document)"


def open_value(token: str, key: bytes, aad: str, field: tuple[str | int, ...]) -> tuple[bytes, str]:
    """(plaintext bytes, type) of one ``ENC[…]`` value."""
    m = VALUE.fullmatch(token)
    if m is None:
        raise Problem(f"{dotted(field)}: not a SOPS value (ENC[AES256_GCM,…])", field)
    data, iv, tag = (_b64(m.group(i), w, field) for i, w in ((1, "data"), (2, "iv"), (3, "tag")))
    kind = m.group(4)
    if kind not in _TYPES:
        raise Problem(f"{dotted(field)}: unknown SOPS value type", field)
    if len(tag) != 16 or len(iv) < 8:
        raise Problem(f"{dotted(field)}: malformed SOPS value", field)
    from cryptography.exceptions import InvalidTag

    try:
        plain = aes(key).decrypt(iv, data + tag, aad.encode())
    except InvalidTag as err:
        raise Problem(
            f"{dotted(field)} does not decrypt: the value was changed, moved from another field or "
            "file, or encrypted with another data key",
            field,
        ) from err
    return plain, kind


def _typed(plain: bytes, kind: str, field: tuple[str | int, ...]) -> Any:
    """The value a decrypted ``plain`` of ``kind`` stands for in the document."""
    try:
        text = plain.decode("utf-8")
    except UnicodeDecodeError as err:
        if kind == "bytes":
            return plain
        raise Problem(f"{dotted(field)}: decrypted value is not UTF-8 text", field) from err
    if kind in ("str", "bytes", "time"):
        return text
    if kind == "int":
        if re.fullmatch(r"[+-]?[0-9]+", text) is None:
            raise Problem(f"{dotted(field)}: decrypted value is not an integer", field)
        return int(text)
    if kind == "float":
        try:
            return float(text)
        except ValueError as err:
            raise Problem(f"{dotted(field)}: decrypted value is not a number", field) from err
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise Problem(f"{dotted(field)}: decrypted value is not a boolean", field)


def stand_in(ciphertext: str | bytes) -> str:
    """What a sealed value reads as: a digest of its ciphertext (public: it is in git),
    valid base64, the same for the same ciphertext, another for another."""
    raw = ciphertext.encode() if isinstance(ciphertext, str) else ciphertext
    return base64.b64encode(b"sops:" + hashlib.sha256(raw).digest()[:15]).decode()


def _mac_aad(meta: dict[str, Any]) -> str:
    """``lastmodified`` as sops authenticates the MAC with it (Go's RFC 3339 form)."""
    raw = meta.get("lastmodified")
    if not isinstance(raw, str) or not raw:
        raise Problem("sops metadata without lastmodified", ("sops",))
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as err:
        raise Problem("sops.lastmodified is not an RFC 3339 time", ("sops", "lastmodified")) from err
    offset = when.utcoffset()
    if offset is None:
        raise Problem("sops.lastmodified has no time zone", ("sops", "lastmodified"))
    minutes = int(offset.total_seconds() // 60)
    zone = (
        "Z"
        if minutes == 0
        else f"{'+' if minutes > 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    )
    return when.strftime("%Y-%m-%dT%H:%M:%S") + zone


class Walk:
    """One pass over a file's documents, as sops walks them: every value in order, its
    path the keys above it (list items share their list's path)."""

    def __init__(self, meta: dict[str, Any], keys: Keys) -> None:
        self.rules = Rules.of(meta)
        self.keys = keys
        self.key = b"" if keys.sealed else keys.data_key(meta)
        self.mac = hashlib.sha512()
        if self.rules.mac_only_encrypted:
            self.mac.update(MAC_ONLY_ENCRYPTED_INIT)
        self.opened: dict[str, Any] = {}  # ciphertext -> value, for a text's substitution
        self.paths: set[str] = {":"}  # every branch's additional data (comments are opened with one)

    def value(self, node: Any, path: tuple[str, ...], field: tuple[str | int, ...]) -> Any:
        if isinstance(node, dict):
            self.paths.add(":".join(path) + ":")
            out = {}
            for k, v in node.items():
                if not isinstance(k, str):
                    raise Problem(f"{dotted(field)}: a key that is not a string", field)
                out[k] = self.value(v, (*path, k), (*field, k))
            return out
        if isinstance(node, list):
            return [self.value(v, path, (*field, i)) for i, v in enumerate(node)]
        if node is None:
            return None
        return self.leaf(node, path, field)

    def leaf(self, node: Any, path: tuple[str, ...], field: tuple[str | int, ...]) -> Any:
        encrypted = self.rules.encrypted(path)
        if not encrypted:
            value = node
            mac_value = node.typed if isinstance(node, ScalarText) else node  # as sops' YAML reads it
        elif not isinstance(node, str):
            raise Problem(f"{dotted(field)}: expected an encrypted value", field)
        elif node == "":
            value = ""
        elif self.keys.sealed:
            if VALUE.fullmatch(node) is None:
                raise Problem(f"{dotted(field)}: not a SOPS value (ENC[AES256_GCM,…])", field)
            return stand_in(node)
        else:
            plain, kind = open_value(node, self.key, ":".join(path) + ":", field)
            if kind == "comment":
                raise Problem(f"{dotted(field)}: a comment where a value belongs", field)
            value = _typed(plain, kind, field)
            self.opened[node] = value
        if encrypted:
            mac_value = value
        if (not self.rules.mac_only_encrypted or encrypted) and mac_value is not None:
            self.mac.update(to_bytes(mac_value))
        return value

    def verify(self, meta: dict[str, Any]) -> None:
        if self.keys.sealed:
            _mac_aad(meta)
            if not isinstance(meta.get("mac"), str) or VALUE.fullmatch(meta["mac"]) is None:
                raise Problem("sops metadata without a MAC", ("sops", "mac"))
            return
        token = meta.get("mac")
        if not isinstance(token, str) or not token:
            raise Problem("sops metadata without a MAC", ("sops", "mac"))
        plain, _kind = open_value(token, self.key, _mac_aad(meta), ("sops", "mac"))
        if not hmac.compare_digest(plain, self.mac.hexdigest().upper().encode()):
            raise Problem(
                "MAC mismatch: the file was changed after it was encrypted (a value, a key or their "
                "order); edit it with sops, or encrypt it again",
                ("sops", "mac"),
            )
