"""Host resources and host-wide identities of a revision's VMs, checked and handed out.

Input: each VM of a revision as the pipeline left it (its manifest, its rendered record
before placement, why this host refuses it), the host config, its capabilities and
facts, what the host's domains hold now (``Held``, read back from their definitions) and
the revision's file reader (for error positions). Output: what each domain is handed
(``render.Placed``: dedicated CPUs, mediated devices; ``render.finish`` puts them into
its element tree before serializing it), and errors (``Problem`` records at the field's
file:line) for VMs that do not fit, share a UUID or a MAC address, or pass through a
host device another VM has.
Pure: reads no host itself; ``desired`` calls it between the per-VM rendering and the
serialization of the placed domains.
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import TYPE_CHECKING, Protocol

from reconciler import manifests
from reconciler.errors import ManifestError, RenderError
from reconciler.manifests import limits
from reconciler.model import Problem, parse_path
from reconciler.records import dataclass
from reconciler.render import Placed, cputune, mdev
from reconciler.wording.escape import located

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from reconciler import render
    from reconciler.model import LiveDomain, Manifest, RenderedDomain
    from reconciler.settings.host import HostConfig


class Candidate(Protocol):
    """One VM of the revision after expansion and rendering (``record``: its rendered
    domain's record, before placement; ``None`` when it did not render)."""

    @property
    def manifest(self) -> Manifest: ...
    @property
    def record(self) -> RenderedDomain | None: ...
    @property
    def host_errors(self) -> tuple[Problem, ...]: ...


class Offered(Protocol):
    """What the host's facts say it offers, as placement reads them (``hostfacts.HostFacts``
    is one): its capabilities, its CPU count, its active mediated devices (UUID, type)."""

    @property
    def caps(self) -> render.HostCaps: ...
    @property
    def host_cpus(self) -> int | None: ...
    @property
    def mdevs(self) -> tuple[tuple[str, str], ...] | None: ...


@dataclass(frozen=True, slots=True)
class Held:
    """The host resources each domain of a host holds now, by domain name, read back from
    its definition (the record of an earlier placement): dedicated CPUs, mediated devices."""

    cpus: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    mdevs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def held_from_live(live: Sequence[LiveDomain]) -> Held:
    """What each live domain holds: the CPUs it pins (``<cputune>``), the mediated devices
    it passes through (``<hostdev type="mdev">``)."""
    cpus: dict[str, tuple[int, ...]] = {}
    mdevs: dict[str, tuple[str, ...]] = {}
    for d in live:
        pinned = cputune.held_cpus(d.persistent_xml) if "<cputune>" in d.persistent_xml else ()
        if pinned:
            cpus[d.name] = pinned
        uuids = mdev.held_mdevs(d.persistent_xml) if "mdev" in d.persistent_xml else ()
        if uuids:
            mdevs[d.name] = uuids
    return Held(cpus, mdevs)


def place_resources(
    memos: Sequence[Candidate],
    host: HostConfig,
    caps: render.HostCaps,
    facts: Offered | None,
    held: Held,
    read: Callable[[str], bytes],
) -> tuple[dict[str, Placed], dict[str, Problem]]:
    """The host resources VMs ask for, handed out on this host: dedicated CPUs
    (``render.cputune``) and mediated devices (``render.mdev``). Returns what each
    domain that fits is handed, by name, and a ``cannot run on host`` error for each VM
    that does not fit."""
    wanting = [
        (m, m.record)
        for m in memos
        if m.record is not None
        and (m.record.cpu_need or m.record.mdev_needs)
        and not m.host_errors
        and m.record.runs_on(
            host.name, host.claim_unselected
        )  # another host's VMs take nothing of this one's
    ]
    if not wanting:
        return {}, {}
    placed: dict[str, Placed] = {}
    problems: dict[str, tuple[str, str]] = {}  # domain -> (field, why)
    cpu_wanting = [d for _, d in wanting if d.cpu_need is not None]
    if cpu_wanting:
        dedicated = host.dedicated_cpus
        if facts is not None and facts.host_cpus is not None:
            dedicated = tuple(c for c in dedicated if c < facts.host_cpus)
        cells = facts.caps.numa_cells if facts is not None else caps.numa_cells
        needs = [(d.name, d.cpu_need) for d in cpu_wanting if d.cpu_need is not None]
        placement = cputune.place(needs, dedicated, held.cpus, cells, host.name)
        for d in cpu_wanting:
            problem = placement.errors.get(d.name)
            if problem is not None:
                problems[d.name] = ("spec.template.spec.domain.cpu.dedicatedCpuPlacement", problem)
            else:
                numa = d.cpu_need is not None and d.cpu_need.numa
                placed[d.name] = Placed(cpus=placement.cpus[d.name], cells=tuple(cells) if numa else ())
    mdev_wanting = [d for _, d in wanting if d.mdev_needs]
    if mdev_wanting:
        available = dict(facts.mdevs) if facts is not None and facts.mdevs is not None else None
        needs_m = [(d.name, d.mdev_needs) for d in mdev_wanting]
        got = mdev.place(needs_m, host.host_devices, held.mdevs, available, host.name)
        for d in mdev_wanting:
            if d.name in got.errors:
                problems.setdefault(d.name, got.errors[d.name])
            elif d.name not in problems:
                placed[d.name] = replace(placed.get(d.name, Placed()), mdevs=tuple(got.uuids[d.name]))
    errors: dict[str, Problem] = {}
    for m, d in wanting:
        if d.name in problems:
            placed.pop(d.name, None)
            field_path, problem = problems[d.name]
            err = RenderError(d.key, f"cannot run on host {host.name}: {problem}", field_path)
            errors[d.name] = render_problem(m.manifest, err, read)
    return placed, errors


def identity_clashes(memos: Sequence[Candidate], read: Callable[[str], bytes]) -> list[Problem]:
    """One error per VM whose UUID or MAC address another VM of the revision already uses."""
    done = [(m, m.record) for m in memos if m.record is not None]
    uuids = ((d.uuid, (m, d)) for m, d in done)
    macs = ((mac, (m, d)) for m, d in done for mac, _ in d.macs)
    out: list[Problem] = []
    for what, pairs in (("UUID", uuids), ("MAC address", macs)):
        for value, (a, first), (b, later) in limits.duplicates(pairs):
            field = "spec.template.spec.domain.firmware.uuid"
            if what != "UUID":
                field = next(f for mac, f in later.macs if mac == value)
            also = f"{what} {value} is also used by {first.subject} ({located(a.manifest)})"
            out.append(render_problem(b.manifest, RenderError(later.key, also, field), read))
    return out


def device_clashes(
    memos: Sequence[Candidate], host: HostConfig, read: Callable[[str], bytes]
) -> list[Problem]:
    """One error per VM passing through a host device another VM of this host already has:
    one device, one VM."""
    mine = [
        (m, m.record)
        for m in memos
        if m.record is not None and m.record.runs_on(host.name, host.claim_unselected)
    ]
    pairs = ((dev, (m, d)) for m, d in mine for dev, _ in d.host_devices)
    out: list[Problem] = []
    for value, (a, first), (b, later) in limits.duplicates(pairs):
        field = next(f for dev, f in later.host_devices if dev == value)
        also = f"host device {value} is also passed through to {first.subject} ({located(a.manifest)})"
        out.append(render_problem(b.manifest, RenderError(later.key, also, field), read))
    return out


def render_problem(source: Manifest, err: RenderError, read: Callable[[str], bytes] | None) -> Problem:
    """``err`` as a record at the field's line and column in the VM's file (``source``),
    or at the VM's document when the field cannot be found there (or ``read`` is None)."""
    path, line, column = source.path, source.line, 0
    if err.field and source.path and read is not None:
        try:
            path, line, column = manifests.field_position(source, parse_path(err.field), read)
        except (ManifestError, OSError, ValueError, KeyError, IndexError):
            line, column = source.line, 0
    return Problem(
        err.message,
        vm=err.vm,
        path=path,
        line=line if path else 0,
        column=column,
        field=err.field or "",
    )
