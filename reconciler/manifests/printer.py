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


# "-", "?" and ":" start a plain scalar when a non-space follows (``--flag``), as in
# go-yaml's emitter.
_PLAIN_OK = re.compile(r"^(?:[A-Za-z0-9_./(]|[-?:](?=\S))[^\x00-\x1f\x7f]*$")


_PLAIN_BAD = re.compile(r": |:$| #|\s$|^\s|[\x80-\U0010ffff]")


def _plain(s: str) -> bool:
    return bool(s) and bool(_PLAIN_OK.match(s)) and not _PLAIN_BAD.search(s) and not _AMBIGUOUS.match(s)


def _quote(s: str) -> str:
    if "'" not in s and s.isprintable():
        return "'" + s + "'"
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch.isprintable() and not 0xD800 <= code <= 0xDFFF and code != 0xFEFF:
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _text(s: str, texts: dict[str, str]) -> str:
    """``_string_text(s)``, remembered in ``texts`` for the rest of this dump."""
    got = texts.get(s)
    if got is None:
        got = texts[s] = _string_text(s)
    return got


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


def _string_text(s: str) -> str:
    """How a string is written."""
    if _plain(s):
        return s
    if not s or _AMBIGUOUS.match(s):
        # A string a reader would take for another type: double quotes, as kustomize
        # (go-yaml) writes it; single quotes are for strings YAML's syntax needs quoted.
        return '"' + s + '"'
    return _quote(s)


def _block_ok(s: str) -> bool:
    if (
        "\n" not in s
        or s.startswith("\n")
        or not s.strip()
        or any(c != "\n" and not c.isprintable() for c in s)
    ):
        return False
    lines = s.split("\n")
    if any(line != line.rstrip(" \t") for line in lines):
        return False  # trailing spaces would not survive a literal block reliably
    first = next((line for line in lines if line), "")
    return not first.startswith((" ", "\t"))


def _literal(s: str, indent: str, out: io.StringIO) -> None:
    if s.endswith("\n"):
        body = s[:-1]
        chomp = "+" if body.endswith("\n") else ""
    else:
        body = s
        chomp = "-"
    out.write("|" + chomp + "\n")
    for line in body.split("\n"):
        out.write((indent + line if line else "") + "\n")


def _key_text(key: Any, texts: dict[str, str]) -> str:
    if type(key) is str:
        return _text(key, texts)
    return _scalar_text(key) if isinstance(key, str) else _scalar_text(str(key) if key is not None else "")


def _emit(value: Any, indent: str, out: io.StringIO, texts: dict[str, str]) -> None:
    """Write ``value`` (already positioned after ``key:`` or ``- ``) and its newline."""
    if type(value) is str and "\n" not in value:  # the common case, first
        out.write(" " + _text(value, texts) + "\n")
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
    elif isinstance(value, str) and _block_ok(value):
        out.write(" ")
        _literal(value, indent, out)
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
        out.write(indent + _key_text(key, texts) + ":")
        val = obj[key]
        if isinstance(val, list) and val:
            out.write("\n")
            _emit_seq(val, indent, out, texts)
        else:
            _emit(val, indent + "  ", out, texts)


def _emit_seq(items: list[Any], indent: str, out: io.StringIO, texts: dict[str, str]) -> None:
    for item in items:
        if isinstance(item, dict) and item:
            first = True
            for key in _sorted_keys(item):
                out.write((indent + "- " if first else indent + "  ") + _key_text(key, texts) + ":")
                first = False
                val = item[key]
                if isinstance(val, list) and val:
                    out.write("\n")
                    _emit_seq(val, indent + "  ", out, texts)
                else:
                    _emit(val, indent + "    ", out, texts)
        elif isinstance(item, list) and item:
            out.write(indent + "-\n")
            _emit_seq(item, indent + "  ", out, texts)
        else:
            out.write(indent + "-")
            _emit(item, indent + "  ", out, texts)


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


_ATOMS = (str, int, float, bool, type(None))


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
