"""A saved plan is a claim: what ``apply FILE`` checks before it touches anything.

Input: one host's entry of a saved plan as the file holds it (``Saved.doc``: JSON
values), this host's allowed directories, and the plan of the same revision made
again here (``PlannedRevision``: the repository at the plan's commit, rendered with
this host's own configuration against the host as it is now). Output: one line per
problem, each naming the VM (or the part of the plan) and what differs; empty when
the file holds exactly what this host plans. Pure: never reads a file or the host.

What is compared: everything the file holds but the moments (``plannedAt``,
``planMs``, a change's ``requeueAfterS``) and where it was read (``repo``): the host
config (the file's is never used: it must equal this host's), the policy (its owner
and host identity must be this host's), the fingerprints of the domains the plan
touches, and every change, its action, flags, rendered domain, final definition and
live operations (a change that does nothing, by its action alone). A definition that differs is named by the elements that differ
(``memory``, ``devices/emulator``, ``devices/disk[2]``). Apart from the comparison,
every file path a definition or a volume of the file names must lie inside this host's
``allowedDirectories``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reconciler.model.changes import Action
from reconciler.model.keys import VMKey
from reconciler.plan import saved
from reconciler.settings.host import path_inside
from reconciler.wording import verified as words
from reconciler.wording.escape import printable, shortened

if TYPE_CHECKING:
    from reconciler.plan.planned import PlannedRevision

# Moments and places: they differ between two plans of the same revision and host.
_NOT_COMPARED = frozenset({"repo", "plannedAt", "planMs", "plan", "live", "config", "policy"})
_CHANGE_NOT_COMPARED = frozenset({"requeueAfterS"})
_NOOP = frozenset(a.value for a in (Action.UNCHANGED, Action.SKIPPED, Action.WAIT))
_XML_KEYS = ("definition", "desired")  # a change's records that carry a domain's XML
MAX_NAMED = 6  # elements named per difference
# Host files a definition opens: <source file|dir>, the kernel, initrd and NVRAM.
_PATH_ELEMENTS = ("os/kernel", "os/initrd", "os/nvram")
_MAX_XML_DEPTH = 32  # a domain's XML nests about 6 levels: deeper differs as a whole


def _who(name: object) -> str:
    return printable(shortened(VMKey.from_domain(name).subject)) if isinstance(name, str) else words.A_CHANGE


def outside_allowed(doc: Mapping[str, Any], allowed: tuple[str, ...]) -> tuple[str, ...]:
    """One line per file path of the entry's definitions and volumes outside ``allowed``."""
    out: list[str] = []
    for c in _changes(doc):
        found: list[str] = []
        for key in _XML_KEYS:
            record = c.get(key)
            text = record.get("xml") if isinstance(record, dict) else None
            if isinstance(text, str) and text:
                found.extend(_host_paths(text))
        desired = c.get("desired")
        for v in desired.get("volumes", ()) if isinstance(desired, dict) else ():
            if isinstance(v, dict) and isinstance(v.get("path"), str) and v["path"]:
                found.append(v["path"])
        bad = sorted({p for p in found if not path_inside(p, allowed)})
        if bad:
            shown = ", ".join(printable(shortened(p)) for p in bad[:MAX_NAMED])
            out.append(words.outside_allowed(_who(c.get("name")), shown, allowed))
    return tuple(out)


def _host_paths(text: str) -> list[str]:
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return []  # not XML: the comparison names it
    out = [e.text.strip() for p in _PATH_ELEMENTS for e in root.iterfind(p) if e.text and e.text.strip()]
    for src in root.iter("source"):
        out.extend(v for a in ("file", "dir") if (v := src.get(a)))
    return out


def _changes(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    plan = doc.get("plan")
    changes = plan.get("changes") if isinstance(plan, dict) else None
    return [c for c in changes if isinstance(c, dict)] if isinstance(changes, list) else []


def differences(doc: Mapping[str, Any], again: PlannedRevision) -> tuple[str, ...]:
    """What the file holds (``doc``) that the plan made again here (``again``) does not."""
    now = saved.encoded(again)
    revision = again.revision[:12]
    out: list[str] = []
    for key, what in (("config", words.HOST_CONFIG), ("policy", words.POLICY)):
        keys = _keys_differing(doc.get(key), now[key])
        if keys:
            out.append(words.not_this_hosts(what, keys))
    out.extend(_fingerprints(doc.get("live"), now["live"]))
    out.extend(_change_differences(_changes(doc), now["plan"]["changes"], revision))
    raw = doc.get("plan")
    plan: dict[str, Any] = raw if isinstance(raw, dict) else {}
    # the pacing holds when its batches were planned: the changes (restart now, or wait) are compared above
    for key in _keys_differing(plan, now["plan"], frozenset({"changes", "pacing"})):
        out.append(words.plan_key(key, revision))
    for key in _keys_differing(doc, now, _NOT_COMPARED):
        out.append(words.entry_key(key))
    return tuple(out)


def _keys_differing(a: object, b: Mapping[str, Any], skip: frozenset[str] = frozenset()) -> list[str]:
    if not isinstance(a, Mapping):
        return [words.ALL]
    return [
        printable(shortened(k)) for k in sorted(set(a) | set(b)) if k not in skip and a.get(k) != b.get(k)
    ]


def _fingerprints(had: object, now: Mapping[str, Any]) -> list[str]:
    had = had if isinstance(had, dict) else {}
    out = []
    for name in sorted(set(had) | set(now)):
        if name not in had:
            out.append(words.no_fingerprint(_who(name)))
        elif name not in now:
            out.append(words.stray_fingerprint(_who(name)))
        elif had[name] != now[name]:
            out.append(words.host_moved(_who(name)))
    return out


def _change_differences(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], revision: str) -> list[str]:
    by_name = {c.get("name"): c for c in mine}
    again = {c["name"]: c for c in theirs}
    out = []
    for name in sorted(set(by_name) | set(again), key=str):
        a, b = by_name.get(name), again.get(name)
        who = _who(name)
        if b is None:
            action = a.get("action") if a is not None else "?"
            out.append(words.not_planned(who, printable(str(action)), revision))
            continue
        if a is None:
            out.append(words.missing_change(who, revision, str(b["action"])))
            continue
        if a.get("action") == b["action"] and b["action"] in _NOOP:
            continue  # does nothing either way; its words may tell the time (a back-off's wait)
        out.extend(_image_differences(who, a, b))
        fields = _keys_differing(a, b, _CHANGE_NOT_COMPARED)
        for key in fields:
            if key in _XML_KEYS and isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
                where = xml_differences(str(a[key].get("xml", "")), str(b[key].get("xml", "")))
                rest = _keys_differing(a[key], b[key], frozenset({"xml"}))
                out.append(words.rendered_differs(who, key, revision, [*where, *rest][:MAX_NAMED]))
            else:
                out.append(words.change_differs(who, key, revision))
    return out


def _images(change: Mapping[str, Any]) -> dict[str, str]:
    desired = change.get("desired")
    vols = desired.get("volumes") if isinstance(desired, dict) else None
    return {
        str(v["image"]): str(v.get("digest", ""))
        for v in (vols if isinstance(vols, list) else ())
        if isinstance(v, dict) and v.get("image")
    }


def _image_differences(who: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """An image the plan names by one digest that this host now resolves to another: a
    stale plan (a tag that moved, an image pulled again)."""
    now = _images(b)
    return [
        words.stale_image(who, printable(shortened(image)), printable(digest), now[image])
        for image, digest in sorted(_images(a).items())
        if image in now and now[image] != digest
    ]


def xml_differences(a: str, b: str) -> list[str]:
    """The element paths where two domain XML documents differ (at most ``MAX_NAMED``):
    ``memory``, ``devices/emulator``, ``devices/disk[2]`` (the second ``disk``)."""
    if a == b:
        return []
    try:
        x, y = ET.fromstring(a), ET.fromstring(b)
    except ET.ParseError:
        return [words.NOT_XML]
    out: list[str] = []
    _walk(x, y, "", out)
    return out[:MAX_NAMED] or [words.FORMATTING]


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _walk(x: ET.Element, y: ET.Element, path: str, out: list[str], depth: int = 0) -> None:
    if len(out) >= MAX_NAMED:
        return
    if (
        depth > _MAX_XML_DEPTH
        or x.tag != y.tag
        or x.attrib != y.attrib
        or (x.text or "").strip() != (y.text or "").strip()
    ):
        out.append(printable(shortened(path or _local(x.tag))))
        return
    xs, ys = _by_tag(x), _by_tag(y)
    for tag in sorted(set(xs) | set(ys)):
        a, b = xs.get(tag, []), ys.get(tag, [])
        many = max(len(a), len(b)) > 1
        for i in range(max(len(a), len(b))):
            here = f"{path}/{_local(tag)}".lstrip("/") + (f"[{i + 1}]" if many else "")
            if i >= len(a) or i >= len(b):
                out.append(printable(shortened(here)))
            else:
                _walk(a[i], b[i], here, out, depth + 1)


def _by_tag(e: ET.Element) -> dict[str, list[ET.Element]]:
    out: dict[str, list[ET.Element]] = {}
    for child in e:
        out.setdefault(child.tag, []).append(child)
    return out
