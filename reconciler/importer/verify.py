"""The proof of an import: each VM read back is rendered again and planned against the
live domain it came from.

Input: the ``Reading`` of each domain, the host configuration the import writes, the
host's facts and the live domains. Output: per domain, the reasons it cannot be
imported (empty: it can). Pure: the same stages ``plan`` runs (catalog, expand,
render with placement, the host-facts check, ``build_plan``), never the host.

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
from reconciler.compare.essence import carry_addresses, essence
from reconciler.desired import desired_from_catalog
from reconciler.errors import ManifestError
from reconciler.model import Action, Manifest
from reconciler.plan.build import PlanPolicy, build_plan
from reconciler.render.placement import held_from_live
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from reconciler.config.host import HostConfig
    from reconciler.hostfacts import HostFacts
    from reconciler.importer.domain import Reading
    from reconciler.model import Change, LiveDomain

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
    (r"devices/channel(\[\d+\])?/target@state", None),
    (r"devices/channel(\[\d+\])?/source@(mode|path)", None),
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


def dropped(final_xml: str, live_xml: str) -> tuple[str, ...]:
    """``path=value`` of every live value the final definition would lose."""
    final = essence(final_xml)
    live = essence(live_xml)
    out = []
    for path, value in live.items():
        if path in final or _default(path, value):
            continue
        out.append(f"{path}={value}")
    return tuple(sorted(out))


def _change_problems(change: Change) -> list[str]:
    problems = [f"the plan would change {f.path} ({f.old} -> {f.new})" for f in change.fields]
    if change.action != Action.ADOPT:
        problems.append(f"the plan would {change.action.value} it ({change.reason})")
    if change.start:
        problems.append("the plan would start it")
    if change.stop:
        problems.append("the plan would stop it")
    if change.restart_required:
        problems.append("the plan would stage a restart")
    if change.live_ops:
        problems.append(
            "the plan would change the running domain: " + ", ".join(str(o) for o in change.live_ops)
        )
    return problems


def manifest_of(reading: Reading) -> Manifest:
    return Manifest(obj=reading.vm, path=vm_path(reading))


def vm_path(reading: Reading) -> str:
    """Where the VM's file goes: ``vms/<name>.yaml``, ``vms/<namespace>/<name>.yaml``."""
    if reading.namespace == "default":
        return f"vms/{reading.name}.yaml"
    return f"vms/{reading.namespace}/{reading.name}.yaml"


def verify(
    readings: Sequence[Reading],
    host: HostConfig,
    facts: HostFacts,
    live: Sequence[LiveDomain],
    read: Any = None,
) -> dict[str, tuple[str, ...]]:
    """Per domain of ``readings``, why it cannot be imported as read (empty: it can).

    ``read`` gives the bytes of a VM file (``vm_path``) for error positions; None:
    errors without line numbers."""
    by_name: Mapping[str, LiveDomain] = {d.name: d for d in live}
    out: dict[str, tuple[str, ...]] = {}
    manifests: list[Manifest] = []
    for reading in readings:
        m = manifest_of(reading)
        try:
            catalog_stage.build_catalog([m])
        except ManifestError as err:
            out[reading.domain] = (f"the VM does not validate: {err}",)
            continue
        manifests.append(m)
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
            out[reading.domain] = tuple(errors_of.get(reading.domain, ["the VM does not render"]))
    rendered = [d for d in desired.rendered if d.name in by_name]
    plan = build_plan("import", rendered, [by_name[d.name] for d in rendered], PlanPolicy())
    for change in plan.changes:
        if change.name not in by_name or change.desired is None:
            continue
        problems = _change_problems(change)
        cur = by_name[change.name]
        # The definition adopting writes, as the plan made it (another action: as it would be).
        final = (
            change.definition.xml
            if change.definition is not None
            else carry_addresses(change.desired.xml, cur.persistent_xml)
        )
        lost = dropped(final, cur.persistent_xml)
        if lost:
            problems.append("a redefinition would drop " + ", ".join(lost))
        out[change.name] = tuple(problems)
    for reading in readings:
        out.setdefault(reading.domain, ("the VM does not render",))
    return out
