"""A pool's autohealing: a replica that keeps failing to start is reprovisioned.

Input: one VM's planned ``Change`` (``plan/existing.py``: a crashed domain's restart, or
its wait in the crash-loop back-off), its pool's ``Autohealing`` (``PaceGroup``, set
only when the pool sets ``autohealing``), the crash back-off (its reset), the time, the
revision and owner. Output: the change turned into a reprovision, or the change as it
was. Pure.

KubeVirt's pool controller (``pkg/virt-controller/watch/pool``) replaces a VM whose
starts failed ``startUpFailureThreshold`` times in a row (default 3), or that has failed
to start (CrashLoopBackOff) for ``minFailingToStartDuration`` (default 5m): it deletes
the VM and makes it again from the template, its DataVolumes with it. Here the failed
starts are the crash restarts the domain's mark counts (``plan/power.py``: a guest that
crashed, failed or was ended by its liveness probe; a run longer than the back-off's
reset starts the count again), this failure included; the reprovision is a start that
first removes the disks made from their sources (``host/provision.py``
``discard_provisioned``) and defines the domain anew, its restart count at 0.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler import ownership
from reconciler.compare.definition import Documents
from reconciler.model import PowerState
from reconciler.model.changes import Action, Change
from reconciler.model.reasons import ChangeReason, Why
from reconciler.plan.power import CRASH_REASONS, Backoff

if TYPE_CHECKING:
    from reconciler.model.rollout import Autohealing


def failing(c: Change, heal: Autohealing, now: float, backoff: Backoff) -> tuple[int, float] | None:
    """(failed starts in a row, seconds since the last start) of a replica down after a
    failure that its autohealing replaces now; None: it does not."""
    live = c.live
    if live is None or live.active or live.mark is None:
        return None
    if live.state_reason not in CRASH_REASONS and live.state != PowerState.CRASHED:
        return None
    mark = live.mark
    since = now - mark.last_start if mark.last_start else 0.0
    prior = 0 if mark.last_start and since >= backoff.reset_after_s else mark.restarts
    failures = prior + 1  # the restarts made, and this failure
    if failures >= heal.threshold or (prior and since >= heal.min_failing_s):
        return failures, since
    return None


def autohealed(c: Change, *, now: float | None, backoff: Backoff, revision: str, owner: str) -> Change:
    """``c``, or its reprovision when its pool's autohealing replaces the replica now."""
    d = c.desired
    heal = d.pace.autohealing if d is not None and d.pace is not None else None
    if heal is None or d is None or now is None or c.live is None or c.action in (Action.DELETE, Action.STOP):
        return c
    found = failing(c, heal, now, backoff)
    if found is None:
        return c
    mark = ownership.mark_for(d, revision, c.live.mark, owner)
    return replace(
        c,
        action=Action.START,
        reasons=(
            ChangeReason(
                Why.AUTOHEALED,
                count=found[0],
                total=heal.threshold,
                seconds=found[1],
                limit_s=heal.min_failing_s,
            ),
        ),
        start=True,
        stop=False,
        restarts=0,  # a new VM: its failed starts count from none
        requeue_after_s=0.0,
        definition=Documents(d, c.live).definition(mark),
        redefine=False,
        live_ops=(),
        restart_required=False,
        reprovision=True,
    )
