"""Where a field was written: the line and column of a field path in a YAML file.

Input: the bytes of a file, the line its document starts at and a field path (a
``FieldPath``); or a ``Manifest`` and a reader of the repository's files. Output:
1-based (line, column) of the field, walking as deep as the path exists (a missing
field reports its nearest parent); for a manifest, the file too: where an overlay set
the field (``Manifest.set_at``), else its own file. Error and report paths only: only
the document concerned is composed again (``reader``'s loader: the parser's nodes stay in
``manifests/``). Pure: never opens a path; the caller's reader reads the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from yaml.error import YAMLError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reconciler.errors import ManifestError
from reconciler.manifests.reader import NodeLoader, compose

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.model import FieldPath, Manifest


def locate(data: bytes, doc_line: int, field_path: FieldPath) -> tuple[int, int]:
    """1-based line and column of ``field_path`` in the document starting at ``doc_line``.

    Walks as deep as the path exists (a missing field reports its nearest parent).
    Returns ``(doc_line, 1)`` when the document is not found. Error paths only. Only that
    document is parsed again (from its line on), so locating an error in a file of many
    documents costs the document, not the file.
    """
    found = _locate_in(_document_at(data, doc_line), 1, field_path) if doc_line > 1 else None
    if found is not None:
        return found[0] + doc_line - 1, found[1]
    return _locate_in(data, doc_line, field_path) or (doc_line, 1)


def _document_at(data: bytes, doc_line: int) -> bytes:
    """``data`` from 1-based line ``doc_line`` on."""
    start = 0
    for _ in range(doc_line - 1):
        start = data.find(b"\n", start) + 1
        if start == 0:
            return b""
    return data[start:]


def _locate_in(data: bytes, doc_line: int, field_path: FieldPath) -> tuple[int, int] | None:
    """``locate`` in ``data`` (at ``doc_line`` 1: its first document); None when no
    document is there."""
    try:
        if doc_line == 1:  # the first document only
            loader = NodeLoader(data)
            nodes = [loader.get_node()] if loader.check_node() else []
        else:
            nodes = compose(data)
    except (YAMLError, UnicodeDecodeError):
        return None
    doc = nodes[0] if doc_line == 1 and nodes else None
    doc = doc or next((n for n in nodes if n.start_mark.line + 1 == doc_line), None)
    if doc is None:
        doc = next((n for n in nodes if n.start_mark.line + 1 >= doc_line), None)
    if doc is None:
        return None
    return _walk(doc, field_path)


class Positions:
    """Where the fields of one file's first document were written, the document composed
    once for every look-up (a kustomization of a thousand patches asks a thousand times:
    composing it for each would cost the square of its size)."""

    __slots__ = ("_data", "_root")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._root: Node | bool | None = False  # False: not composed yet; None: no document

    def of(self, field_path: FieldPath) -> tuple[int, int]:
        """``locate(data, 1, field_path)``."""
        if self._root is False:
            try:
                loader = NodeLoader(self._data)
                self._root = loader.get_node() if loader.check_node() else None
            except (YAMLError, UnicodeDecodeError):
                self._root = None
        if not isinstance(self._root, Node):
            return (1, 1)
        return _walk(self._root, field_path)

    def __reduce__(self) -> tuple[type[Positions], tuple[bytes]]:
        return (Positions, (self._data,))  # composed again where it is needed, never pickled


def _walk(doc: Node, field_path: FieldPath) -> tuple[int, int]:
    node: Node = doc
    pos = (node.start_mark.line + 1, node.start_mark.column + 1)
    for part in field_path:
        nxt: Node | None = None
        if isinstance(node, MappingNode) and isinstance(part, str):
            for k, v in node.value:
                if isinstance(k, ScalarNode) and k.value == part:
                    pos = (k.start_mark.line + 1, k.start_mark.column + 1)
                    nxt = v
                    break
        elif isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            nxt = node.value[part]
            pos = (nxt.start_mark.line + 1, nxt.start_mark.column + 1)
        if nxt is None:
            break
        node = nxt
    return pos


def field_position(m: Manifest, path: FieldPath, read: Callable[[str], bytes] | None) -> tuple[str, int, int]:
    """Where the value of ``path`` in document ``m`` was written: (file, line, column).

    A field an overlay set (a patch, a replacement, a generated name: ``Manifest.set_at``)
    is where that overlay wrote it (its kustomization line, or the field in the patch
    file); any other field is in ``m``'s own file. The document's line when the field
    cannot be found (or the file not read). Error and report paths only."""
    at = m.set_at(path) if path else None
    file, start = (at[0], at[1]) if at is not None else (m.path, m.line)
    if at is not None and at[1]:
        return file, at[1], 0
    start = start or 1
    if read is None or not file or not path:
        return file, start if file else 0, 0
    try:
        line, column = locate(read(file), start, path)
    except (OSError, KeyError, ValueError, ManifestError):
        return file, start, 0
    return file, line or start, column
