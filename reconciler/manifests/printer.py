"""Print objects as YAML the way ``kubectl kustomize`` prints them, byte for byte.

Input: plain object trees (dicts, lists, scalars; ``ScalarText`` keeps a source
scalar's text). Output: a YAML stream (keys sorted, two-space indent, block literals
for multi-line strings, double quotes for strings another type would be read from).
Pure. How each string is written is worked out once per ``dump_documents`` (a fleet
repeats the same keys and values).
"""

from __future__ import annotations

import copy
import io
import math
import re
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from reconciler.model import Obj


# Strings a YAML 1.1 or 1.2 reader would resolve to something other than a string.
_AMBIGUOUS = re.compile(
    r"""^(?:
        ~|null|Null|NULL
      | y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF
      | [-+]?(?:0|[1-9][0-9_]*)(?::[0-5]?[0-9])+(?:\.[0-9_]*)?
      | [-+]?0b[01_]+ | [-+]?0o?[0-7_]+ | [-+]?0x[0-9a-fA-F_]+ | [-+]?[0-9][0-9_]*
      | [-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)? | [-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+
      | [-+]?\.(?:inf|Inf|INF) | \.(?:nan|NaN|NAN)
      | [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?
            (?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)?
      | <<|=
    )\Z""",  # \Z, not $: "0\n" is a string with a newline, not the number 0
    re.VERBOSE,
)


# Strings go-yaml writes plain whatever the rest of ``_Scalar`` says (unless ambiguous):
# a letter, digit, ``_`` or ``/`` first, then printable ASCII but ``:`` and ``#``, no
# space last. Most of a build's strings; the character-by-character analysis is for the rest.
_SIMPLE = re.compile(r"[A-Za-z0-9_/](?:[ !\"$-9;-~]*[!\"$-9;-~])?\Z")


_ASCII = re.compile(r"[\n -~]*\Z")  # printable ASCII and line feeds (no tab, no other break)


_WIDTH = 80  # go-yaml's best width: a plain or quoted scalar folds at a space past it
_INDICATORS_FIRST = frozenset("#,[]{}&*!|>'\"%@`")
_FLOW = frozenset(",?[]{}")
_BREAKS = frozenset("\n\r\x85\u2028\u2029")


def _printable(ch: str) -> bool:
    """go-yaml's ``is_printable`` (over UTF-8), per character."""
    c = ord(ch)
    return c == 0x0A or 0x20 <= c <= 0x7E or 0xA0 <= c <= 0xD7FF or (0xE000 <= c <= 0xFFFD and c != 0xFEFF)


class _Scalar:
    """What go-yaml's emitter allows for one string (``yaml_emitter_analyze_scalar``)."""

    __slots__ = ("block", "block_plain", "multiline", "single")

    def __init__(self, s: str) -> None:
        self.multiline = False
        if not s:
            self.block_plain, self.single, self.block = True, True, False
            return
        if _ASCII.match(s):  # printable ASCII lines, no tab: the flags at once
            self._ascii(s)
            return
        block_ind = s.startswith(("---", "..."))
        leading_space = leading_break = trailing_space = trailing_break = False
        break_space = space_break = tabs = special = line_breaks = False
        prev_space = prev_break = False
        preceded_ws = True
        n = len(s)
        for i, ch in enumerate(s):
            followed_ws = i + 1 >= n or s[i + 1] in " \t"
            if i == 0:
                if ch in _INDICATORS_FIRST or (ch in "?:-" and followed_ws):
                    block_ind = True
            elif (ch == ":" and followed_ws) or (ch == "#" and preceded_ws):
                block_ind = True
            if ch == "\t":
                tabs = True
            elif not _printable(ch):
                special = True
            if ch == " ":
                leading_space = leading_space or i == 0
                trailing_space = trailing_space or i == n - 1
                break_space = break_space or prev_break
                prev_space, prev_break = True, False
            elif ch in _BREAKS:
                line_breaks = True
                leading_break = leading_break or i == 0
                trailing_break = trailing_break or i == n - 1
                space_break = space_break or prev_space
                prev_space, prev_break = False, True
            else:
                prev_space = prev_break = False
            preceded_ws = ch in " \t" or ch in _BREAKS
        self.multiline = line_breaks
        self.block_plain = not (
            leading_space or leading_break or trailing_space or trailing_break or break_space
        ) and not (space_break or tabs or special or line_breaks or block_ind)
        self.single = not (break_space or space_break or tabs or special)
        self.block = not (trailing_space or space_break or special)

    def _ascii(self, s: str) -> None:
        """The loop's flags for printable ASCII lines (no tab, ``\n`` the only break): no
        special characters; the rest is found by what surrounds spaces, breaks, ``:``
        and ``#``."""
        first, last = s[0], s[-1]
        block_ind = (
            s.startswith(("---", "..."))
            or first in _INDICATORS_FIRST
            or (first in "?:-" and (len(s) == 1 or s[1] == " "))
            or s.find(": ", 1) != -1
            or (len(s) > 1 and last == ":")
            or " #" in s
            or "\n#" in s
        )
        self.multiline = "\n" in s
        break_space, space_break = "\n " in s, " \n" in s
        self.block_plain = not (
            first in " \n" or last in " \n" or break_space or space_break or self.multiline or block_ind
        )
        self.single = not (break_space or space_break)
        self.block = not (last == " " or space_break)


def _plain(s: str) -> bool:
    """A string written without quotes: it reads back as this string, and YAML's syntax allows it."""
    return bool(s) and not _AMBIGUOUS.match(s) and _Scalar(s).block_plain


def _style(s: str, key: bool) -> str:
    """go-yaml's choice for a string (``encoder.stringv``, then ``select_scalar_style``):
    ``plain``, ``single``, ``double`` or ``literal``."""
    if _SIMPLE.match(s) and not _AMBIGUOUS.match(s):
        return "plain"
    info = _Scalar(s)
    if "\n" in s:
        return "literal" if info.block and not key else "double"
    if not s or _AMBIGUOUS.match(s) or (key and info.multiline):
        return "double"
    if info.block_plain:
        return "plain"
    return "single" if info.single else "double"


_ESCAPES = MappingProxyType(
    {
        0x00: "0", 0x07: "a", 0x08: "b", 0x09: "t", 0x0A: "n", 0x0B: "v", 0x0C: "f", 0x0D: "r",
        0x1B: "e", 0x22: '"', 0x5C: "\\", 0x85: "N", 0xA0: "_", 0x2028: "L", 0x2029: "P",
    }
)  # fmt: skip


def _escaped(ch: str) -> str:
    c = ord(ch)
    if c in _ESCAPES:
        return "\\" + _ESCAPES[c]
    if c <= 0xFF:
        return f"\\x{c:02X}"
    if c <= 0xFFFF:
        return f"\\u{c:04X}"
    return f"\\U{c:08X}"


def _folded(s: str, style: str, col: int, indent: str) -> str:
    """``s`` written in ``style`` starting at column ``col`` (after the space that
    precedes it), folded at a space past go-yaml's width onto lines at ``indent``
    (``write_plain_scalar``, ``write_single_quoted_scalar``, ``write_double_quoted_scalar``)."""
    out: list[str] = []
    if style != "plain":
        out.append("'" if style == "single" else '"')
        col += 1
    spaces = False
    n = len(s)
    for i, ch in enumerate(s):
        if ch == " ":
            inner = style == "plain" or 0 < i < n - 1
            nxt = s[i + 1] if i + 1 < n else ""
            if not spaces and col > _WIDTH and inner and (style == "double" or nxt != " "):
                out.append("\n" + indent)
                col = len(indent)
                if style == "double" and nxt == " ":
                    out.append("\\")
                    col += 1
            else:
                out.append(" ")
                col += 1
            spaces = True
            continue
        spaces = False
        if style == "single" and ch == "'":
            out.append("''")
            col += 2
        elif style == "double" and (
            not _printable(ch) or ch == "\ufeff" or ch in _BREAKS or ch == '"' or ch == "\\"
        ):
            text = _escaped(ch)
            out.append(text)
            col += len(text)
        else:
            out.append(ch)
            col += 1
    if style != "plain":
        out.append("'" if style == "single" else '"')
    return "".join(out)


def _literal(s: str, indent: str) -> str:
    """``|`` block (``write_literal_scalar``): an indentation hint when the text starts
    with a space or a break, the chomping indicator from its last breaks."""
    hint = "2" if s[0] in " \n" else ""
    if not s.endswith("\n"):
        chomp = "-"
    elif len(s) == 1 or s[-2] == "\n":
        chomp = "+"
    else:
        chomp = ""
    parts = s.split("\n")
    body = "\n".join(indent + p if p else "" for p in parts)
    return "|" + hint + chomp + "\n" + body + ("" if s.endswith("\n") else "\n")


def _text(s: str, texts: dict[str, str]) -> str:
    """How a one-line string is written when it cannot fold, remembered in ``texts``
    for the rest of this dump."""
    got = texts.get(s)
    if got is None:
        got = texts[s] = _string_text(s)
    return got


def _value(s: str, col: int, indent: str, texts: dict[str, str]) -> str:
    """A string value written after ``key:`` or ``-`` (which end at column ``col``),
    with its line break."""
    if "\n" not in s:
        text = _text(s, texts)
        if col + len(text) <= _WIDTH:  # no space of it can lie past the width: the common case
            return " " + text + "\n"
    style = _style(s, key=False)
    if style == "literal":
        return " " + _literal(s, indent)
    return " " + _folded(s, style, col + 1, indent) + "\n"


def _scalar_text(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))  # JSON numbers: kustomize prints 1.0 as 1
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"  # a YAML 1.1 float needs the dot
        return text
    return _string_text(str(value))


def _string_text(s: str, key: bool = False) -> str:
    """How a string is written on one line (a key, or a value too short to fold)."""
    style = _style(s, key)
    if style == "plain":
        return s
    if style == "literal":
        style = "double"
    return _folded(s, style, 0, "")


def _key_text(key: Any, texts: dict[str, str]) -> str:
    text = key if isinstance(key, str) else str(key) if key is not None else ""
    got = texts.get("\x00key:" + text)
    if got is None:
        got = texts["\x00key:" + text] = _string_text(text, key=True)
    return got


def _emit(value: Any, col: int, indent: str, out: io.StringIO, texts: dict[str, str]) -> None:
    """Write ``value`` (already positioned after ``key:`` or ``-``, ending at column
    ``col``) and its newline; ``indent``: where its continuation lines start."""
    if isinstance(value, str):
        out.write(_value(value, col, indent, texts))
    elif isinstance(value, dict):
        if not value:
            out.write(" {}\n")
            return
        out.write("\n")
        _emit_map(value, indent, out, texts)
    elif isinstance(value, list):
        if not value:
            out.write(" []\n")
            return
        out.write("\n")
        _emit_seq(value, indent, out, texts)
    else:
        out.write(" " + _scalar_text(value) + "\n")


def _sorted_keys(obj: dict[Any, Any]) -> list[Any]:
    """Keys in kustomize's order (by their text); plain string keys sort without ``str``."""
    keys = list(obj)
    if all(type(k) is str for k in keys):
        keys.sort()  # plain strings: the same order, without a str() per key
        return keys
    return sorted(keys, key=str)


def _emit_map(obj: dict[Any, Any], indent: str, out: io.StringIO, texts: dict[str, str]) -> None:
    for key in _sorted_keys(obj):
        head = indent + _key_text(key, texts) + ":"
        out.write(head)
        val = obj[key]
        if isinstance(val, list) and val:
            out.write("\n")
            _emit_seq(val, indent, out, texts)
        else:
            _emit(val, len(head), indent + "  ", out, texts)


def _emit_seq(items: list[Any], indent: str, out: io.StringIO, texts: dict[str, str]) -> None:
    for item in items:
        if isinstance(item, dict) and item:
            first = True
            for key in _sorted_keys(item):
                head = (indent + "- " if first else indent + "  ") + _key_text(key, texts) + ":"
                out.write(head)
                first = False
                val = item[key]
                if isinstance(val, list) and val:
                    out.write("\n")
                    _emit_seq(val, indent + "  ", out, texts)
                else:
                    _emit(val, len(head), indent + "    ", out, texts)
        elif isinstance(item, list) and item:
            out.write(indent + "-\n")
            _emit_seq(item, indent + "  ", out, texts)
        else:
            out.write(indent + "-")
            _emit(item, len(indent) + 1, indent + "  ", out, texts)


def dump_documents(objs: Iterable[Obj]) -> str:
    """Block-style YAML documents separated by ``---``, keys sorted, like kustomize prints."""
    out = io.StringIO()
    texts: dict[str, str] = {}  # how each string is written, for this dump
    for i, obj in enumerate(objs):
        if i:
            out.write("---\n")
        if obj:
            _emit_map(obj, "", out, texts)
        else:
            out.write("{}\n")
    return out.getvalue()


_ATOMS = frozenset((str, int, float, bool, type(None)))  # a set: one hash lookup per value, not five compares


def clone(value: Any) -> Any:
    """A deep copy of a parsed document (plain dicts, lists and scalars: copied by hand,
    several times faster than ``copy.deepcopy``; anything else goes through it)."""
    t = type(value)
    if t is dict:
        return {k: v if type(v) in _ATOMS else clone(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _ATOMS else clone(v) for v in value]
    if t in _ATOMS or isinstance(value, str):  # ScalarText: a str, immutable as any
        return value
    return copy.deepcopy(value)
