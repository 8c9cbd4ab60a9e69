"""The lines under the status table (``status.summary_lines``, worded by
``wording/status_lines.py``), every kind of them, as ``status`` always printed them: the
revisions (with and without the time applied), the message, a rollback, a held host, a
failing one, a rollout that is not Healthy, the VMs other hosts run (ten named, the rest
counted), nothing for a host that succeeded."""

from __future__ import annotations

import time

from reconciler.status import summary_lines

A, B, C = "a" * 40, "b" * 40, "c" * 40


def test_every_line_under_the_table() -> None:
    others = [{"subject": f"vm/o{i}", "host": "h9" if i % 2 else ""} for i in range(12)]
    state = {
        "attempted_revision": B,
        "applied_revision": A,
        "reason": "RollbackRefused",
        "message": "rollback refused",
        "rollback": {"from_revision": C, "to_revision": B, "why": "refused (policy allowRollback: false)"},
        "hosts": {
            "h3": {"reason": "Succeeded", "other_hosts": others},
            "h1": {"held": {"enforced": A, "blocked": B, "reason": "BuildFailed", "message": "vms/x.yaml:1:1: bad"}},
            "h2": {"uri": "qemu+ssh://h2/system", "reason": "ApplyFailed", "message": "down",
                   "rollout": {"health": "Halted", "revision": B, "message": "halted: vm/a not Ready"}},
            "h4": {"reason": "Succeeded", "rollout": {"health": "Healthy", "revision": B, "message": "x"}},
        },
    }  # fmt: skip
    named = ", ".join(f"vm/o{i} ({'on h9' if i % 2 else 'selects no host'})" for i in range(10))
    assert summary_lines(state) == [
        f"last attempted {B[:12]} (RollbackRefused), last applied {A[:12]}",
        "message: rollback refused",
        f"rollback: {C[:12]} -> {B[:12]} (not a descendant): refused (policy allowRollback: false)",
        f"host h1: applied {A[:12]} enforced; newer revision {B[:12]} blocked (BuildFailed): vms/x.yaml:1:1: bad",
        "host h2 (qemu+ssh://h2/system): ApplyFailed: down",
        f"host h2: revision {B[:12]} halted: vm/a not Ready",
        f"host h3: 12 VM(s) of the revision run on other hosts: {named} and 2 more",
    ]


def test_the_time_applied_and_nothing_known() -> None:
    when = time.time() - 120
    line = summary_lines({"applied_at": when, "reason": ""})[0]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
    assert line.startswith(f"last attempted - (-), last applied - at {stamp} (")
    assert line.endswith(" ago)")
