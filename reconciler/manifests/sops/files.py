"""SOPS files opened: parsed YAML and JSON documents, and whole files by their format.

Input: a file's parsed documents (a build's manifests) or its bytes (a
``secretGenerator``'s file or env file), its repository path and name, and ``Keys``.
Output: the documents in clear with their ``sops`` key removed; a whole file in clear
as its format writes it: YAML as text (each value put back where its ciphertext stood,
everything else as written), JSON re-indented, dotenv as ``KEY=value`` lines, binary
as its ``data``; with ``SEALED``, a file's stand-in. A file that is not encrypted comes
back as it is. A ``Problem`` becomes a ``ManifestError`` at the line of its field
(``problem_at``).

Knows the formats by their marks (Flux's) and, where they agree, by the file's
extension. Pure: never reads a file, the environment or the clock; no message holds a
value.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import TYPE_CHECKING, Any

from reconciler.errors import ManifestError
from reconciler.manifests.positions import locate
from reconciler.manifests.reader import parse_yaml_value
from reconciler.manifests.sops import Problem
from reconciler.manifests.sops.values import (
    DOTENV_MARK,
    JSON_MARK,
    VALUE,
    YAML_MARK,
    Walk,
    open_value,
    stand_in,
    to_bytes,
)
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from reconciler.manifests.sops.keys import Keys


def encrypted_documents(docs: Sequence[Any]) -> bool:
    """Whether parsed documents claim to be a SOPS file: any of them carries a top-level
    ``sops`` key (as Flux decides for a Secret). Such a file opens as SOPS or is an error
    (``_open_documents``): metadata that is no mapping or lacks a MAC of sops' shape never
    lets its ``ENC[…]`` text through as plain data."""
    return any(isinstance(d, dict) and "sops" in d for d in docs)


def checked_meta(docs: Sequence[Any]) -> dict[str, Any]:
    """The file's ``sops`` metadata (the first document's), shaped as sops writes it: a
    mapping with a ``mac`` that is an ``ENC[AES256_GCM,…]`` value; else a ``Problem`` at
    the ``sops`` key (or its ``mac``)."""
    first = docs[0] if docs else None
    meta = first.get("sops") if isinstance(first, dict) else None
    if meta is None:
        at = next((i for i, d in enumerate(docs) if isinstance(d, dict) and "sops" in d), 0)
        raise Problem(
            "a sops key in a document after the first: sops keeps its metadata in the first", ("sops",), at
        )
    if not isinstance(meta, dict):
        raise Problem(
            f"sops metadata must be a mapping, got {_shape(meta)}: encrypt the file with sops", ("sops",)
        )
    mac = meta.get("mac")
    if mac is None:
        raise Problem("sops metadata without a MAC (sops.mac): encrypt the file with sops", ("sops",))
    if not isinstance(mac, str) or VALUE.fullmatch(mac) is None:
        raise Problem(
            "sops.mac is not a SOPS value (ENC[AES256_GCM,…]): encrypt the file with sops", ("sops", "mac")
        )
    return meta


def _shape(value: Any) -> str:
    return "a list" if isinstance(value, list) else f"a {type(value).__name__}"


def open_documents(docs: Sequence[Any], keys: Keys) -> list[Any]:
    """The documents of a SOPS YAML or JSON file in clear, ``sops`` keys removed.

    Raises ``Problem`` (field path and document index) when the file does not open."""
    return _open_documents(docs, keys).docs


@dataclass(frozen=True, slots=True)
class _Opened:
    docs: list[Any]
    walk: Walk


def _open_documents(docs: Sequence[Any], keys: Keys) -> _Opened:
    meta = checked_meta(docs)
    walk = Walk(meta, keys)
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


def file_format(data: bytes, name: str) -> str | None:
    """``yaml``, ``json``, ``binary`` or ``dotenv`` for an encrypted file, else None.

    By its marks, then by ``name``'s extension where they agree (Flux goes by the key's
    extension): a JSON envelope of one ``data`` value is binary unless named ``.json``."""
    if DOTENV_MARK in data and re.search(rb"(?m)^sops_mac=ENC\[", data):
        return "dotenv"
    if (JSON_MARK in data or b'"sops"' in data) and data.lstrip()[:1] == b"{":
        try:
            doc = json.loads(data)
        except ValueError:
            return None
        if not isinstance(doc, dict) or "sops" not in doc:  # a sops key: SOPS, or an error
            return None
        if set(doc) == {"data", "sops"} and not name.endswith(".json"):
            return "binary"
        return "json"
    if re.search(rb"(?m)^sops:", data) and (YAML_MARK in data or name.lower().endswith((".yaml", ".yml"))):
        return "yaml"  # a YAML file with a top-level sops key: SOPS, or an error at its line
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
    for m in VALUE.finditer(text):
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


def _open_comment(token: str, walk: Walk) -> str:
    for aad in sorted(walk.paths):
        try:
            plain, _kind = open_value(token, walk.key, aad, ())
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


def dotenv_items(data: bytes) -> Iterator[tuple[int, str, str]]:
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
        for n, key, _value in dotenv_items(data):
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
    items = list(dotenv_items(data))
    flat = {k[len("sops_") :]: v for _n, k, v in items if k.startswith("sops_")}
    meta = _unflatten(flat)
    body = {k: v for _n, k, v in items if not k.startswith("sops_")}
    walk = Walk(meta, keys)
    lines = []
    for key, value in body.items():
        opened = walk.leaf(value, (key,), (key,))
        text = opened if isinstance(opened, str) else to_bytes(opened).decode()
        lines.append(f"{key}={text.replace(chr(10), chr(92) + 'n')}\n")
    walk.verify(meta)
    return "".join(lines).encode()
