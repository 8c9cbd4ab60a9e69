"""Compare a desired domain with a live one: the only user of deepdiff.

Input: two domain XML strings (or essences). Output: project-owned ``FieldChange``
records, one per changed field or per added/removed managed device, each with its
change class. Pure.

The desired essence is compared as a subset of the live one (libvirt adds defaults on
read-back); extra live devices of the managed kinds are reported as removals.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from deepdiff import DeepDiff

from reconciler.model import ChangeClass, FieldChange
from reconciler.normalize import Essence, device_roots, essence

# Field paths (regex on the essence path) that can change on a running domain.
LIVE_FIELDS: tuple[tuple[str, str], ...] = (
    (r"^currentMemory$", "balloon target within the maximum memory"),
    (r"^vcpu@current$", "online vCPUs within the maximum"),
    (r"^(title|description)$", "descriptive text"),
    (r"^metadata/", "metadata"),
    (r"^devices/(disk|interface)\[[^\]]+\]$", "device hotplug / unplug"),
    (r"^devices/disk\[[^\]]+\]/source@(file|dev|volume|pool)$", "removable media"),
)
_LIVE_RE = [re.compile(p) for p, _ in LIVE_FIELDS]


def change_class(path: str) -> ChangeClass:
    return ChangeClass.LIVE if any(rx.match(path) for rx in _LIVE_RE) else ChangeClass.RESTART


def _device_of(path: str) -> str | None:
    parts = path.split("/")
    if len(parts) >= 2 and parts[0] == "devices":
        return f"devices/{parts[1].split('@', 1)[0]}"
    return None


def diff_essences(desired: Essence, live: Essence) -> tuple[FieldChange, ...]:
    desired_devices = device_roots(desired)
    live_devices = device_roots(live)
    added = desired_devices - live_devices
    removed = live_devices - desired_devices

    # The live side restricted to what the spec says (libvirt defaults ignored).
    live_view = {p: live[p] for p in desired if p in live and _device_of(p) not in added}
    desired_view = {p: v for p, v in desired.items() if _device_of(p) not in added}
    dd = DeepDiff(live_view, desired_view, verbose_level=2)

    changes: list[FieldChange] = []
    for key, detail in dd.get("values_changed", {}).items():
        path = _dd_key(key)
        old, new = str(detail["old_value"]), str(detail["new_value"])
        changes.append(FieldChange(path, old, new, change_class(path)))
    for key, value in dd.get("dictionary_item_added", {}).items():
        path = _dd_key(key)
        changes.append(FieldChange(path, None, str(value), change_class(path)))
    for dev in sorted(added):
        changes.append(FieldChange(dev, None, _describe(desired, dev), change_class(dev)))
    for dev in sorted(removed):
        changes.append(FieldChange(dev, _describe(live, dev), None, change_class(dev)))
    return tuple(sorted(changes, key=lambda c: c.path))


def _describe(ess: Mapping[str, str], dev: str) -> str:
    parts = [f"{p[len(dev) :]}={v}" for p, v in sorted(ess.items()) if p.startswith(dev) and "source" in p]
    return dev.split("/", 1)[1] + (" " + " ".join(parts) if parts else "")


def _dd_key(key: str) -> str:
    # deepdiff reports "root['path']"
    m = re.fullmatch(r"root\['(.*)'\]", key)
    return m.group(1) if m else key


def diff_domains(desired_xml: str, live_xml: str) -> tuple[FieldChange, ...]:
    return diff_essences(essence(desired_xml), essence(live_xml))
