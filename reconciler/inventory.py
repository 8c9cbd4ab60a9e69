"""Ownership: the reconciler's element in each domain's ``<metadata>``.

Input: domain XML strings and ``OwnershipMark`` records. Output: marked XML, parsed
marks. Pure. The namespace URI and element names are load-bearing (docs/architecture.md
lists them): changing them would orphan every domain already defined.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from reconciler.model import OwnershipMark, RevisionInfo

NS = "http://reconciler.kubevirt.io/xmlns/domain/v1"
PREFIX = "reconciler"
ROOT = "owner"
_Q = f"{{{NS}}}"

ET.register_namespace(PREFIX, NS)


def mark_element(mark: OwnershipMark) -> ET.Element:
    root = ET.Element(_Q + ROOT)
    for tag, value in (
        ("commit", mark.commit),
        ("path", mark.path),
        ("specHash", mark.spec_hash),
        ("runStrategy", mark.run_strategy),
        ("prune", "true" if mark.prune else "false"),
    ):
        ET.SubElement(root, _Q + tag).text = value
    for rev in mark.revisions:
        el = ET.SubElement(
            root,
            _Q + "revision",
            {"kind": rev.kind, "name": rev.name, "namespace": rev.namespace, "hash": rev.hash, "commit": rev.commit},
        )
        el.text = rev.data
    for preset in mark.presets:
        ET.SubElement(root, _Q + "preset").text = preset
    for path in mark.ephemeral:
        ET.SubElement(root, _Q + "ephemeral").text = path
    return root


def with_mark(xml: str, mark: OwnershipMark) -> str:
    """The domain XML with our element in ``<metadata>`` (other metadata kept)."""
    dom = ET.fromstring(xml)
    metadata = dom.find("metadata")
    if metadata is None:
        metadata = ET.Element("metadata")
        # <metadata> goes after name/uuid/title/description per the schema.
        pos = 0
        for i, child in enumerate(list(dom)):
            if child.tag in ("name", "uuid", "genid", "title", "description"):
                pos = i + 1
        dom.insert(pos, metadata)
    for old in metadata.findall(_Q + ROOT):
        metadata.remove(old)
    metadata.append(mark_element(mark))
    return ET.tostring(dom, encoding="unicode")


def _parse_mark(el: ET.Element) -> OwnershipMark:
    def text(tag: str) -> str:
        child = el.find(_Q + tag)
        return (child.text or "") if child is not None else ""

    revisions = tuple(
        RevisionInfo(
            kind=r.get("kind", ""),
            name=r.get("name", ""),
            namespace=r.get("namespace", ""),
            hash=r.get("hash", ""),
            commit=r.get("commit", ""),
            data=r.text or "",
        )
        for r in el.findall(_Q + "revision")
    )
    return OwnershipMark(
        commit=text("commit"),
        path=text("path"),
        spec_hash=text("specHash"),
        revisions=revisions,
        presets=tuple(p.text or "" for p in el.findall(_Q + "preset")),
        prune=text("prune") != "false",
        run_strategy=text("runStrategy"),
        ephemeral=tuple(p.text or "" for p in el.findall(_Q + "ephemeral")),
    )


def read_mark(xml: str) -> OwnershipMark | None:
    """Our mark in a domain's XML, or None for a domain we do not own."""
    if NS not in xml:  # cheap pre-check: most unowned domains never get parsed
        return None
    el = ET.fromstring(xml).find(f"metadata/{_Q}{ROOT}")
    return _parse_mark(el) if el is not None else None


def strip_mark(dom: ET.Element) -> ET.Element:
    """Remove our element (and an emptied <metadata>) from a parsed domain, in place."""
    metadata = dom.find("metadata")
    if metadata is not None:
        for old in metadata.findall(_Q + ROOT):
            metadata.remove(old)
        if len(metadata) == 0:
            dom.remove(metadata)
    return dom
