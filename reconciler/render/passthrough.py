"""Pass-through: domain XML a VM keeps beside what its spec renders.

Input: the annotation ``reconciler.kubevirt.io/domain-xml-passthrough`` of
``spec.template.metadata.annotations`` (the VMI's annotations: KubeVirt keeps and
ignores it, so the YAML stays valid KubeVirt YAML), an XML document whose root is
``<domain>``; and the ``<domain>`` tree the area modules built. Output: that tree with
the fragment merged in, and the essence paths (``model.xmlpaths``) the fragment wrote
and omitted, so compare, the plan and the PR diff name them. Pure: no host, no files.

The fragment is parsed by ``render.fragment`` and checked against the allowlist of
``render.allowlist``. Merge rules (docs/passthrough.md):

- a child of the fragment the rendered element lacks is added (``<pm>``, a SPICE
  ``<graphics>``, ``<features><vmport>``); one it has is merged into: attributes and
  text the rendered element lacks are added, one it has must be equal (a pass-through
  never changes what the spec renders: the error names both values);
- children of ``<devices>`` are matched by identity (a disk by its target, an interface
  by its MAC, a controller by type and index, an input by type and bus, a channel by
  its target name); any other device is added;
- ``p:omit="yes"`` (``xmlns:p="http://reconciler.kubevirt.io/xmlns/passthrough/v1"``)
  removes the rendered element it matches, only where ``RULES`` allows it (the guest
  agent channel, an interface's ``<rom>``); with attributes of its own, the element
  (with its children) is written instead of the rendered one.

Never lets a commit reach the host through it: every element and attribute of a
fragment is checked against ``RULES`` (an allowlist; a value check per attribute), so
no host path, host device, socket, emulator, password or network of the host can be
named; disks and interfaces are only merged into (their sources come from the spec and
the host config). A fragment with a DOCTYPE or an entity is refused.
"""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from dataclasses import field
from typing import TYPE_CHECKING

from reconciler.model import annotation_names
from reconciler.model.devices import KINDS
from reconciler.model.xmlpaths import element_paths
from reconciler.records import dataclass
from reconciler.render.allowlist import NS, OMIT, Rule, check_element, describe, rule_for
from reconciler.render.fragment import Fragment, FragmentError, parse_fragment

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.render.context import RenderContext
    from reconciler.settings.host import HostConfig

ANNOTATION = annotation_names.DOMAIN_XML_PASSTHROUGH
WHERE = f"spec.template.metadata.annotations[{ANNOTATION}]"


# -- merging ---------------------------------------------------------------------------


def identity(el: ET.Element) -> str | None:
    """A device's identity for matching a rendered one (its kind's, ``model.devices``; a
    controller without an index has none); None: it is always added."""
    kind = KINDS.get(el.tag)
    if kind is None or (el.tag == "controller" and el.get("index") is None):
        return None
    return kind.identity.key(el, 0)


def match_child(parent: ET.Element, child: ET.Element, devices: bool) -> ET.Element | None:
    if devices:
        key = identity(child)
        if key is None:
            return None
        return next((el for el in parent if el.tag == child.tag and identity(el) == key), None)
    name = child.get("name")
    same = [el for el in parent if el.tag == child.tag and (name is None or el.get("name") == name)]
    if len(same) > 1:
        raise FragmentError(f"{describe(child)} matches {len(same)} elements; give it a name")
    return same[0] if same else None


@dataclass(slots=True)
class _Merge:
    host: HostConfig
    frag: Fragment
    root: ET.Element  # the rendered <domain>
    added: list[tuple[ET.Element, str | None]] = field(default_factory=list)  # (element, attribute)
    omitted: list[str] = field(default_factory=list)

    def fail(self, el: ET.Element, message: str) -> FragmentError:
        line = self.frag.line(el)
        return FragmentError(f"line {line}: {message}" if line else message)

    def merge(self, frag: ET.Element, target: ET.Element, path: str) -> None:
        rule = rule_for(path) if path else Rule()
        assert rule is not None
        for name, value in frag.attrib.items():
            if name == OMIT:
                continue
            check = rule.attrs.get(name)
            if check is None or not check(value, self.host):
                raise self.fail(frag, check_element(path, frag, self.host, merge=True)[0])
            have = target.get(name)
            if have is None:
                target.set(name, value)
                self.added.append((target, name))
            elif have != value:
                raise self.fail(
                    frag,
                    f"{describe(frag)} sets {name}={value!r} where the spec renders {have!r}: "
                    "a pass-through never changes what the spec renders; change the spec",
                )
        if frag.text is not None:
            if rule.text is None or not rule.text(frag.text, self.host):
                raise self.fail(frag, check_element(path, frag, self.host, merge=True)[0])
            if target.text is None:
                target.text = frag.text
                self.added.append((target, ""))
            elif target.text != frag.text:
                raise self.fail(
                    frag, f"{describe(frag)} holds {frag.text!r} where the spec renders {target.text!r}"
                )
        for child in frag:
            self.child(child, target, f"{path}/{child.tag}" if path else str(child.tag), path == "devices")

    def child(self, child: ET.Element, target: ET.Element, path: str, devices: bool) -> None:
        rule = rule_for(path)
        if rule is None:
            raise self.fail(child, check_element(path, child, self.host, merge=True)[0])
        try:
            match = match_child(target, child, devices)
        except FragmentError as err:
            raise self.fail(child, str(err)) from None
        if child.get(OMIT) is not None:
            if child.get(OMIT) != "yes" or not rule.omit:
                raise self.fail(child, f"{describe(child)} cannot be omitted (only: {', '.join(OMITTABLE)})")
            if match is None:
                raise self.fail(child, f"{describe(child)}: the spec renders no such element to omit")
            if path == "devices/channel" and identity(match) != "org.qemu.guest_agent.0":
                raise self.fail(child, f"{describe(child)}: only the guest agent channel can be omitted")
            self.omitted.append(element_paths_of(self.root, match))
            index = list(target).index(match)
            target.remove(match)
            replacement = copy.deepcopy(child)
            del replacement.attrib[OMIT]
            if replacement.attrib:  # children alone only name what is omitted
                self.add(replacement, target, path, child, index)
            return
        if match is None:
            self.add(copy.deepcopy(child), target, path, child)
            return
        self.merge(child, match, path)

    def add(
        self, el: ET.Element, target: ET.Element, path: str, source: ET.Element, index: int | None = None
    ) -> None:
        problems = check_element(path, source, self.host)
        if problems:
            raise self.fail(source, problems[0])
        for inner in el.iter():
            if inner.get(OMIT) is not None:
                raise self.fail(source, f"{describe(inner)}: p:omit applies to a rendered element only")
        if index is None:
            target.append(el)
        else:
            target.insert(index, el)
        self.added.append((el, None))


def element_paths_of(root: ET.Element, el: ET.Element) -> str:
    got = element_paths(root).get(id(el))
    return got[0] if got is not None else el.tag


OMITTABLE = ("<channel> of the guest agent", "an interface's <rom>")


@dataclass(frozen=True, slots=True)
class Kept:
    """What a pass-through did to one domain: essence paths written, and omitted."""

    paths: tuple[str, ...] = ()
    omitted: tuple[str, ...] = ()


def merge_fragment(domain: ET.Element, text: str, host: HostConfig) -> Kept:
    """Merge the fragment ``text`` into ``domain`` (in place); ``FragmentError`` names
    what cannot be kept and its line."""
    frag = parse_fragment(text)
    m = _Merge(host, frag, domain)
    m.merge(frag.root, domain, "")
    paths = element_paths(domain)
    written: set[str] = set()
    # <metadata> added whole: each application's element is named on its own.
    added = [
        (c, None) if el.tag == "metadata" and attr is None else (el, attr)
        for el, attr in m.added
        for c in (el if el.tag == "metadata" and attr is None else [el])
    ]
    for el, attr in added:
        got = paths.get(id(el))
        if got is None:
            continue
        base = got[0]
        written.add(base if not attr else f"{base}@{attr}")
    _prefix(domain, frag.prefixes)
    return Kept(tuple(sorted(written)), tuple(sorted(m.omitted)))


def _prefix(domain: ET.Element, prefixes: Mapping[str, str]) -> None:
    """Namespaced tags ``{uri}name`` as ``prefix:name`` with their ``xmlns:prefix``
    (render.xml writes tags as they are)."""
    md = domain.find("metadata")
    if md is None:
        return
    for top in md:
        prefix_tree(top, dict(prefixes))


def prefix_tree(top: ET.Element, prefixes: dict[str, str]) -> None:
    """Rewrite ``top`` and below from ``{uri}name`` to ``prefix:name``, declaring each
    namespace on ``top``."""
    declared: dict[str, str] = {}

    def prefix(uri: str) -> str:
        if uri not in declared:
            p = prefixes.get(uri) or f"ns{len(declared)}"
            while p in declared.values():
                p += "x"
            declared[uri] = p
        return declared[uri]

    def rename(name: str) -> str:
        if name.startswith("{"):
            uri, local = name[1:].split("}", 1)
            return f"{prefix(uri)}:{local}"
        return name

    for el in top.iter():
        el.tag = rename(el.tag)
        if any(k.startswith("{") for k in el.attrib):
            el.attrib = {rename(k): v for k, v in el.attrib.items()}
    for uri, p in declared.items():
        top.set(f"xmlns:{p}", uri)


def render_passthrough(ctx: RenderContext, domain: ET.Element) -> Kept:
    """The VM's pass-through (its template's annotation) merged into ``domain`` (see the
    module doc)."""
    text = ctx.annotations.get(ANNOTATION)
    if text is None:
        return Kept()
    if not isinstance(text, str) or not text.strip():
        raise ctx.error(WHERE, "expected the XML of a <domain> fragment")
    try:
        return merge_fragment(domain, text, ctx.host)
    except FragmentError as err:
        raise ctx.error(WHERE, f"pass-through {err}") from None


def fragment_text(root: ET.Element, prefixes: Mapping[str, str]) -> str:
    """The text of a fragment tree (``{uri}name`` tags), as an annotation holds it:
    two-space indents, namespaces declared where they are first used."""
    tree = copy.deepcopy(root)
    for child in tree:
        if child.tag == "metadata":
            for top in child:
                prefix_tree(top, dict(prefixes))
    omit_used = any(OMIT in el.attrib for el in tree.iter())
    if omit_used:
        for el in tree.iter():
            if OMIT in el.attrib:
                value = el.attrib.pop(OMIT)
                el.attrib = {"p:omit": value, **el.attrib}
        tree.set("xmlns:p", NS)
    ET.indent(tree, "  ")
    return ET.tostring(tree, encoding="unicode") + "\n"
