"""``run --once``: one revision's work finished, or the exit code says what is left.

Input: the daemon as ``Finishing`` says (its hosts, cycle, output and clock; the daemon,
``daemon/service.py``, is one and imports this module). Output: the exit code: 0 when
the head was applied, Healthy, and nothing of it is left, 1 otherwise. Restarts paced in
batches are waited for, one reconcile every ``rollouts.POLL_S`` up to the timeout
(``rollouts.once``); a halted or unfinished rollout exits 1. A host move takes two
steps (the old host stops and undefines its copy, then the new host creates and starts
it): the graceful stops in flight are waited for and the hosts reconciled again, a
bounded number of times, so the move is done when ``--once`` returns. A move that
cannot finish (the old host unreachable, its stop failed) is printed and logged with
its reason, and the exit code is 1. Never plans or applies itself: ``Daemon.cycle`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TextIO

import structlog

from reconciler.daemon import record, rollouts
from reconciler.model.changes import Action
from reconciler.model.results import Reason
from reconciler.wording import outcome
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.context import Clock
    from reconciler.daemon.notify import Notifier
    from reconciler.daemon.runner import HostRunner
    from reconciler.daemon.triggers import Triggers

ROUNDS = 3  # a move is done in two reconciles; one more for a host reconciled first


class Finishing(Protocol):
    """What ``run --once`` needs of the daemon: its hosts, its last outcome, its output,
    its clock, its cycle (and what ``rollouts.once`` needs: its triggers, kept plans)."""

    clock: Clock
    triggers: Triggers
    keep_plans: bool

    @property
    def hosts(self) -> Sequence[HostRunner]: ...

    @property
    def reason(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def out(self) -> TextIO: ...

    @property
    def notify(self) -> Notifier: ...

    def cycle(self, fetch: bool, force: bool) -> None: ...

    def close_hosts(self) -> None: ...


def work_left(hosts: Sequence[HostRunner]) -> list[tuple[str, str]]:
    """(subject, reason) of each change the hosts' last plans hold back for work on
    another host (a host move half done)."""
    return [
        (c.subject, said(c))
        for h in hosts
        if h.plan is not None
        for c in h.plan.changes
        if c.action == Action.WAIT
    ]


def run_once(d: Finishing, timeout_s: float) -> int:
    """Reconcile until the head's work is done: its paced restarts (up to ``timeout_s``),
    then its host moves (at most ``ROUNDS`` more reconciles); the hosts closed after."""
    try:
        return _finish(d, timeout_s)
    finally:
        d.close_hosts()


def _finish(d: Finishing, timeout_s: float) -> int:
    rollouts.once(d, timeout_s)
    for _ in range(ROUNDS):
        if d.reason != Reason.SUCCEEDED or not work_left(d.hosts):
            break
        for h in d.hosts:  # the old copies' graceful stops end first
            if h.inflight is not None:
                h.inflight.wait(lambda: d.notify.watchdog(d.clock.monotonic()))
        d.cycle(fetch=False, force=True)
    left = work_left(d.hosts)
    log = structlog.get_logger("reconciler.daemon")
    record.print_plans(d.hosts, d.reason, d.message, d.out, d.clock.time())
    for subject, why in left:
        log.error("not finished", subject=subject, why=why)
        print(outcome.not_finished(subject, why), file=d.out)
    d.out.flush()
    paced = [h.paced for h in d.hosts]
    return 0 if d.reason == Reason.SUCCEEDED and not left and not rollouts.unhealthy(paced) else 1
