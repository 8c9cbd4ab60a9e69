"""The daemon's words about a host's outcome (``wording/outcome.py``), as they always
read: sd_notify's STATUS (succeeded, failing, nothing applied yet), ``run --once``'s
last lines, what a plan waits for before it is made again, a host among several."""

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
