"""Execute a Plan through the hypervisor: the only writer to a host.

Input: a ``Plan`` (already fully rendered and defined: nothing is rendered here, and no
XML is edited but for KubeVirt's sealed root ports, below) and a ``Hypervisor``.
Output: one ``ApplyResult`` per change. One domain's failure never stops the others.

Order per domain: provision its volumes; define it in one ``defineXML`` call with the
very bytes the plan carries (``Change.definition``: the rendered XML with the ownership
mark and the device addresses libvirt already assigned, so a domain is never
half-defined and no device moves), and when libvirt placed devices whose root ports
KubeVirt seals (``Definition.seal_after_define``: a new domain, an added disk), its
definition read back and those ports sealed (``hotplug='off'``) in a second call; then,
on a running domain, the live operations (``host.live``: hotplug / unplug / media / balloon / vCPUs /
metadata) with the device XML of the new definition, so a hotplugged device gets the
address it has in the persistent config (``host.definition``: as planned, read back only
for a device libvirt placed); then restart / stop / start as planned.
After each start the mark's run bookkeeping (started, time, crash restarts) is written
through libvirt's metadata API. A live operation libvirt refuses leaves the definition
updated and is recorded in the mark (``refused``): the result says the change takes
effect at the next cold boot, and the next plan stages it (RestartRequired) instead of
trying again, never a retry loop; a cold boot clears the record. A failure is said in
words and kept as a ``Problem`` record whose message leaves the VM's own
name out (``wording.problems.anonymous``), so equal failures of many VMs group.

Before a domain is defined or deleted, it is read again: its ownership mark decides
(``plan.planned.ownership_refusal``), whatever the plan says: no domain defined since
the plan is defined over, no unmanaged domain is touched but by an adoption, and no
domain whose mark changed owner since the plan.

Per-VM work is independent: a change that waits for a guest (to power off, or to
acknowledge a hot-unplug) runs in a thread of its own, and with an ``InFlight`` (the
daemon's, per host) it runs on after
the apply returns, so no VM waits for another's graceful stop.
"""

from __future__ import annotations

import sys
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from functools import partial
from typing import TYPE_CHECKING

import structlog

from reconciler import ownership
from reconciler.compare import provenance
from reconciler.errors import HypervisorError, HypervisorUnavailable, ReconcilerError
from reconciler.host import provision
from reconciler.host.live import Live, apply_live_ops
from reconciler.model import OwnershipMark, PowerState, Problem, RenderedDomain, VMKey
from reconciler.model.changes import Action, Change, LiveOpKind, Plan
from reconciler.model.results import ApplyResult
from reconciler.plan.planned import ownership_refusal
from reconciler.records import dataclass
from reconciler.render.ports import seal_occupied_ports
from reconciler.wording import problems, rollout
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.host.hypervisor import Hypervisor
    from reconciler.settings.host import HostConfig

__all__ = ["HostResources", "InFlight", "apply_change", "apply_plan"]

log = structlog.get_logger("reconciler.host.apply")
DEFAULT_GRACE_S = 180.0
# Changes that stop a guest (stop, restart, delete) run beside the rest of the plan, at
# most this many at once: one guest that ignores ACPI must not hold every other change
# for its grace period.
MAX_PARALLEL_STOPS = 8
WAIT_TICK_S = 1.0  # how often a wait for stops in flight calls should_stop (the watchdog)

Outcome = tuple[ApplyResult, ReconcilerError | OSError | None]  # a change's result, and its error


@dataclass(frozen=True, slots=True)
class HostResources:
    """The files and volumes a domain needs on this host, under the host config's rules
    (every path re-checked with symlinks resolved inside the allowed directories)."""

    config: HostConfig

    def provision(self, d: RenderedDomain, hv: Hypervisor) -> None:
        """Create what ``d.volumes`` lists and is missing (idempotent)."""
        provision.provision(d, hv, self.config)

    def refresh(self, d: RenderedDomain, hv: Hypervisor) -> list[str]:
        """Before a cold boot: per-boot artefacts (emptyDisk, overlays, ISO) made anew."""
        removed = provision.discard_ephemeral(d, self.config)
        provision.provision(d, hv, self.config)
        return removed

    def reprovision(self, d: RenderedDomain, hv: Hypervisor) -> list[str]:
        """A pool's autohealing: the disks made from their sources removed (made again by the define)."""
        if hv.state(d.name) == PowerState.CRASHED:
            hv.destroy(d.name)  # the dead process holds them
        return provision.discard_provisioned(d, hv, self.config)

    def remove(self, paths: tuple[str, ...], subject: str) -> list[str]:
        """After a prune: the artefacts the ownership mark lists as ephemeral."""
        return provision.remove_paths(paths, self.config, subject)


def _define(c: Change, hv: Hypervisor, resources: HostResources | None) -> OwnershipMark:
    """Provision the domain's volumes and define the plan's definition of it, as it is."""
    if c.definition is None:
        raise ReconcilerError(f"{c.subject}: the plan carries no definition to {c.action}")
    if resources is not None and c.desired is not None:  # none: a kept domain's mark rewritten
        resources.provision(c.desired, hv)
    hv.define(c.definition.xml, c.name)
    if c.definition.seal_after_define:
        _seal_placed_ports(c, c.definition.held_ports, hv)
    return c.definition.mark


def _seal_placed_ports(c: Change, held: frozenset[int], hv: Hypervisor) -> None:
    """Seal the root ports of the devices libvirt has just placed (``render.ports``), as
    KubeVirt does after its read-back: one more ``defineXML`` of libvirt's own
    definition with ``hotplug='off'`` on those ports, when there are any (never one of
    ``held``, the ports the definition's devices held already)."""
    tree = ET.fromstring(hv.persistent_xml(c.name))
    sealed = seal_occupied_ports(tree, skip=held)
    if sealed:
        hv.define(ET.tostring(tree, encoding="unicode"), c.name)
        log.debug("root ports sealed", subject=c.subject, ports=sealed)


def _start(
    c: Change,
    hv: Hypervisor,
    mark: OwnershipMark | None,
    clock: Callable[[], float],
    resources: HostResources | None,
) -> None:
    if hv.state(c.name) == PowerState.CRASHED:
        hv.destroy(c.name)  # on_crash=preserve keeps the dead process: clear it before a cold boot
    if resources is not None and c.desired is not None and c.live is not None:
        resources.refresh(c.desired, hv)  # a new domain's volumes were just provisioned
    hv.start(c.name, paused=c.desired is not None and c.desired.start_paused)
    if mark is not None:
        started = ownership.with_start(mark, clock(), c.restarts)
        hv.set_element_metadata(c.name, ownership.mark_xml(started), ownership.PREFIX, ownership.NS)


def _graceful_stop(c: Change, hv: Hypervisor, grace: float) -> None:
    """Ask the guest to power off; force it after ``grace`` seconds. Logs both ends."""
    if hv.state(c.name) == PowerState.SHUTOFF:
        return
    log.info("graceful stop started", subject=c.subject, grace_s=grace)
    if not hv.stop(c.name, grace):
        log.warning(
            "graceful stop forced",
            subject=c.subject,
            grace_s=grace,
            why="the guest did not power off within its grace period",
        )


def _stops(c: Change) -> bool:
    """Whether applying ``c`` may wait for a guest to power off."""
    return c.stop or c.action in (Action.RESTART, Action.DELETE)


def _waits(c: Change) -> bool:
    """Whether applying ``c`` may wait for its guest: a power-off, or a hot-unplug the
    guest must acknowledge (libvirt waits for it several seconds). Such work runs beside
    the others (``InFlight``), never in the loop."""
    return _stops(c) or any(op.kind == LiveOpKind.DETACH for op in c.live_ops)


def apply_change(
    c: Change,
    hv: Hypervisor,
    resources: HostResources | None = None,
    clock: Callable[[], float] = time.time,
) -> ApplyResult:
    """Apply one planned change (its definition, commit and owner are in it)."""
    mark = c.live.mark if c.live is not None else None
    notes: list[str] = []
    # The ownership mark decides, as the domain is now.
    if (c.defines or c.action == Action.DELETE) and (refusal := ownership_refusal(c, hv.get_domain(c.name))):
        raise ReconcilerError(f"{c.subject}: {c.action} refused: {refusal}")
    if c.reprovision and resources is not None and c.desired is not None:
        removed = resources.reprovision(c.desired, hv)
        notes += [rollout.reprovisioned(removed)] if removed else []
    if c.defines:
        mark = _define(c, hv, resources)
    live = Live(mark)
    if c.live_ops and c.action != Action.RESTART and hv.state(c.name) != PowerState.SHUTOFF:
        live = apply_live_ops(c, hv, mark)
    notes += live.notes
    notes += _power(c, hv, live.mark, clock, resources)
    message = "; ".join([said(c), *notes])
    if live.ok:
        return ApplyResult(c.key, c.action, True, message)
    cause = Problem("; ".join([said(c), *live.causes]), vm=c.key, transient=True)
    return ApplyResult(c.key, c.action, False, message, transient=True, problem=cause)


def _grace(c: Change) -> float:
    """Seconds a guest has to power off: its VM's, else the one its mark kept (a prune)."""
    if c.desired is not None:
        return float(c.desired.grace_period_s)
    if c.live is not None and c.live.mark is not None and c.live.mark.grace_period_s:
        return float(c.live.mark.grace_period_s)
    return DEFAULT_GRACE_S


def _power(
    c: Change,
    hv: Hypervisor,
    mark: OwnershipMark | None,
    clock: Callable[[], float],
    resources: HostResources | None,
) -> list[str]:
    """Restart, stop, start or delete the domain as planned; the notes of what a delete removed."""
    grace = _grace(c)
    if c.action == Action.RESTART:
        _graceful_stop(c, hv, grace)
        _start(c, hv, mark, clock, resources)
    if c.stop:
        _graceful_stop(c, hv, grace)
    if c.start and hv.state(c.name) in (PowerState.SHUTOFF, PowerState.CRASHED):
        _start(c, hv, mark, clock, resources)
    if c.action == Action.DELETE:
        _graceful_stop(c, hv, grace)
        hv.undefine(c.name)
        ephemeral = c.live.mark.ephemeral if c.live is not None and c.live.mark else ()
        removed = resources.remove(ephemeral, c.subject) if resources is not None else []
        if removed:
            return [f"removed {len(removed)} ephemeral artefact(s)"]
    return []


def _run_change(
    c: Change,
    hv: Hypervisor,
    revision: str,
    resources: HostResources | None,
    clock: Callable[[], float],
) -> Outcome:
    try:
        result = apply_change(c, hv, resources, clock)
        log.info(
            c.action.past,
            subject=c.subject,
            action=str(c.action),
            reason=said(c),
            revision=revision,
            **({"changes": provenance.lines(c.fields)} if c.fields else {}),
        )
        return result, None
    except (ReconcilerError, OSError) as err:
        transient = bool(getattr(err, "transient", False))
        return failure(c, err, transient), err


def failure(c: Change, err: ReconcilerError | OSError, transient: bool) -> ApplyResult:
    """``create failed: vm/web: define failed: <libvirt's words>``, and its cause as a record."""
    if isinstance(err, HypervisorError):
        problem = err.problem_of(c.key)
    else:
        problem = Problem(str(err), transient=transient)
    cause = Problem(f"{c.action} failed: {problems.anonymous(problem, c.key)}", vm=c.key, transient=transient)
    return ApplyResult(c.key, c.action, False, f"{c.action} failed: {err}", transient, cause)


def untried(c: Change, why: str) -> ApplyResult:
    return ApplyResult(c.key, Action.SKIPPED, False, why, True, Problem(why, vm=c.key, transient=True))


class InFlight:
    """One host's per-VM work that outlives the apply that started it: graceful stops
    (a stop, a restart, a prune, a move out), at most ``workers`` at once, each VM's own
    steps in order in one task (stop before start or undefine). Owned by the caller
    (the daemon, per host); ``on_done`` is called from the worker when a task ends
    (safe from any thread: the daemon pokes its loop). A VM with work in flight is left
    alone by later applies until its task ends."""

    def __init__(self, workers: int = MAX_PARALLEL_STOPS, on_done: Callable[[], None] | None = None) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="apply-stop")
        self._lock = threading.Lock()
        self._work: dict[VMKey, tuple[Change, Future[Outcome]]] = {}
        self._failed: list[ApplyResult] = []
        self.on_done = on_done

    def busy(self, key: VMKey) -> Change | None:
        """The change in flight for ``key`` (``None``: none)."""
        with self._lock:
            got = self._work.get(key)
        return got[0] if got is not None and not got[1].done() else None

    @property
    def keys(self) -> frozenset[VMKey]:
        with self._lock:
            return frozenset(k for k, (_, f) in self._work.items() if not f.done())

    def submit(self, c: Change, run: Callable[[], Outcome]) -> None:
        def task() -> Outcome:
            try:
                out = run()
            except BaseException as err:  # never lost silently in a pool thread
                log.exception("apply crashed", subject=c.subject, action=str(c.action))
                out = untried(c, f"{c.action} crashed: {type(err).__name__}: {err}"), None
            with self._lock:
                self._work.pop(c.key, None)
                if not out[0].ok:
                    self._failed.append(out[0])
            if out[1] is not None:
                log.error("apply failed", subject=c.subject, action=str(c.action), error=str(out[1]))
            if self.on_done is not None:
                self.on_done()
            return out

        with self._lock:
            self._work[c.key] = (c, self._pool.submit(task))

    def failures(self) -> tuple[ApplyResult, ...]:
        """The failed results of tasks ended since the last call (each reported once)."""
        with self._lock:
            out, self._failed = tuple(self._failed), []
        return out

    def wait(self, tick: Callable[[], object] = lambda: None) -> None:
        """Until every task has ended (stops are forced after their grace period), calling
        ``tick`` about every ``WAIT_TICK_S`` (the watchdog)."""
        while True:
            with self._lock:
                futures = [f for _, f in self._work.values()]
            if not futures:
                return
            wait(futures, timeout=WAIT_TICK_S, return_when=FIRST_COMPLETED)
            tick()

    def close(self) -> None:
        self.wait()
        self._pool.shutdown(wait=True)


def under_way(c: Change, busy: Change) -> ApplyResult:
    """The result of a change left alone while the VM's earlier work is in flight."""
    what = f"{busy.action}" + (" (graceful stop first)" if _stops(busy) else "")
    return ApplyResult(c.key, Action.WAIT, True, f"{what} under way", pending=True)


def apply_plan(
    plan: Plan,
    hv: Hypervisor,
    resources: HostResources | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.time,
    progress: Callable[[int, int, str], None] | None = None,
    inflight: InFlight | None = None,
) -> tuple[ApplyResult, ...]:
    """Run every change; ``should_stop`` is checked between changes (SIGTERM).

    ``progress(n, total, what)`` is called as each change starts (``apply`` on a terminal).

    Changes that stop a guest run in up to ``MAX_PARALLEL_STOPS`` threads beside the
    others. Without ``inflight`` (the CLI) this waits for them: stops in flight always
    finish (forced after their grace period), also after SIGTERM, and ``should_stop``
    keeps being called while they run (it feeds the watchdog). With ``inflight`` (the
    daemon) they run on in its threads after this returns, their results ``pending``,
    and a VM whose earlier work is still in flight is left alone (``Action.WAIT``): no
    VM waits for another's graceful stop. Once the host is unreachable the remaining
    changes are not attempted: one log line says how many, instead of one error per change.
    """
    run = _Applying(plan)
    with ThreadPoolExecutor(max_workers=MAX_PARALLEL_STOPS, thread_name_prefix="apply-stop") as pool:
        for i, c in enumerate(plan.changes):
            run.collect_done()
            if (left := run.left_alone(c, inflight, should_stop)) is not None:
                run.results[i] = left
                continue
            if progress is not None:
                run.started += 1
                stop = " (graceful stop first)" if _stops(c) else ""
                progress(run.started, run.total, f"{c.subject}: {c.action}{stop}")
            if _waits(c) and inflight is not None:
                inflight.submit(c, partial(_run_change, c, hv, plan.revision, resources, clock))
                run.results[i] = ApplyResult(c.key, c.action, True, f"{said(c)} (under way)", pending=True)
            elif _waits(c):
                run.pending[pool.submit(_run_change, c, hv, plan.revision, resources, clock)] = i
            else:
                run.results[i], err = _run_change(c, hv, plan.revision, resources, clock)
                run.note(i, err)
        run.drain(should_stop)
    return run.ended()


class _Applying:
    """One ``apply_plan``'s bookkeeping: a result per change, the changes running in its
    own threads, and the host once lost (the changes after it not attempted)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.results: list[ApplyResult | None] = [None] * len(plan.changes)
        self.pending: dict[Future[Outcome], int] = {}
        self.lost: HypervisorUnavailable | None = None
        self.not_attempted = self.unreachable = self.started = 0
        self.total = sum(1 for c in plan.changes if not c.is_noop)

    def note(self, i: int, err: ReconcilerError | OSError | None) -> None:
        """Log change ``i``'s error; a lost host is counted, said once at the end."""
        if err is None:
            return
        if isinstance(err, HypervisorUnavailable):
            self.unreachable += 1  # one line for all of them, in ended()
            self.lost = self.lost or err
            return
        c = self.plan.changes[i]
        log.error(
            "apply failed",
            subject=c.subject,
            action=str(c.action),
            error=str(err),
            revision=self.plan.revision,
        )

    def collect(self, fut: Future[Outcome]) -> None:
        i = self.pending.pop(fut)
        self.results[i], err = fut.result()
        self.note(i, err)

    def collect_done(self) -> None:
        """The results of the changes of this run's threads that have ended."""
        for fut in [f for f in self.pending if f.done()]:
            self.collect(fut)

    def left_alone(
        self, c: Change, inflight: InFlight | None, should_stop: Callable[[], bool]
    ) -> ApplyResult | None:
        """The result of ``c`` when it is not run: its VM's earlier work in flight, nothing
        to do, SIGTERM, or the host lost; None: run it."""
        busy = inflight.busy(c.key) if inflight is not None else None
        if busy is not None and c.action != Action.UNCHANGED:
            return under_way(c, busy)
        if c.is_noop:  # the words most VMs repeat ("in sync ..."): one copy (the daemon keeps results)
            return ApplyResult(c.key, c.action, True, sys.intern(said(c)))
        if should_stop():
            return untried(c, "interrupted before this change")
        if self.lost is not None:
            self.not_attempted += 1
            return untried(c, f"not attempted: host unreachable ({self.lost})")
        return None

    def drain(self, should_stop: Callable[[], bool]) -> None:
        """Until the changes of this run's threads have ended."""
        while self.pending:
            done, _ = wait(list(self.pending), timeout=WAIT_TICK_S, return_when=FIRST_COMPLETED)
            for fut in done:
                self.collect(fut)
            should_stop()  # feeds the watchdog; stops in flight finish regardless

    def ended(self) -> tuple[ApplyResult, ...]:
        """The results, once every change has one; a lost host said in one line."""
        if self.unreachable or self.not_attempted:
            log.error(
                "apply stopped: host unreachable",
                failed=self.unreachable,
                not_attempted=self.not_attempted,
                error=str(self.lost),
                revision=self.plan.revision,
            )
        return tuple(r for r in self.results if r is not None)
