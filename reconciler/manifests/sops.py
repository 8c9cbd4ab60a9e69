"""SOPS-encrypted files, read as Flux's kustomize-controller reads them, and written as
``sops`` writes them.

Input: a file a build reads (its bytes, or its parsed documents), its repository path,
and ``Keys``: the host's age identities (and a PGP decrypter) that the CLI or the daemon
loaded, or ``SEALED`` (no keys: every encrypted value is replaced by a stand-in derived
from its ciphertext, so a change can be reviewed without the keys). Output: the
documents or bytes in clear, the file's ``sops`` metadata stripped and its MAC verified
(over every value in order, as ``sops`` computes it); ``ManifestError`` at the file's
line for a file that does not decrypt or verify. ``encrypt_file`` writes YAML, dotenv,
JSON and binary files ``sops`` itself decrypts.

Formats (``sops`` 3): YAML and JSON keep their structure, each value an
``ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]`` and the metadata under a top-level
``sops`` key; dotenv flattens the metadata into ``sops_…`` keys; binary is the JSON
envelope ``{"data": …, "sops": …}``. The data key is opened by one of the file's age
recipients (or PGP, through the caller's decrypter); one key group only (no Shamir).

Pure given the key material: never reads the environment, a key file, gpg's keyring
or the clock (``encrypt_file`` takes the time); ``pyrage`` (age) and ``cryptography``
(AES-GCM) are imported here and nowhere else. No message holds a value, in clear or
encrypted: errors name the file, the line and the field.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import itertools
import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from reconciler.errors import ManifestError
from reconciler.manifests.printer import dump_documents
from reconciler.manifests.reader import ScalarText, locate, parse_yaml_value

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

# The marks of an encrypted file, by format (Flux's ``sopsFormatToMarkerBytes``).
YAML_MARK = b"mac: ENC["
JSON_MARK = b'"mac": "ENC['
DOTENV_MARK = b"sops_mac=ENC["

_VALUE = re.compile(
    r"ENC\[AES256_GCM,data:([A-Za-z0-9+/=]*),iv:([A-Za-z0-9+/=]+),tag:([A-Za-z0-9+/=]+),type:([a-z]+)\]"
)
_TYPES = ("str", "int", "float", "bool", "bytes", "time", "comment")
_MAC_ONLY_ENCRYPTED_INIT = bytes.fromhex("8a3fd2ad54ce66527b1034f3d147be0b0b975b3bf44f72c6fdadec8176f27d69")
_NONCE = 32  # bytes of a value's IV, as sops writes them
VERSION = "3.9.0"  # the sops file format written (as sops 3.9 writes it)
DEFAULT_UNENCRYPTED_SUFFIX = "_unencrypted"
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _pyrage() -> Any:
    """pyrage, imported when a key or a recipient is first needed (not by a build
    without encrypted files: a command's start stays as fast)."""
    import pyrage

    return pyrage


def _aes(key: bytes) -> Any:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


class Problem(Exception):
    """One thing wrong with an encrypted file: a message (never a value) and where."""

    def __init__(self, message: str, field: tuple[str | int, ...] = (), doc: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.doc = doc


# -- keys ------------------------------------------------------------------------------------


class Keys:
    """The key material a build decrypts with; never shown, never serialised.

    ``age``: identities (``AGE-SECRET-KEY-1…``) from the host's key file; ``pgp``: a
    function opening an armored PGP message (the caller runs gpg), or None; ``sealed``:
    no keys at all, encrypted values read as stand-ins (``SEALED``). ``token`` differs
    per instance: caches that hold what a build decrypted key by it, so other keys (a
    reloaded key file) never reuse them.
    """

    __slots__ = ("_age", "_pgp", "sealed", "token")

    def __init__(
        self,
        age: Sequence[Any] = (),
        pgp: Callable[[str], bytes] | None = None,
        sealed: bool = False,
    ) -> None:
        self._age = tuple(age)
        self._pgp = pgp
        self.sealed = sealed
        self.token = "sealed" if sealed else "keys-" + os.urandom(8).hex()

    @classmethod
    def from_age_keys(cls, text: str, source: str, pgp: Callable[[str], bytes] | None = None) -> Keys:
        """Keys from the text of an age key file (``age-keygen``'s format: comments and
        one ``AGE-SECRET-KEY-1…`` per line). A bad line is an error naming the file and
        the line, never its text."""
        pyrage = _pyrage()
        identities = []
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if not line.startswith("AGE-SECRET-KEY-1"):
                raise ManifestError("not an age identity (AGE-SECRET-KEY-1…)", source, n, 1)
            try:
                identities.append(pyrage.x25519.Identity.from_str(line))
            except pyrage.IdentityError as err:
                raise ManifestError("not a valid age identity", source, n, 1) from err
        if not identities:
            raise ManifestError("no age identity (AGE-SECRET-KEY-1…) in the key file", source, 1, 1)
        return cls(identities, pgp)

    @property
    def recipients(self) -> tuple[str, ...]:
        """The public keys (``age1…``) of the age identities."""
        return tuple(str(i.to_public()) for i in self._age)

    def data_key(self, meta: dict[str, Any]) -> bytes:
        """The file's data key, opened by the first of its recipients these keys hold
        (age first, then PGP, as sops tries them)."""
        groups = meta.get("key_groups")
        if groups:
            if not isinstance(groups, list) or len(groups) != 1 or not isinstance(groups[0], dict):
                raise Problem(
                    "several key groups (Shamir secret sharing) are not supported: encrypt with one",
                    ("sops", "key_groups"),
                )
            meta = groups[0]
        pyrage = _pyrage()
        ages = _entries(meta, "age", ("recipient", "enc"))
        pgps = _entries(meta, "pgp", ("fp", "enc"))
        if not ages and not pgps:
            raise Problem("no age or PGP recipient in the file's sops metadata", ("sops",))
        for _recipient, enc in ages:
            if not self._age:
                break
            try:
                key = pyrage.decrypt(enc.encode(), list(self._age))
            except (pyrage.DecryptError, ValueError, TypeError):
                continue
            return _checked_key(key, ("sops", "age"))
        if self._pgp is not None:
            for _fp, enc in pgps:
                try:
                    key = self._pgp(enc)
                except (OSError, ValueError):
                    continue
                return _checked_key(key, ("sops", "pgp"))
        wanted = [_short(r) for r, _ in ages] + [f"PGP {fp}" for fp, _ in pgps]
        held = ", ".join(_short(r) for r in self.recipients) or "none"
        via = " or its PGP keyring" if self._pgp is not None else ""
        raise Problem(
            f"none of the host's keys opens this file: it is encrypted for {', '.join(wanted)}; "
            f"the host's age identities are for {held}{via}",
            ("sops",),
        )

    def __repr__(self) -> str:
        if self.sealed:
            return "Keys(sealed)"
        return f"Keys({len(self._age)} age identities{', pgp' if self._pgp else ''}; redacted)"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("Keys are not serialised: key material never leaves the process")


SEALED = Keys(sealed=True)


def _entries(meta: dict[str, Any], kind: str, fields: tuple[str, str]) -> list[tuple[str, str]]:
    raw = meta.get(kind)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise Problem(f"sops.{kind} must be a list", ("sops", kind))
    out = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or not all(isinstance(entry.get(f), str) for f in fields):
            raise Problem(f"sops.{kind}[{i}] needs {fields[0]} and {fields[1]}", ("sops", kind, i))
        out.append((str(entry[fields[0]]), str(entry[fields[1]])))
    return out


def _short(recipient: str) -> str:
    return recipient if len(recipient) <= 70 else recipient[:24] + "…" + recipient[-8:]


def _checked_key(key: bytes, field: tuple[str | int, ...]) -> bytes:
    if len(key) != 32:
        raise Problem("the file's data key is not 32 bytes", field)
    return key


# -- values ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rules:
    """Which values of a file are encrypted (``sops``' ``shouldBeEncrypted``)."""

    unencrypted_suffix: str = ""
    encrypted_suffix: str = ""
    unencrypted_regex: str = ""
    encrypted_regex: str = ""
    mac_only_encrypted: bool = False

    @classmethod
    def of(cls, meta: dict[str, Any]) -> _Rules:
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
                    re.compile(value)
                except re.error as err:
                    raise Problem(f"sops.{name} is not a regular expression", ("sops", name)) from err
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
        if self.unencrypted_regex and any(re.search(self.unencrypted_regex, p) for p in path):
            out = False
        if self.encrypted_regex:
            out = any(re.search(self.encrypted_regex, p) for p in path)
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


def _to_bytes(value: Any) -> bytes:
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
        raise Problem(f"{what} of {_dotted(field)} is not valid base64", field) from err


def _dotted(field: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in field) or "(the document)"


def _open_value(token: str, key: bytes, aad: str, field: tuple[str | int, ...]) -> tuple[bytes, str]:
    """(plaintext bytes, type) of one ``ENC[…]`` value."""
    m = _VALUE.fullmatch(token)
    if m is None:
        raise Problem(f"{_dotted(field)}: not a SOPS value (ENC[AES256_GCM,…])", field)
    data, iv, tag = (_b64(m.group(i), w, field) for i, w in ((1, "data"), (2, "iv"), (3, "tag")))
    kind = m.group(4)
    if kind not in _TYPES:
        raise Problem(f"{_dotted(field)}: unknown SOPS value type", field)
    if len(tag) != 16 or len(iv) < 8:
        raise Problem(f"{_dotted(field)}: malformed SOPS value", field)
    from cryptography.exceptions import InvalidTag

    try:
        plain = _aes(key).decrypt(iv, data + tag, aad.encode())
    except InvalidTag as err:
        raise Problem(
            f"{_dotted(field)} does not decrypt: the value was changed, moved from another field or "
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
        raise Problem(f"{_dotted(field)}: decrypted value is not UTF-8 text", field) from err
    if kind in ("str", "bytes", "time"):
        return text
    if kind == "int":
        if re.fullmatch(r"[+-]?[0-9]+", text) is None:
            raise Problem(f"{_dotted(field)}: decrypted value is not an integer", field)
        return int(text)
    if kind == "float":
        try:
            return float(text)
        except ValueError as err:
            raise Problem(f"{_dotted(field)}: decrypted value is not a number", field) from err
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise Problem(f"{_dotted(field)}: decrypted value is not a boolean", field)


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


class _Walk:
    """One pass over a file's documents, as sops walks them: every value in order, its
    path the keys above it (list items share their list's path)."""

    def __init__(self, meta: dict[str, Any], keys: Keys) -> None:
        self.rules = _Rules.of(meta)
        self.keys = keys
        self.key = b"" if keys.sealed else keys.data_key(meta)
        self.mac = hashlib.sha512()
        if self.rules.mac_only_encrypted:
            self.mac.update(_MAC_ONLY_ENCRYPTED_INIT)
        self.opened: dict[str, Any] = {}  # ciphertext -> value, for a text's substitution
        self.paths: set[str] = {":"}  # every branch's additional data (comments are opened with one)

    def value(self, node: Any, path: tuple[str, ...], field: tuple[str | int, ...]) -> Any:
        if isinstance(node, dict):
            self.paths.add(":".join(path) + ":")
            out = {}
            for k, v in node.items():
                if not isinstance(k, str):
                    raise Problem(f"{_dotted(field)}: a key that is not a string", field)
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
            raise Problem(f"{_dotted(field)}: expected an encrypted value", field)
        elif node == "":
            value = ""
        elif self.keys.sealed:
            if _VALUE.fullmatch(node) is None:
                raise Problem(f"{_dotted(field)}: not a SOPS value (ENC[AES256_GCM,…])", field)
            return stand_in(node)
        else:
            plain, kind = _open_value(node, self.key, ":".join(path) + ":", field)
            if kind == "comment":
                raise Problem(f"{_dotted(field)}: a comment where a value belongs", field)
            value = _typed(plain, kind, field)
            self.opened[node] = value
        if encrypted:
            mac_value = value
        if (not self.rules.mac_only_encrypted or encrypted) and mac_value is not None:
            self.mac.update(_to_bytes(mac_value))
        return value

    def verify(self, meta: dict[str, Any]) -> None:
        if self.keys.sealed:
            _mac_aad(meta)
            if not isinstance(meta.get("mac"), str) or _VALUE.fullmatch(meta["mac"]) is None:
                raise Problem("sops metadata without a MAC", ("sops", "mac"))
            return
        token = meta.get("mac")
        if not isinstance(token, str) or not token:
            raise Problem("sops metadata without a MAC", ("sops", "mac"))
        plain, _kind = _open_value(token, self.key, _mac_aad(meta), ("sops", "mac"))
        if not hmac.compare_digest(plain, self.mac.hexdigest().upper().encode()):
            raise Problem(
                "MAC mismatch: the file was changed after it was encrypted (a value, a key or their "
                "order); edit it with sops, or encrypt it again",
                ("sops", "mac"),
            )


# -- documents (YAML and JSON trees) ---------------------------------------------------------


def encrypted_documents(docs: Sequence[Any]) -> bool:
    """Whether parsed documents are a SOPS file (a top-level ``sops`` mapping with a MAC)."""
    return bool(docs) and isinstance(docs[0], dict) and _is_meta(docs[0].get("sops"))


def _is_meta(value: Any) -> bool:
    return isinstance(value, dict) and "mac" in value


def open_documents(docs: Sequence[Any], keys: Keys) -> list[Any]:
    """The documents of a SOPS YAML or JSON file in clear, ``sops`` keys removed.

    Raises ``Problem`` (field path and document index) when the file does not open."""
    return _open_documents(docs, keys).docs


@dataclass(frozen=True, slots=True)
class _Opened:
    docs: list[Any]
    walk: _Walk


def _open_documents(docs: Sequence[Any], keys: Keys) -> _Opened:
    if not encrypted_documents(docs):
        raise Problem("not a SOPS file: no sops metadata with a MAC")
    meta = docs[0]["sops"]
    walk = _Walk(meta, keys)
    out = []
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise Problem("a SOPS YAML document must be a mapping", (), i)
        body = {k: v for k, v in doc.items() if k != "sops"}
        try:
            out.append(walk.value(body, (), ()))
        except Problem as err:
            err.doc = i
            raise
    walk.verify(meta)
    return _Opened(out, walk)


def problem_at(err: Problem, data: bytes, path: str, doc_lines: Sequence[int]) -> ManifestError:
    """``err`` as a ``ManifestError`` at the line of its field in ``data`` (YAML or JSON)."""
    doc_line = doc_lines[err.doc] if err.doc < len(doc_lines) else (doc_lines[0] if doc_lines else 1)
    line, col = locate(data, doc_line, err.field) if err.field else (doc_line, 1)
    return ManifestError(f"SOPS: {err.message}", path, line, col)


# -- whole files (secretGenerator files and env files) ---------------------------------------


def file_format(data: bytes, name: str) -> str | None:
    """``yaml``, ``json``, ``binary`` or ``dotenv`` for an encrypted file, else None.

    By its marks, then by ``name``'s extension where they agree (Flux goes by the key's
    extension): a JSON envelope of one ``data`` value is binary unless named ``.json``."""
    if DOTENV_MARK in data and re.search(rb"(?m)^sops_mac=ENC\[", data):
        return "dotenv"
    if JSON_MARK in data and data.lstrip()[:1] == b"{":
        try:
            doc = json.loads(data)
        except ValueError:
            return None
        if not isinstance(doc, dict) or not _is_meta(doc.get("sops")):
            return None
        if set(doc) == {"data", "sops"} and not name.endswith(".json"):
            return "binary"
        return "json"
    if YAML_MARK in data and re.search(rb"(?m)^sops:", data):
        return "yaml"
    return None


def open_file(data: bytes, path: str, name: str, keys: Keys) -> bytes:
    """A whole encrypted file in clear, as its format writes it (``name``: the key or
    file name whose extension decides between JSON and binary). A file that is not
    encrypted comes back as it is."""
    fmt = file_format(data, name)
    if fmt is None:
        return data
    try:
        if fmt == "dotenv":
            return _open_dotenv(data, keys)
        if fmt in ("json", "binary"):
            doc = json.loads(data)
            opened = _open_documents([doc], keys)
            if fmt == "json":
                return (json.dumps(opened.docs[0], indent=4, ensure_ascii=False) + "\n").encode()
            if keys.sealed:
                return f"sops-encrypted {stand_in(data)}\n".encode()
            value = opened.docs[0].get("data")
            if not isinstance(value, str):
                raise Problem("a binary SOPS file needs a string data value", ("data",))
            return value.encode()
        return _open_yaml_text(data, path, keys)
    except Problem as err:
        if fmt == "dotenv":
            raise ManifestError(f"SOPS: {err.message}", path, _dotenv_line(data, err.field), 1) from err
        raise problem_at(err, data, path, [1]) from err
    except (ValueError, UnicodeDecodeError) as err:
        raise ManifestError("SOPS: the encrypted file does not parse", path, 1, 1) from err


def _open_yaml_text(data: bytes, path: str, keys: Keys) -> bytes:
    """A YAML file in clear as text: each value put back where its ciphertext stood (one
    line, double-quoted), encrypted comments opened, the ``sops`` block removed;
    everything else as written (a ``#cloud-config`` comment stays the first line)."""
    docs = parse_yaml_value(data, path)
    opened = _open_documents(docs, keys)
    text = data.decode("utf-8")
    if keys.sealed:
        return f"sops-encrypted {stand_in(data)}\n".encode()
    out: list[str] = []
    pos = 0
    for m in _VALUE.finditer(text):
        start, end = m.start(), m.end()
        out.append(text[pos:start])
        pos = end
        token = m.group(0)
        if token in opened.walk.opened:
            quote = text[start - 1 : start] if start else ""
            if quote in ("'", '"') and text[end : end + 1] == quote:
                out[-1] = out[-1][:-1]
                pos = end + 1
            out.append(_yaml_scalar(opened.walk.opened[token]))
        elif m.group(4) == "comment" and text[:start].rstrip(" ").endswith("#"):
            out.append(_open_comment(token, opened.walk))
        elif text[:start].rstrip(" ").endswith("mac:") or _in_sops_block(text, start):
            out.append(token)
        else:
            raise Problem("a SOPS value outside the file's structure (in a comment or a key)")
    out.append(text[pos:])
    return _without_sops_block("".join(out)).encode()


def _open_comment(token: str, walk: _Walk) -> str:
    for aad in sorted(walk.paths):
        try:
            plain, _kind = _open_value(token, walk.key, aad, ())
        except Problem:
            continue
        return plain.decode("utf-8", errors="replace")
    return token  # as sops does: a comment that does not open is left as it is


def _in_sops_block(text: str, index: int) -> bool:
    before = text[:index]
    starts = [m.start() for m in re.finditer(r"(?m)^sops:", before)]
    if not starts:
        return False
    tail = before[starts[-1] :].split("\n")[1:]
    return all(not line or line[0] in " \t#" for line in tail)


def _without_sops_block(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    skipping = False
    for line in lines:
        if line.startswith("sops:"):
            skipping = True
            continue
        if skipping and (not line or line[0] in " \t"):
            continue
        skipping = False
        out.append(line)
    joined = "\n".join(out)
    return joined + "\n" if text.endswith("\n") and not joined.endswith("\n") else joined


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return json.dumps(str(value), ensure_ascii=False)


def _dotenv_items(data: bytes) -> Iterator[tuple[int, str, str]]:
    """(line number, key, value) of a dotenv file as sops reads it (comments skipped)."""
    text = data.decode("utf-8")
    for n, line in enumerate(text.split("\n"), 1):
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise Problem("a dotenv line without '='", (n,))
        yield n, key, value.replace("\\n", "\n")


def _dotenv_line(data: bytes, field: Sequence[str | int]) -> int:
    if field and isinstance(field[0], int):
        return field[0]
    if field and isinstance(field[0], str):
        for n, key, _value in _dotenv_items(data):
            if key == field[0] or (key == "sops_mac" and field[0] == "sops"):
                return n
    return 1


def _unflatten(flat: dict[str, str]) -> dict[str, Any]:
    """sops' dotenv metadata (``age__list_0__map_enc``) as the nested mapping."""
    root: dict[str, Any] = {}
    for key, value in flat.items():
        tokens = re.split(r"__(list_[0-9]+|map_)", key)
        path: list[str | int] = [tokens[0]]
        for i in range(1, len(tokens), 2):
            sep, rest = tokens[i], tokens[i + 1]
            if sep.startswith("list_"):
                if rest:
                    raise Problem("malformed sops metadata in the dotenv file", ("sops",))
                path.append(int(sep[len("list_") :]))
            else:
                path.append(rest)
        node: Any = root
        for here, after in itertools.pairwise(path):
            fresh: Any = [] if isinstance(after, int) else {}
            if isinstance(node, list) and isinstance(here, int):
                node.extend([None] * (here + 1 - len(node)))
                node[here] = fresh if node[here] is None else node[here]
                node = node[here]
            elif isinstance(node, dict):
                node = node.setdefault(here, fresh)
            else:
                raise Problem("malformed sops metadata in the dotenv file", ("sops",))
        last = path[-1]
        if isinstance(node, list) and isinstance(last, int):
            node.extend([None] * (last + 1 - len(node)))
            node[last] = value
        elif isinstance(node, dict):
            node[last] = value
        else:
            raise Problem("malformed sops metadata in the dotenv file", ("sops",))
    return root


def _open_dotenv(data: bytes, keys: Keys) -> bytes:
    items = list(_dotenv_items(data))
    flat = {k[len("sops_") :]: v for _n, k, v in items if k.startswith("sops_")}
    meta = _unflatten(flat)
    body = {k: v for _n, k, v in items if not k.startswith("sops_")}
    walk = _Walk(meta, keys)
    lines = []
    for key, value in body.items():
        opened = walk.leaf(value, (key,), (key,))
        text = opened if isinstance(opened, str) else _to_bytes(opened).decode()
        lines.append(f"{key}={text.replace(chr(10), chr(92) + 'n')}\n")
    walk.verify(meta)
    return "".join(lines).encode()


# -- writing (what `reconciler encrypt` does, files sops reads) -----------------------------


def _seal_value(value: Any, key: bytes, aad: str, kind: str = "") -> str:
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
    sealed = _aes(key).encrypt(iv, plain, aad.encode())
    data, tag = sealed[:-16], sealed[-16:]
    b64 = base64.b64encode
    return (
        f"ENC[AES256_GCM,data:{b64(data).decode()},iv:{b64(iv).decode()},tag:{b64(tag).decode()},type:{kind}]"
    )


class _Sealer:
    def __init__(self, rules: _Rules, key: bytes) -> None:
        self.rules = rules
        self.key = key
        self.mac = hashlib.sha512()
        if rules.mac_only_encrypted:
            self.mac.update(_MAC_ONLY_ENCRYPTED_INIT)

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
            self.mac.update(_to_bytes(node))
        return _seal_value(node, self.key, ":".join(path) + ":") if encrypted else node


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
    pyrage = _pyrage()
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
    meta["mac"] = _seal_value(mac_text, key, lastmodified)
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
    rules = _Rules(
        rule.unencrypted_suffix,
        rule.encrypted_suffix,
        rule.unencrypted_regex,
        rule.encrypted_regex,
        rule.mac_only_encrypted,
    )
    if not any(
        (rule.unencrypted_suffix, rule.encrypted_suffix, rule.unencrypted_regex, rule.encrypted_regex)
    ):
        rules = _Rules(
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
        pairs = [(k, v) for _n, k, v in _dotenv_items(data)]
        lines = []
        for k, v in pairs:
            if k.startswith("sops_"):
                raise ValueError("a key starting with sops_ is reserved for SOPS metadata")
            if not rules.mac_only_encrypted or rules.encrypted((k,)):
                sealer.mac.update(v.encode())
            sealed = _seal_value(v, key, f"{k}:") if rules.encrypted((k,)) else v
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
