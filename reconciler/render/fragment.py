"""A pass-through fragment parsed: the ``<domain>`` tree its text holds, safely.

Input: the text of the annotation ``reconciler.kubevirt.io/domain-xml-passthrough``
(``render.passthrough``). Output: a ``Fragment`` (the tree with ``{uri}name`` tags, the
prefix the text gave each namespace, the line of each element), or ``FragmentError``
naming the line. Pure: no host, no files. Never expands an entity: a DOCTYPE or an
entity declaration is refused, and so is a fragment over ``MAX_FRAGMENT`` characters.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from xml.parsers import expat

MAX_FRAGMENT = 256 * 1024


class FragmentError(ValueError):
    """A fragment that cannot be kept: the message names the element and its line."""


@dataclass(slots=True)
class Fragment:
    """A parsed fragment: the ``<domain>`` tree (``{uri}name`` tags), the prefix its
    text gave each namespace, and the line of each element."""

    root: ET.Element
    prefixes: dict[str, str] = field(default_factory=dict)
    lines: dict[int, int] = field(default_factory=dict)

    def line(self, el: ET.Element) -> int:
        return self.lines.get(id(el), 0)


def parse_fragment(text: str) -> Fragment:
    """Parse a fragment; ``FragmentError`` for anything but a plain ``<domain>`` document."""
    if len(text) > MAX_FRAGMENT:
        raise FragmentError(f"is {len(text)} characters; a pass-through holds at most {MAX_FRAGMENT}")
    parser = expat.ParserCreate(namespace_separator="}")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    frag = Fragment(ET.Element("domain"))
    stack: list[ET.Element] = []
    roots: list[ET.Element] = []

    def name(raw: str) -> str:
        return "{" + raw if "}" in raw else raw

    def start(tag: str, attrs: dict[str, str]) -> None:
        el = ET.Element(name(tag), {name(k): v for k, v in attrs.items()})
        frag.lines[id(el)] = parser.CurrentLineNumber
        if stack:
            stack[-1].append(el)
        else:
            roots.append(el)
        stack.append(el)

    def end(tag: str) -> None:
        el = stack.pop()
        if el.text is not None:
            el.text = el.text.strip() or None  # blank: no text

    def chars(data: str) -> None:
        el = stack[-1] if stack else None
        if el is None:
            return
        if len(el):  # text between children: only whitespace is allowed
            if data.strip():
                raise FragmentError(f"line {parser.CurrentLineNumber}: text between elements")
            return
        el.text = (el.text or "") + data

    def refuse(*_: object) -> None:
        raise FragmentError(f"line {parser.CurrentLineNumber}: a DOCTYPE or entity is not allowed")

    def namespace(prefix: str | None, uri: str) -> None:
        if prefix:
            frag.prefixes.setdefault(uri, prefix)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.StartNamespaceDeclHandler = namespace
    try:
        parser.Parse(text, True)
    except expat.ExpatError as err:
        raise FragmentError(f"line {err.lineno}: not XML ({expat.errors.messages[err.code]})") from err
    if len(roots) != 1 or roots[0].tag != "domain":
        raise FragmentError("the root element must be <domain>")
    frag.root = roots[0]
    if frag.root.attrib:
        raise FragmentError("line 1: <domain> takes no attributes here (the spec renders them)")
    return frag
