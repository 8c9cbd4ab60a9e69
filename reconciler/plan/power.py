"""Run strategies: what to do with a domain's power state, and crash-loop back-off.

Input: the desired run strategy, the live domain (state, libvirt's state reason, the
ownership mark's run bookkeeping), the self-heal setting and the current time.
Output: a ``PowerDecision`` (start / stop / leave, with a reason). Pure: the clock is
passed in; libvirt lifecycle events arrive here already translated to words by
``hypervisor.py`` and only decide whether to reconcile.

DESIGN §5:

| runStrategy    | kept             | guest powers off | crash                  |
|----------------|------------------|------------------|------------------------|
| Always         | running          | start again      | start again (back-off) |
| RerunOnFailure | running until a clean stop | leave off | start again (back-off) |
| Once           | started once     | leave off        | leave off              |
| Manual         | never started or stopped by the reconciler                 |
| Halted         | stopped (graceful, forced after the grace period)          |

A domain stopped out of band (``virsh destroy``) while it should run, or started while
it should be halted, is power *drift*: reverted with self-heal on, reported with it off.
Crash restarts back off like KubeVirt's CrashLoopBackOff: the first restart is
immediate, then 10 s, 20 s, 40 s ... up to 5 min after the previous start; a domain
that ran longer than ``reset_after_s`` before crashing starts counting again. The
previous start is epoch seconds (kept in the mark across daemon restarts), so a wait is
never longer than its delay: after a wall clock stepped backwards (the previous start
lies in the future) the back-off counts as served.
"""

from __future__ import annotations

from reconciler.model import LiveDomain, PowerState, RunStrategy
from reconciler.model.health import LIVENESS_FAILED
from reconciler.model.reasons import ChangeReason, Why
from reconciler.records import dataclass

# Strategies under which the reconciler keeps the domain running.
KEEP_RUNNING = (RunStrategy.ALWAYS, RunStrategy.RERUN_ON_FAILURE)
# Strategies started when the domain is first created.
START_ON_CREATE = (RunStrategy.ALWAYS, RunStrategy.RERUN_ON_FAILURE, RunStrategy.ONCE)
# Strategies a rollout may restart (Manual and Once are never restarted).
RESTARTABLE = KEEP_RUNNING

# libvirt shutoff reasons of a failure, and a guest a failing liveness probe ended
CRASH_REASONS = ("crashed", "failed", LIVENESS_FAILED)
CLEAN_REASONS = ("shutdown",)  # the guest powered off
OUT_OF_BAND_REASONS = ("destroyed",)  # someone powered it off from outside


@dataclass(frozen=True, slots=True)
class Backoff:
    base_s: float = 10.0
    cap_s: float = 300.0
    reset_after_s: float = 600.0

    def delay(self, restarts: int) -> float:
        """Wait before restart number ``restarts`` (1-based) after the previous start."""
        if restarts <= 1:
            return 0.0
        return float(min(self.base_s * 2 ** (restarts - 2), self.cap_s))


@dataclass(frozen=True, slots=True)
class _State:
    """The run strategy and the domain's state a power reason names."""

    strategy: RunStrategy
    live: LiveDomain

    def said(self, kind: Why, count: int = 0, seconds: float = 0.0, flag: bool = False) -> ChangeReason:
        live = self.live
        return ChangeReason(
            kind,
            str(self.strategy),
            str(live.state),
            live.state_reason,
            count=count,
            seconds=seconds,
            flag=flag,
        )


@dataclass(frozen=True, slots=True)
class PowerDecision:
    start: bool = False
    stop: bool = False
    reason: ChangeReason | None = None  # why it starts, stops or reports (None: nothing to say)
    drift: bool = False  # out-of-band power change (reverted only with self-heal)
    restarts: int = 0  # crash-restart count to record with this start
    wait_s: float = 0.0  # > 0: a crash restart is due after this long


def decide_power(
    strategy: RunStrategy,
    live: LiveDomain,
    self_heal: bool = True,
    now: float | None = None,
    backoff: Backoff = Backoff(),
) -> PowerDecision:
    """Start, stop or leave ``live`` under ``strategy``. ``now``: epoch seconds, None = no back-off."""
    mark = live.mark
    started = bool(mark and mark.started)
    state = _State(strategy, live)

    if strategy == RunStrategy.MANUAL:
        return PowerDecision()
    if strategy == RunStrategy.HALTED:
        return _halted(live, state, self_heal)
    if live.active:
        return PowerDecision()

    if strategy == RunStrategy.ONCE:
        if started:
            return PowerDecision()
        return PowerDecision(start=True, reason=state.said(Why.ONCE_START))

    # Always / RerunOnFailure, domain not running.
    if not started:
        return PowerDecision(start=True, reason=state.said(Why.POWER_START))
    if live.state_reason in CRASH_REASONS or live.state == PowerState.CRASHED:
        return _crash_restart(live, state, now, backoff)
    if live.state_reason in CLEAN_REASONS:
        if strategy == RunStrategy.RERUN_ON_FAILURE:
            return PowerDecision()  # a clean stop by the guest: left off
        return PowerDecision(start=True, reason=state.said(Why.POWERED_OFF))
    if live.state_reason in OUT_OF_BAND_REASONS:
        return PowerDecision(start=self_heal, reason=state.said(Why.OUT_OF_BAND, flag=self_heal), drift=True)
    if strategy == RunStrategy.RERUN_ON_FAILURE:
        return PowerDecision()  # no evidence of a failure: left off
    return PowerDecision(start=True, reason=state.said(Why.POWER_START))


def _halted(live: LiveDomain, state: _State, self_heal: bool) -> PowerDecision:
    """runStrategy Halted: stop a running domain (only report it, without self-heal, when
    it was Halted before: someone started it out of band)."""
    if not live.active:
        return PowerDecision()
    drift = live.mark is not None and live.mark.run_strategy == RunStrategy.HALTED
    if drift and not self_heal:
        return PowerDecision(reason=state.said(Why.HALTED_REPORT), drift=True)
    return PowerDecision(stop=True, reason=state.said(Why.HALTED_STOP), drift=drift)


def _crash_restart(live: LiveDomain, state: _State, now: float | None, backoff: Backoff) -> PowerDecision:
    mark = live.mark
    prior = mark.restarts if mark else 0
    last = mark.last_start if mark else 0.0
    if now is not None and last and now - last >= backoff.reset_after_s:
        prior = 0  # ran long enough: a new crash starts counting again
    restarts = prior + 1
    delay = backoff.delay(restarts)
    # A previous start "in the future" means the wall clock stepped back (the mark keeps
    # epoch seconds): the back-off is taken as served rather than stretched by the step.
    if now is not None and last and last <= now < last + delay:
        wait = last + delay - now
        return PowerDecision(
            reason=state.said(Why.CRASH_BACKOFF, count=restarts, seconds=wait), restarts=prior, wait_s=wait
        )
    return PowerDecision(
        start=True, reason=state.said(Why.CRASH_RESTART, count=restarts, seconds=delay), restarts=restarts
    )


def reconcile_on_event(event: str, detail: str) -> bool:
    """Whether a lifecycle event (``hypervisor.py`` words) should trigger a reconcile.

    Stops and crashes do; so do starts, undefines and definitions made by someone
    else, and device and metadata changes (drift). Suspend / resume and PM events do
    not change what the plan does.
    """
    return event in (
        "stopped",
        "crashed",
        "started",
        "undefined",
        "defined",
        "shutdown",
        # A device hotplugged or unplugged, metadata set by someone else: possible drift
        # that no lifecycle event reports (checked at once, not at the next resync).
        "device-added",
        "device-removed",
        "metadata-change",
    )
