"""The proof of an import: each VM read back is rendered again and planned against the
live domain it came from.

Input: the ``Reading`` of each domain, the host configuration the import writes, the
host's facts and the live domains. Output: per domain, a ``Proof``: the gaps that
keep it from being imported as read (none: it can), each with the essence path and
values it is about, and the final definition adopting would write. Pure: the same
stages ``plan`` runs (catalog, expand, render with placement, the host-facts check,
``build_plan``), never the host.

A VM passes when its plan is ``adopt`` with no changed field, no start, stop or
restart, and no live operation; and when nothing of the live definition would be lost
by the redefinition adopting writes (``dropped``): every value of the live essence is
in the final definition (the plan's: the rendered XML with the addresses and implicit
devices carried over, and the ownership mark), except what libvirt fills in by itself on every definition
(``LIBVIRT_DEFAULTS``). So an import never succeeds where the plan would change or
drop something; it fails with the paths named.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from reconciler import catalog as catalog_stage
from reconciler.compare.changes import reserved_port_field
from reconciler.compare.essence import carry_addresses, essence
from reconciler.desired import desired_from_catalog
from reconciler.errors import ManifestError
from reconciler.model import Manifest
from reconciler.model.changes import Action
from reconciler.plan.build import build_plan
from reconciler.records import dataclass
from reconciler.render.placement import held_from_live
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.problems import words
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from reconciler.hostfacts import HostFacts
    from reconciler.importer.reading import Reading
    from reconciler.model import LiveDomain
    from reconciler.model.changes import Change
    from reconciler.settings.host import HostConfig

# What libvirt writes into every definition by itself (so a redefinition without it
# gets it back): essence path (a regular expression) -> the values it writes (None:
# any value it chooses, such as an address or a size it derives).
LIBVIRT_DEFAULTS: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    (r"uuid", None),
    (r"on_poweroff", ("destroy",)),
    (r"on_reboot", ("restart",)),
    (r"on_crash", ("destroy",)),
    (r"os/boot@dev", ("hd",)),
    (r"vcpu@placement", ("static",)),
    (r"cpu@check", ("partial", "none", "full")),
    (r"cpu@migratable", ("on",)),
    (r"cpu@match", ("exact",)),
    (r"cpu/topology@(dies|clusters)", ("1",)),
    (r"cpu/model@fallback", ("allow", "forbid")),
    (r"clock@offset", ("utc",)),
    (r"os/loader@type", ("pflash",)),
    (r"os/nvram@templateFormat|os/nvram@format|os/loader@format", ("raw",)),
    (r"devices/(controller|memballoon)\b.*", None),  # implicit: carried whole
    (r"devices/input\[(mouse|keyboard):ps2\].*", None),
    (r"devices/input\[[^]]*\]/address.*", None),
    (r"devices/video(\[\d+\])?/model@(vram|heads|primary|vgamem|ram)", None),
    (r"devices/video(\[\d+\])?/model/acceleration.*", None),
    (r"devices/graphics(\[\d+\])?@(listen|port|autoport)", None),
    (r"devices/graphics(\[\d+\])?/listen@type", ("address",)),
    (r"devices/serial(\[\d+\])?/target@type", ("isa-serial",)),
    (r"devices/serial(\[\d+\])?/target/model@name", ("isa-serial",)),
    (r"devices/console(\[\d+\])?/target@(type|port)", None),
    (r"devices/channel(\[[^]]+\])?/target@state", None),
    (r"devices/channel(\[[^]]+\])?/source@(mode|path)", None),
    (r"devices/disk\[[^]]+\]/driver@name", ("qemu",)),
    (r"devices/interface\[[^]]+\]/(target|alias)@.*", None),
    (r"devices/tpm(\[\d+\])?/backend@version", ("2.0",)),
    (r"devices/rng(\[\d+\])?/backend@model", ("random",)),
    (r"devices/watchdog(\[\d+\])?@action", ("reset",)),
    (r"devices/hostdev(\[\d+\])?@managed", None),
    (r"devices/vsock(\[\d+\])?/cid@address", None),
    (r"features/vmcoreinfo@state", ("on",)),
)
_DEFAULTS = tuple((re.compile(p + r"$"), values) for p, values in LIBVIRT_DEFAULTS)


def _default(path: str, value: str) -> bool:
    for rx, values in _DEFAULTS:
        if rx.match(path):
            return values is None or value in values
    return False


@dataclass(frozen=True, slots=True)
class Gap:
    """One reason a domain is not imported as read.

    ``path``: the essence path it is about, with the live value and the final
    definition's (None: that side lacks it); empty for a reason about no one value (a
    start the plan would make, a VM that does not render). ``kind``: ``change`` (the
    plan would change the field), ``drop`` (a redefinition would lose the live value),
    ``running`` (what the running domain would get: it follows from the fields) or
    ``other``."""

    kind: str
    text: str = ""
    path: str = ""
    live: str | None = None
    final: str | None = None


@dataclass(frozen=True, slots=True)
class Proof:
    """The verdict on one domain: its gaps (none: it imports) and the final definition
    adopting it would write (empty when it did not render)."""

    gaps: tuple[Gap, ...] = ()
    final_xml: str = ""

    @property
    def reasons(self) -> tuple[str, ...]:
        """The gaps in words: one per changed field or problem, the drops in one line."""
        out = [g.text for g in self.gaps if g.kind != "drop"]
        drops = [f"{g.path}={g.live}" for g in self.gaps if g.kind == "drop"]
        if drops:
            out.append("a redefinition would drop " + ", ".join(drops))
        return tuple(out)


def dropped(final_xml: str, live_xml: str) -> tuple[str, ...]:
    """``path=value`` of every live value the final definition would lose."""
    return tuple(f"{path}={value}" for path, value in _dropped(final_xml, live_xml))


def _dropped(final_xml: str, live_xml: str) -> list[tuple[str, str]]:
    final = essence(final_xml)
    live = essence(live_xml)
    out = []
    for path, value in live.items():
        if path in final or _default(path, value):
            continue
        out.append((path, value))
    return sorted(out)


def _change_gaps(change: Change) -> list[Gap]:
    gaps = [
        Gap("change", f"the plan would change {f.path} ({f.old} -> {f.new})", f.path, f.old, f.new)
        for f in change.fields
        if not reserved_port_field(f)
    ]
    # The root ports KubeVirt reserves for hotplug that the domain lacks: one reason, with
    # what the user can do (the guest would see them at its next boot: no zero change)
    ports = sorted({f.path.split("@", 1)[0] for f in change.fields if reserved_port_field(f)})
    if ports:
        gaps.append(
            Gap(
                "other",
                f"the plan would add {len(ports)} hotplug root port(s) KubeVirt reserves for this VM "
                f"({', '.join(p.split('/', 1)[1] for p in ports)}): add as many "
                "<controller type='pci' model='pcie-root-port'/> to the domain (virsh edit) and import again",
            )
        )
    problems = []
    if change.action != Action.ADOPT:
        problems.append(f"the plan would {change.action.value} it ({said(change)})")
    if change.start:
        problems.append("the plan would start it")
    if change.stop:
        problems.append("the plan would stop it")
    gaps += [Gap("other", text) for text in problems]
    # What the running domain would get follows from the fields: it goes when they do.
    if change.restart_required:
        gaps.append(Gap("running", "the plan would stage a restart"))
    if change.live_ops:
        ops = ", ".join(str(o) for o in change.live_ops)
        gaps.append(Gap("running", f"the plan would change the running domain: {ops}"))
    return gaps


def manifest_of(reading: Reading) -> Manifest:
    return Manifest(obj=reading.vm, path=vm_path(reading))


def vm_path(reading: Reading) -> str:
    """Where the VM's file goes: ``vms/<name>.yaml``, ``vms/<namespace>/<name>.yaml``."""
    if reading.namespace == "default":
        return f"vms/{reading.name}.yaml"
    return f"vms/{reading.namespace}/{reading.name}.yaml"


def _other(*texts: str) -> Proof:
    return Proof(tuple(Gap("other", t) for t in texts))


def _validated(readings: Sequence[Reading], out: dict[str, Proof]) -> list[Manifest]:
    """The VMs of ``readings`` that validate each alone; ``out``: the proof of each other."""
    manifests: list[Manifest] = []
    for reading in readings:
        m = manifest_of(reading)
        try:
            catalog_stage.build_catalog([m])
        except ManifestError as err:
            out[reading.domain] = _other(f"the VM does not validate: {err}")
            continue
        manifests.append(m)
    return manifests


def verify(
    readings: Sequence[Reading],
    host: HostConfig,
    facts: HostFacts,
    live: Sequence[LiveDomain],
    read: Any = None,
) -> dict[str, Proof]:
    """Per domain of ``readings``, the proof: why it cannot be imported as read (no
    gaps: it can).

    ``read`` gives the bytes of a VM file (``vm_path``) for error positions; None:
    errors without line numbers."""
    by_name: Mapping[str, LiveDomain] = {d.name: d for d in live}
    out: dict[str, Proof] = {}
    manifests = _validated(readings, out)
    if not manifests:
        return out
    cat = catalog_stage.build_catalog(manifests)
    desired = desired_from_catalog(
        cat,
        "import",
        read or (lambda path: b""),
        host,
        facts.caps,
        facts=facts,
        held=held_from_live(live),
    )
    failed = {k.domain for k in desired.failed}
    errors_of: dict[str, list[str]] = {}
    for problem in (*desired.errors, *desired.host_errors):
        if problem.vm is not None and problem.vm.domain in failed:
            errors_of.setdefault(problem.vm.domain, []).append(words(problem))
    for reading in readings:
        if reading.domain in out:
            continue
        if reading.domain in failed:
            out[reading.domain] = _other(*errors_of.get(reading.domain, ["the VM does not render"]))
    rendered = [d for d in desired.rendered if d.name in by_name]
    plan = build_plan("import", rendered, [by_name[d.name] for d in rendered], PlanPolicy())
    for change in plan.changes:
        if change.name not in by_name or change.desired is None:
            continue
        gaps = _change_gaps(change)
        cur = by_name[change.name]
        # The definition adopting writes, as the plan made it (another action: as it would be).
        final = (
            change.definition.xml
            if change.definition is not None
            else carry_addresses(change.desired.xml, cur.persistent_xml)
        )
        gaps += [Gap("drop", "", path, value, None) for path, value in _dropped(final, cur.persistent_xml)]
        out[change.name] = Proof(tuple(gaps), final)
    for reading in readings:
        out.setdefault(reading.domain, _other("the VM does not render"))
    return out
