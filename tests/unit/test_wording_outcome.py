"""The daemon's words about a host's outcome (``wording/outcome.py``), as they always
read: sd_notify's STATUS (succeeded, failing, nothing applied yet), ``run --once``'s
last lines, what a plan waits for before it is made again, a host among several, a
rollback's decision and message."""

from __future__ import annotations

from reconciler.wording import outcome

SHA, OLD = "b" * 40, "a" * 40


def test_the_status_line() -> None:
    assert outcome.status_line(SHA, 3, 2, 1, "") == f"applied {SHA[:12]}; 3 VMs, 2 synced, 1 failed"
    failing = outcome.failing(OLD, "BuildFailed")
    assert (
        outcome.status_line("", 0, 0, 0, failing)
        == f"applied none; 0 VMs, 0 synced, 0 failed; {OLD[:12]} BuildFailed"
    )


def test_run_once_and_the_waits() -> None:
    assert outcome.not_finished("vm/a", "stop in flight") == "not finished: vm/a: stop in flight"
    assert outcome.outcome_line("ApplyFailed", "vm/a: define failed") == "ApplyFailed: vm/a: define failed"
    assert (
        outcome.replan_wait("vm/a", "0 2 * * 6 (UTC) for 2h") == "vm/a: restart window 0 2 * * 6 (UTC) for 2h"
    )
    assert outcome.replan_wait("vm/a", "") == "vm/a: crash-loop back-off"
    assert outcome.HOST_MOVE_WAIT == "a host move half done"
    assert outcome.host_line("h1", "held") == "host h1: held"
    assert outcome.state_file("disk full") == "state file: disk full"


def test_a_rollback_in_words() -> None:
    assert outcome.ROLLBACK_ALLOWED == "applied (policy allowRollback: true)"
    assert outcome.rollback_unrelated(SHA) == (
        "refused: the head's history is unrelated to the applied one (no common commit: another "
        f"repository?); to apply it set policy.confirmRollback: '{SHA[:12]}' and reload"
    )
    assert outcome.rollback_confirmed(True, "bbbbbbb") == (
        "applied (an unrelated history): confirmed by policy.confirmRollback bbbbbbb"
    )
    assert (
        outcome.rollback_confirmed(False, "bbbbbbb") == "applied: confirmed by policy.confirmRollback bbbbbbb"
    )
    assert outcome.rollback_refused(SHA) == (
        f"refused (policy allowRollback: false); to apply it set policy.confirmRollback: '{SHA[:12]}' and reload"
    )
    assert outcome.rollback(OLD, SHA, "why") == (
        f"rollback: the branch moved from {OLD[:12]} to {SHA[:12]}, which does not descend from it: why"
    )
