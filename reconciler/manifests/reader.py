"""Parse the YAML documents every stage reads.

Input: the bytes of one file and its repository path. Output: ``Manifest`` records whose
``obj`` trees hold only dict, list, str, int, float, bool and None.
Pure: never opens a path, never touches git, the clock or the environment.

Parsing uses libyaml's parser and composer through PyYAML's C extension (composed
nodes keep their marks; PyYAML's are plain objects, made at less than half the cost of
ruamel's) with a small resolver and constructor of our own: it keeps each document's start line, rejects
duplicate keys, and resolves scalars the way YAML 1.2 does (``yes`` stays a string,
timestamps stay strings). Errors are ``ManifestError(message, path, line, column)``
with 1-based positions. Library types (nodes, marks) never leave ``manifests/``
(``positions`` finds a field's line with this module's loader).
Bounded: a document longer than ``limits.MAX_DOCUMENT_BYTES`` is refused before it is
composed, aliases and nesting are budgeted while it is built (``_Constructor``).
"""

from __future__ import annotations

import math
import re
import sys
from types import MappingProxyType
from typing import Any

from yaml import _yaml as libyaml  # PyYAML's C extension
from yaml.error import MarkedYAMLError, YAMLError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reconciler.errors import ManifestError
from reconciler.manifests.limits import MAX_DOCUMENT_BYTES
from reconciler.model import Manifest

_T = "tag:yaml.org,2002:"
_NULL, _BOOL, _INT, _FLOAT, _STR = _T + "null", _T + "bool", _T + "int", _T + "float", _T + "str"
_MAP, _SEQ, _MERGE, _BINARY = _T + "map", _T + "seq", _T + "merge", _T + "binary"


# Implicit tags of plain scalars: the YAML 1.2 core schema (as ruamel's resolver has it).
_IMPLICIT = (
    (_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")),
    (
        _FLOAT,
        re.compile(
            r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
            |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
            |[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?
            |[-+]?\.(?:inf|Inf|INF)
            |\.(?:nan|NaN|NAN))$""",
            re.VERBOSE,
        ),
    ),
    (_INT, re.compile(r"^(?=[-+0-9])(?:[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?[0-9_]+|[-+]?0x[0-9a-fA-F_]+)$")),
    (_NULL, re.compile(r"^(?:~|null|Null|NULL|)$")),
    (_MERGE, re.compile(r"^<<$")),
)


# First characters of plain scalars that may resolve to something other than a string
# (bool, int, float, null, merge); any other start is a string without a regex.
_MAYBE_TYPED = frozenset("tTfFnN~0123456789+-.<")
# The implicit tags a plain scalar starting with each of those may have (in
# ``_IMPLICIT``'s order): one or two patterns tried, not five.
_BY_FIRST = MappingProxyType(
    {
        **dict.fromkeys("tTfF", (_IMPLICIT[0],)),
        **dict.fromkeys("0123456789+-", (_IMPLICIT[1], _IMPLICIT[2])),
        ".": (_IMPLICIT[1],),
        **dict.fromkeys("nN~", (_IMPLICIT[3],)),
        "<": (_IMPLICIT[4],),
    }
)
_BY_CODE = tuple(_BY_FIRST.get(chr(code), ()) for code in range(128))  # the same, by ASCII code


class NodeLoader(libyaml.CParser):  # type: ignore[misc]  # a C extension class, untyped
    """libyaml's parser and composer (C, through PyYAML: its nodes are plain and cheap to
    make) with a small resolver of our own: it only tags plain scalars (bool, int,
    float, null; everything else is a string), with ruamel's resolver's YAML 1.2 rules.
    """

    def resolve(self, kind: type, value: str, implicit: Any) -> str:
        if kind is ScalarNode:
            if implicit[0]:
                if not value:
                    return _NULL
                code = ord(value[0])
                for tag, pattern in _BY_CODE[code] if code < 128 else ():
                    if pattern.match(value):
                        return tag
            return _STR
        return _SEQ if kind is SequenceNode else _MAP

    def descend_resolver(self, parent: Any, index: Any) -> None:
        pass

    def ascend_resolver(self) -> None:
        pass


def _tag(node: Node) -> str:
    """The node's tag (ours from ``NodeLoader.resolve``, else the one written, in full)."""
    return str(node.tag)


def compose(data: bytes) -> list[Node]:
    loader = NodeLoader(data)
    nodes = []
    while loader.check_node():
        nodes.append(loader.get_node())
    return nodes


def _tab_on_line(data: bytes, line: int) -> bool:
    """Whether 1-based ``line`` of ``data`` holds a tab (the usual culprit of a YAML error)."""
    lines = data.split(b"\n", line)
    return 0 < line <= len(lines) and b"\t" in lines[line - 1]


# libyaml refuses a document nested 1000 levels deep before any node reaches our budget.
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


def _error(err: Exception, path: str, data: bytes = b"") -> ManifestError:
    if isinstance(err, MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        problem = err.problem or err.context or "invalid YAML"
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        if problem == _LIBYAML_TOO_DEEP:  # libyaml's own bound, far past ours
            return ManifestError(f"YAML nested more than {MAX_DEPTH} levels deep", path, line, col)
        if line and _tab_on_line(data, line):
            problem += " (a tab character: YAML indents with spaces only)"
        return ManifestError(f"invalid YAML: {problem}", path, line, col)
    return ManifestError(f"invalid YAML: {err}", path)


# A line starting a new document (``---``) or ending one (``...``): never inside a
# scalar (block scalars are indented; a flow scalar may not hold one at column 0).
_DOCUMENT_MARK = re.compile(rb"^(?:---|\.\.\.)(?=[ \t\r\n]|$)", re.MULTILINE)


def _document_too_big(data: bytes, path: str) -> ManifestError | None:
    """The first document of ``data`` longer than ``MAX_DOCUMENT_BYTES``, before any is
    composed: a 20 MB VM costs a scan, not a gigabyte of nodes."""
    if len(data) <= MAX_DOCUMENT_BYTES:
        return None
    start = 0
    for m in [*_DOCUMENT_MARK.finditer(data), None]:
        end = m.start() if m is not None else len(data)
        if end - start > MAX_DOCUMENT_BYTES:
            line = data.count(b"\n", 0, start) + 1
            newline = data.find(b"\n", start)
            if start and not data[start : newline if newline >= 0 else len(data)].strip():
                line += 1  # the document starts on the line after its marker
            return ManifestError(
                f"a YAML document of more than {MAX_DOCUMENT_BYTES} bytes (1.5 MiB, the most the "
                "Kubernetes API server stores in one object)",
                path,
                line,
                1,
            )
        if m is not None:
            start = m.end()  # a document may start on its marker's line (``--- {a: b}``)
    return None


def _compose_all(data: bytes, path: str) -> list[Node]:
    if (too_big := _document_too_big(data, path)) is not None:
        raise too_big
    try:
        return compose(data)
    except YAMLError as err:
        raise _error(err, path, data) from err
    except UnicodeDecodeError as err:
        raise ManifestError("file is not valid UTF-8", path) from err


def _int(text: str) -> int:
    t = text.replace("_", "")
    sign = -1 if t.startswith("-") else 1
    t = t.lstrip("+-")
    if t.startswith(("0x", "0X")):
        return sign * int(t[2:], 16)
    if t.startswith(("0o", "0O")):
        return sign * int(t[2:], 8)
    if t.startswith(("0b", "0B")):
        return sign * int(t[2:], 2)
    if ":" in t:  # YAML 1.1 sexagesimal
        value = 0
        for part in t.split(":"):
            value = value * 60 + int(part)
        return sign * value
    return sign * int(t)


def _float(text: str) -> float:
    t = text.replace("_", "").lower()
    if t in (".inf", "+.inf"):
        return math.inf
    if t == "-.inf":
        return -math.inf
    if t == ".nan":
        return math.nan
    return float(t)


_YAML11_BOOLS = MappingProxyType(
    {
        **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
        **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
    }
)


def _scalar11(node: ScalarNode) -> Any:
    """YAML 1.1 reading of a plain scalar (what Go's sigs.k8s.io/yaml does): ``on`` is true."""
    if not node.style and node.value in _YAML11_BOOLS:
        return _YAML11_BOOLS[node.value]
    return _scalar(node)


def _scalar(node: ScalarNode) -> Any:
    tag = node.tag
    value = node.value
    if tag == _STR:  # short strings (keys, kinds, enums) repeat across documents: one copy each
        return _shared(value)
    if tag == _INT:
        try:
            return _int(value)
        except ValueError:
            return value
    if tag == _BOOL:
        return value.lower() in ("true", "yes", "on", "y")
    if tag == _NULL:
        return None
    if tag == _FLOAT:
        try:
            return _float(value)
        except ValueError:
            return value
    return value  # timestamps, binary and unknown tags stay text


def resolve_plain(text: str) -> tuple[str, Any]:
    """(short tag, value) of ``text`` read as a plain scalar: ``("int", 4)`` for ``"4"``,
    ``("str", "a b")``; what YAML's implicit typing makes of a value copied as text."""
    tag = _STR
    if text[:1] in _MAYBE_TYPED or text == "":
        for candidate, pattern in _IMPLICIT:
            if pattern.match(text):
                tag = candidate
                break
    try:
        if tag == _INT:
            return "int", _int(text)
        if tag == _FLOAT:
            return "float", _float(text)
    except ValueError:  # matched the pattern, yet no number
        return "str", text
    if tag == _BOOL:
        return "bool", text.lower() == "true"
    if tag == _NULL:
        return "null", None
    return "str", text


_INTERN_MAX = 64  # the longest word interned as read (keys, kinds, enums, names documents repeat)


def _shared(value: str) -> str:
    """``value``, interned if a word (short, one line, no host path): CPython's table never shrinks."""
    return value if len(value) > _INTERN_MAX or "\n" in value or value[:1] == "/" else sys.intern(value)


class ScalarText(str):
    """A scalar kept as its source text (``1.50``, ``~``), remembering its typed value."""

    typed: Any

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its class, text and attributes (a resting tree, ``model.trees``):
        the standard reduction's own, without its detour through ``copyreg``."""
        return type(self), (str(self),), self.__dict__


def _text_of(node: ScalarNode) -> str:
    text = ScalarText(node.value)
    text.typed = _scalar(node)
    return text


# Budgets of one file (a YAML "billion laughs" is 1 KB of aliases that expand to 10^9
# nodes; 10k nested brackets would exhaust Python's stack): far above any real manifest.
MAX_DEPTH = 100  # nested mappings and sequences (a KubeVirt VM needs about 15)
MAX_ALIAS_NODES = 100_000  # nodes built again because an alias (*name) refers to them


class _Constructor:
    """Nodes -> plain Python trees, reporting duplicate keys with their position.

    Enforces ``MAX_DEPTH`` and ``MAX_ALIAS_NODES``: an alias bomb or a deeply nested
    document fails fast, in little memory, with an error naming the file and line.
    """

    def __init__(
        self,
        path: str,
        text_fields: tuple[str, ...],
        yaml11: bool = False,
        last_key_wins: bool = False,
        anchors: bool = True,
    ) -> None:
        self.path = path
        # Without an anchor (``&``) in the file no node is shared: only the depth is kept.
        self.anchors = anchors
        self.depth = 0
        self.last_key_wins = last_key_wins
        self.duplicates: list[tuple[str, int, int]] = []  # (key, line, column) of each key given again
        self.text_fields = text_fields
        self.scalar = _scalar11 if yaml11 else _scalar
        # A string tag is a string as written (``item``), but for YAML 1.1's booleans.
        self.plain_strings = not yaml11
        self.building: set[int] = set()
        self.built: set[int] = set()  # collections built once; building one again expands an alias
        self.alias_nodes = 0

    def fail(self, node: Node, message: str) -> ManifestError:
        mark = node.start_mark
        return ManifestError(message, self.path, mark.line + 1, mark.column + 1)

    def value(self, node: Node) -> Any:
        kind = type(node)
        if kind is ScalarNode:
            return self.scalar(node)
        key = self.enter(node)
        try:
            if kind is SequenceNode:
                return [self.item(item) for item in node.value]
            if kind is MappingNode:
                return self.mapping(node)
        finally:
            self.leave(key)
        raise self.fail(node, f"unsupported YAML node {type(node).__name__}")

    def item(self, node: Node) -> Any:
        """A value of a sequence or mapping: a plain string made here (most of a
        document's scalars), anything else by ``value``."""
        return _shared(node.value) if node.tag is _STR and self.plain_strings else self.value(node)

    def enter(self, node: Node) -> int:
        """Start building a collection: check the depth and alias budgets (merge keys too)."""
        key = id(node)
        if not self.anchors:
            if self.depth >= MAX_DEPTH:
                raise self.fail(node, f"YAML nested more than {MAX_DEPTH} levels deep")
            self.depth += 1
            return key
        if key in self.building:
            raise self.fail(node, "recursive YAML alias")
        if len(self.building) >= MAX_DEPTH:
            raise self.fail(node, f"YAML nested more than {MAX_DEPTH} levels deep")
        if key in self.built:
            self.alias_nodes += len(node.value) or 1
            if self.alias_nodes > MAX_ALIAS_NODES:
                raise self.fail(node, f"YAML aliases expand to more than {MAX_ALIAS_NODES} nodes")
        else:
            self.built.add(key)
        self.building.add(key)
        return key

    def leave(self, key: int) -> None:
        """A collection ``enter`` started is built."""
        if self.anchors:
            self.building.discard(key)
        else:
            self.depth -= 1

    def mapping(self, node: MappingNode, text_values: bool = False) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        merged: dict[Any, Any] = {}
        plain, intern, shared = self.plain_strings, sys.intern, _shared
        for knode, vnode in node.value:
            if knode.value == "<<" and _tag(knode) == _MERGE:
                sources = vnode.value if isinstance(vnode, SequenceNode) else [vnode]
                for src in reversed(sources):
                    if not isinstance(src, MappingNode):
                        raise self.fail(src, "a merge key (<<) needs a mapping or a list of mappings")
                    entered = self.enter(src)
                    try:
                        merged.update(self.mapping(src))
                    finally:
                        self.leave(entered)
                continue
            if type(knode) is not ScalarNode:
                self.value(knode)  # its own errors first (depth, aliases), as any value's
                raise self.fail(knode, "mapping keys must be scalars")
            # A plain string (most keys and values) made here, as ``item`` makes it.
            key = knode.value
            if knode.tag is not _STR or not plain:
                key = self.scalar(knode)
            elif len(key) <= _INTERN_MAX:
                key = intern(key)
            if key in out:
                if not self.last_key_wins:
                    raise self.fail(knode, f"duplicate key {key!r}")
                self.duplicates.append((str(key), knode.start_mark.line + 1, knode.start_mark.column + 1))
            if vnode.tag is _STR and plain and not text_values:
                out[key] = shared(vnode.value)
            elif text_values and type(vnode) is ScalarNode:  # the source text: 1.50 stays "1.50", ~ stays "~"
                out[key] = _text_of(vnode)
            else:
                out[key] = self.value(vnode)
        if merged:
            for k, v in merged.items():
                out.setdefault(k, v)
        return out

    def document(self, node: Node) -> Any:
        if not (self.text_fields and isinstance(node, MappingNode)):
            return self.value(node)
        out = self.mapping(node)
        meta_node = next(
            (v for k, v in node.value if isinstance(k, ScalarNode) and k.value == "metadata"), None
        )
        if isinstance(meta_node, MappingNode) and isinstance(out.get("metadata"), dict):
            for knode, vnode in meta_node.value:
                if (
                    isinstance(knode, ScalarNode)
                    and knode.value in self.text_fields
                    and isinstance(vnode, MappingNode)
                ):
                    out["metadata"][knode.value] = self.mapping(vnode, text_values=True)
        return out


def _documents(
    data: bytes,
    path: str,
    text_fields: tuple[str, ...],
    yaml11: bool = False,
    last_key_wins: bool = False,
    duplicates: list[tuple[str, int, int]] | None = None,
) -> list[tuple[Any, int]]:
    nodes = _compose_all(data, path)
    ctor = _Constructor(path, text_fields, yaml11, last_key_wins, b"&" in data)
    if duplicates is not None:
        ctor.duplicates = duplicates
    out: list[tuple[Any, int]] = []
    for node in nodes:
        if isinstance(node, ScalarNode) and _tag(node) == _NULL and not node.value:
            continue
        obj = ctor.document(node)
        if obj is None:
            continue
        out.append((obj, node.start_mark.line + 1))
    return out


def parse_documents(data: bytes, path: str) -> tuple[Manifest, ...]:
    """Every non-empty document of a multi-document YAML file, with its start line.

    A document that is not a mapping is an error (Kubernetes-style files hold objects).
    """
    return tuple(_manifests(data, path, ()))


def _manifests(data: bytes, path: str, text_fields: tuple[str, ...]) -> list[Manifest]:
    out = []
    for obj, line in _documents(data, path, text_fields):
        if not isinstance(obj, dict):
            raise ManifestError(f"expected a mapping (an object), got {type(obj).__name__}", path, line, 1)
        out.append(Manifest(obj, path, line))
    return out


def parse_objects(data: bytes, path: str, text_fields: tuple[str, ...] = ("annotations",)) -> list[Manifest]:
    """Like ``parse_documents``, but the values of ``metadata.<text_fields>`` stay source text.

    That is what kustomize does (annotations are strings in Kubernetes): ``ratio: 1.50``
    becomes ``"1.50"`` (a ``ScalarText`` that remembers the typed value). Used by the
    overlay engine.
    """
    return _manifests(data, path, text_fields)


def parse_yaml_value(data: bytes | str, path: str, text_fields: tuple[str, ...] = ()) -> list[Any]:
    """All non-empty documents of ``data`` as plain values (lists, scalars or mappings)."""
    raw = data.encode() if isinstance(data, str) else data
    return [obj for obj, _line in _documents(raw, path, text_fields)]


def parse_yaml11(
    data: bytes, path: str, last_key_wins: bool = False, duplicates: list[tuple[str, int, int]] | None = None
) -> list[Any]:
    """Documents read with YAML 1.1 booleans (``yes``/``on``/``y`` are true), as Go's
    ``sigs.k8s.io/yaml`` reads a kustomization file (which also lets the last of two
    equal keys win: ``last_key_wins``; each key given again is added to ``duplicates``
    as (key, line, column))."""
    return [obj for obj, _line in _documents(data, path, (), True, last_key_wins, duplicates)]
