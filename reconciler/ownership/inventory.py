"""Ownership: the reconciler's element in each domain's ``<metadata>``.

Input: domain XML strings or element trees and ``OwnershipMark`` records (and, to read
marks, the caller's ``MarkCache``). Output: marked trees and XML, parsed marks. Pure. The
namespace URI and element names are load-bearing (docs/architecture.md lists them):
changing them would orphan every domain already defined.
"""

from __future__ import annotations

import hashlib
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace

from reconciler.context import RevisionCache
from reconciler.model import ConfigDigest, OwnershipMark, RenderedDomain, RevisionInfo

NS = "http://reconciler.kubevirt.io/xmlns/domain/v1"
PREFIX = "reconciler"
ROOT = "owner"
_Q = f"{{{NS}}}"

ET.register_namespace(PREFIX, NS)


def mark_element(mark: OwnershipMark) -> ET.Element:
    root = ET.Element(_Q + ROOT)
    for tag, value in (
        *((("ownedBy", mark.owner),) if mark.owner else ()),
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
            {
                "kind": rev.kind,
                "name": rev.name,
                "namespace": rev.namespace,
                "hash": rev.hash,
                "commit": rev.commit,
            },
        )
        el.text = rev.data
    for preset in mark.presets:
        ET.SubElement(root, _Q + "preset").text = preset
    for path in mark.ephemeral:
        ET.SubElement(root, _Q + "ephemeral").text = path
    for c in mark.config:
        ET.SubElement(root, _Q + "config", {"volume": c.volume, "hash": c.digest}).text = c.label
    for path, capacity in mark.volumes:
        ET.SubElement(root, _Q + "volume", {"capacity": str(capacity)}).text = path
    if mark.grace_period_s:
        ET.SubElement(root, _Q + "gracePeriodSeconds").text = str(mark.grace_period_s)
    for device in mark.unplugs:
        ET.SubElement(root, _Q + "unplug").text = device
    for op in mark.refused:
        ET.SubElement(root, _Q + "refused").text = op
    if mark.adopted_from:
        ET.SubElement(root, _Q + "adoptedFrom").text = mark.adopted_from
    if mark.released:
        ET.SubElement(root, _Q + "released").text = "true"
    if mark.intent:
        ET.SubElement(root, _Q + "intent").text = mark.intent
    if mark.started:
        ET.SubElement(
            root,
            _Q + "run",
            {"started": "true", "lastStart": f"{mark.last_start:.3f}", "restarts": str(mark.restarts)},
        )
    return root


def mark_xml(mark: OwnershipMark) -> str:
    """The mark as a standalone element (for libvirt's metadata API)."""
    # libvirt adds its own prefix declaration: the element comes with a default namespace.
    root = mark_element(mark)
    for el in root.iter():
        el.tag = el.tag.removeprefix(_Q)
    root.set("xmlns", NS)
    return ET.tostring(root, encoding="unicode")


def mark_for(
    d: RenderedDomain,
    commit: str,
    previous: OwnershipMark | None = None,
    owner: str = "",
    *,
    started: bool = False,
) -> OwnershipMark:
    """The mark a definition of ``d`` at ``commit`` by ``owner`` carries; run bookkeeping kept from ``previous``.
    ``started`` (no ``previous``): the reconciler started the domain it created, at 0 with no
    restart, as ``with_start(mark, 0.0, 0)`` says, made without a second record."""
    mark = OwnershipMark(
        started=started,
        owner=owner,
        commit=commit,
        path=d.source_path,
        spec_hash=d.spec_hash,
        revisions=d.revisions,
        presets=d.presets,
        prune=d.prune,
        run_strategy=str(d.run_strategy),
        ephemeral=d.ephemeral_paths,
        grace_period_s=d.grace_period_s,
        config=d.config,
        volumes=created_sizes(d, previous),
    )
    if previous is not None:
        mark = replace(
            mark,
            started=previous.started,
            last_start=previous.last_start,
            restarts=previous.restarts,
            unplugs=previous.unplugs,
            refused=previous.refused,
            # Adopted from another owner now, or earlier (kept: adoption is one-time).
            adopted_from=previous.owner
            if previous.owner and previous.owner != owner
            else previous.adopted_from,
        )
    return mark


def adopted_mark(d: RenderedDomain, commit: str, previous: OwnershipMark | None, owner: str) -> OwnershipMark:
    """The mark of a domain ``owner`` adopts (from another owner, or unmanaged)."""
    mark = mark_for(d, commit, previous, owner)
    return mark if mark.adopted_from else replace(mark, adopted_from="unmanaged")


SIZED_KINDS = ("file", "pool-volume")  # created once with a size, never resized nor recreated


def created_sizes(d: RenderedDomain, previous: OwnershipMark | None) -> tuple[tuple[str, int], ...]:
    """The size each sized disk of ``d`` was created with: as ``previous`` recorded it, else
    (a disk new to this definition) the size ``d`` asks."""
    before = dict(previous.volumes) if previous is not None else {}
    return tuple(
        (v.path, before.get(v.path, v.capacity))
        for v in d.volumes
        if v.kind in SIZED_KINDS and v.capacity > 0 and not v.ephemeral and not v.must_exist
    )


def mark_current(mark: OwnershipMark, d: RenderedDomain) -> bool:
    """Whether ``mark`` already records everything about ``d`` except the commit."""
    return (
        mark.spec_hash == d.spec_hash
        and mark.path == d.source_path
        and mark.prune == d.prune
        and mark.run_strategy == d.run_strategy
        and mark.grace_period_s == d.grace_period_s
        and mark.revisions == d.revisions
        and mark.presets == d.presets
        and mark.ephemeral == d.ephemeral_paths
        and mark.config == d.config
    )


def with_start(mark: OwnershipMark, now: float, restarts: int) -> OwnershipMark:
    """The mark after the reconciler started the domain at ``now`` (a cold boot: no unplug
    pending, no refused live operation waiting, no restart left to do)."""
    return replace(mark, started=True, last_start=now, restarts=restarts, unplugs=(), refused=(), intent="")


def with_mark(xml: str, mark: OwnershipMark) -> str:
    """The domain XML with our element in ``<metadata>`` (other metadata kept)."""
    dom = ET.fromstring(xml)
    add_mark(dom, mark)
    return ET.tostring(dom, encoding="unicode")


def add_mark(dom: ET.Element, mark: OwnershipMark) -> None:
    """Put our element into the domain's ``<metadata>``, in place (replacing an older one;
    other metadata kept)."""
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


class MarkCache:
    """Marks read back from a host's domains, kept for its next listing (the caller's:
    the ``Hypervisor`` keeps one per connection), under the project's one eviction rule,
    a run being one listing (``end_run``): parsed marks by a digest of their text (an
    unchanged mark is parsed once, and the store holds a 128-bit number per domain
    instead of its text), and the captured revisions in them by content (every VM of one
    instancetype holds the same one, so they share one object and one copy of its JSON),
    and so each mark's tuple of them; the disk sizes in them likewise (one number for
    every VM's 10 GiB root disk), kept while the connection is (a handful of values, and
    a mark parsed later shares the one its neighbours hold: the store's bound is its limit)."""

    __slots__ = ("marks", "revision_sets", "revisions", "sizes")

    def __init__(self) -> None:
        self.marks: RevisionCache[int, OwnershipMark] = RevisionCache()  # _NOT_OURS: no mark
        self.revisions: RevisionCache[tuple[str, ...], RevisionInfo] = RevisionCache()
        self.revision_sets: RevisionCache[tuple[RevisionInfo, ...], tuple[RevisionInfo, ...]] = (
            RevisionCache()
        )
        self.sizes: RevisionCache[int, int] = RevisionCache()

    def end_run(self) -> None:
        self.marks.end_run()
        self.revisions.end_run()
        self.revision_sets.end_run()


def _revision(r: ET.Element, cache: MarkCache | None) -> RevisionInfo:
    key = (*tuple(r.get(a, "") for a in ("kind", "name", "namespace", "hash", "commit")), r.text or "")
    got = cache.revisions.get(key) if cache is not None else None
    if got is None:
        got = RevisionInfo(*key)
        if cache is not None:
            cache.revisions.put(key, got)
    return got


def _parse_mark(el: ET.Element, cache: MarkCache | None = None) -> OwnershipMark:
    def text(tag: str) -> str:
        child = el.find(_Q + tag)
        return sys.intern(child.text or "") if child is not None else ""  # commits repeat

    revisions = tuple(_revision(r, cache) for r in el.findall(_Q + "revision"))
    if revisions and cache is not None:  # one tuple for the VMs of one instancetype and preference
        shared = cache.revision_sets.get(revisions)
        if shared is None:
            cache.revision_sets.put(revisions, revisions)
        else:
            revisions = shared
    run = el.find(_Q + "run")
    started, last_start, restarts = False, 0.0, 0
    if run is not None:
        started = run.get("started") == "true"
        try:
            last_start = float(run.get("lastStart") or 0)
            restarts = int(run.get("restarts") or 0)
        except ValueError:
            last_start, restarts = 0.0, 0
    return OwnershipMark(
        commit=text("commit"),
        path=text("path"),
        spec_hash=text("specHash"),
        revisions=revisions,
        presets=tuple(p.text or "" for p in el.findall(_Q + "preset")),
        prune=text("prune") != "false",
        run_strategy=text("runStrategy"),
        ephemeral=tuple(sys.intern(p.text or "") for p in el.findall(_Q + "ephemeral")),  # the rendered paths
        grace_period_s=int(text("gracePeriodSeconds") or 0) if text("gracePeriodSeconds").isdigit() else 0,
        started=started,
        last_start=last_start,
        restarts=restarts,
        unplugs=tuple(u.text or "" for u in el.findall(_Q + "unplug")),
        refused=tuple(u.text or "" for u in el.findall(_Q + "refused")),
        adopted_from=text("adoptedFrom"),
        released=text("released") == "true",
        owner=text("ownedBy"),
        intent=text("intent"),
        config=tuple(
            ConfigDigest(
                sys.intern(c.get("volume", "")), sys.intern(c.text or ""), sys.intern(c.get("hash", ""))
            )
            for c in el.findall(_Q + "config")
        ),
        volumes=tuple(
            (v.text or "", _size(int(v.get("capacity") or 0), cache))  # no other holder: not interned
            for v in el.findall(_Q + "volume")
            if (v.get("capacity") or "").isdigit()
        ),
    )


def _size(n: int, cache: MarkCache | None) -> int:
    """``n``, the one object of its value in ``cache`` (a size repeats in many marks)."""
    got = cache.sizes.get(n) if cache is not None else None
    if got is None:
        got = n
        if cache is not None:
            cache.sizes.put(n, n)
    return got


# Our element as libvirt writes it back: with our prefix, or with a default namespace
# (after virDomainSetMetadata). Only this substring is parsed on the hot path.
_MARK_RE = re.compile(
    r"<(?P<tag>(?:[A-Za-z_][\w.-]*:)?"
    + ROOT
    + r")\b[^>]*?xmlns(?::[\w.-]+)?=(['\"])"
    + re.escape(NS)
    + r"\2.*?</(?P=tag)>",
    re.DOTALL,
)


_PREFIX_RE = re.compile(r"xmlns:([\w.-]+)=(['\"])" + re.escape(NS) + r"\2")


# What ``MarkCache.marks`` holds for a text that is no mark of ours (the mark itself else).
_NOT_OURS = OwnershipMark(commit="", path="", spec_hash="not a mark")


def _mark_from_text(fragment: str, cache: MarkCache | None) -> OwnershipMark | None:
    """Parse our element alone (kept in ``cache`` by a digest of the text)."""
    key = 0
    if cache is not None:
        key = int.from_bytes(hashlib.blake2b(fragment.encode(), digest_size=16).digest())
        hit = cache.marks.get(key)
        if hit is not None:
            return None if hit is _NOT_OURS else hit
    try:
        el = ET.fromstring(fragment)
    except ET.ParseError:
        return None
    got = _parse_mark(el, cache) if el.tag == _Q + ROOT else None
    if cache is not None:
        cache.marks.put(key, _NOT_OURS if got is None else got)
    return got


def read_mark(xml: str, cache: MarkCache | None = None) -> OwnershipMark | None:
    """Our mark in a domain's XML, or None for a domain we do not own. ``cache``: the
    caller's, for a listing of many domains read again and again."""
    if NS not in xml:  # cheap pre-check: most unowned domains never get parsed
        return None
    # Fast path: cut our element out of the text instead of parsing the whole domain.
    p = _PREFIX_RE.search(xml)
    if p is not None:
        prefix = p.group(1)
        start = xml.find(f"<{prefix}:{ROOT}>")
        close = f"</{prefix}:{ROOT}>"
        end = xml.find(close, start)
        if start >= 0 and end > start:
            fragment = xml[start : end + len(close)].replace(
                f"<{prefix}:{ROOT}>", f'<{prefix}:{ROOT} xmlns:{prefix}="{NS}">', 1
            )
            got = _mark_from_text(fragment, cache)
            if got is not None:
                return got
    m = _MARK_RE.search(xml)
    if m is not None:
        got = _mark_from_text(m.group(0), cache)
        if got is not None:
            return got
    found = ET.fromstring(xml).find(f"metadata/{_Q}{ROOT}")
    return _parse_mark(found, cache) if found is not None else None


def unmarked(dom: ET.Element) -> list[ET.Element]:
    """The domain's children without our element: ``strip_mark``'s result, but the tree
    is not changed (a ``<metadata>`` holding more than our element is a new element with
    the same other children; one holding nothing else is left out)."""
    out: list[ET.Element] = []
    for child in dom:
        if child.tag == "metadata":
            kept = [el for el in child if el.tag != _Q + ROOT]
            if not kept:
                continue
            if len(kept) != len(child):
                copy = ET.Element(child.tag, child.attrib)
                copy.text, copy.tail = child.text, child.tail
                copy.extend(kept)
                child = copy
        out.append(child)
    return out


def strip_mark(dom: ET.Element) -> ET.Element:
    """Remove our element (and an emptied <metadata>) from a parsed domain, in place."""
    metadata = dom.find("metadata")
    if metadata is not None:
        for old in metadata.findall(_Q + ROOT):
            metadata.remove(old)
        if len(metadata) == 0:
            dom.remove(metadata)
    return dom
