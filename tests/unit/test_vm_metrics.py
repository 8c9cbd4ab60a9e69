"""Per-VM metrics and the crash-restart notification (reconciler/daemon/metrics.py,
publish.py, events.py).

Covers: ``/metrics`` names each VM (labels ``host`` and ``vm``): its sync state, one
series per VM (the state it left removed), whether a restart is required, its crash
restarts, whether it is Ready (read from the prober's snapshot when scraped); a VM that leaves the host, or a host that leaves the configuration, takes its
series along. A crash restart applied is a ``crash-restart`` event naming the VM and
the restart; one the apply left waiting or that failed is none.
"""

from __future__ import annotations

import dataclasses

from prometheus_client.parser import text_string_to_metric_families

from reconciler.daemon.events import HostOutcome, detect
from reconciler.daemon.metrics import Metrics
from reconciler.daemon.publish import crashed_again
from reconciler.daemon.readiness import Snapshot
from reconciler.model import LiveDomain, PowerState, VMKey
from reconciler.model.changes import Action, Change, Plan
from reconciler.model.health import Readiness, ReadyKind, ReadyReason
from reconciler.model.results import ApplyResult, Sync
from tests.helpers.plans import because
from tests.helpers.records import row

SHA = "b" * 40


def samples(m: Metrics, family: str) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for fam in text_string_to_metric_families(m.render().decode()):
        for s in fam.samples:
            if s.name == family:
                out[tuple(s.labels[k] for k in sorted(s.labels))] = s.value
    return out


def test_each_vm_has_its_series_and_they_go_with_it() -> None:
    m = Metrics()
    web = dataclasses.replace(row("web"), restart_required=True)
    m.observe("h1", "Succeeded", 0.1, [web, row("db", sync=Sync.OUT_OF_SYNC)])
    assert samples(m, "reconciler_vm_sync") == {("h1", "Synced", "web"): 1, ("h1", "OutOfSync", "db"): 1}
    assert samples(m, "reconciler_vm_restart_required") == {("h1", "web"): 1, ("h1", "db"): 0}
    m.crash_restarted("h1", "db")
    m.observe("h1", "Succeeded", 0.1, [row("db", sync=Sync.CRASH_LOOP)])  # web left the host
    assert samples(m, "reconciler_vm_sync") == {("h1", "CrashLoopBackOff", "db"): 1}
    assert samples(m, "reconciler_vm_restart_required") == {("h1", "db"): 0}
    assert samples(m, "reconciler_vm_crash_restarts_total") == {("h1", "db"): 1}
    m.forget_host("h1")
    assert samples(m, "reconciler_vm_sync") == {}
    assert samples(m, "reconciler_vm_crash_restarts_total") == {}


def test_a_crash_restart_applied_is_an_event() -> None:
    crashed = LiveDomain("db", "u", PowerState.SHUTOFF, "<domain/>", state_reason="crashed")
    keys = {n: VMKey.from_domain(n) for n in ("db", "web", "mail")}
    plan = Plan(
        SHA,
        tuple(
            Change(k, Action.START, because("starting again"), live=crashed, start=True, restarts=3)
            for k in keys.values()
        ),
    )
    results = (
        ApplyResult(keys["db"], Action.START, True),
        ApplyResult(keys["web"], Action.WAIT, True, pending=True),
        ApplyResult(keys["mail"], Action.START, False),
    )
    again = crashed_again(plan, results)
    assert [c.name for c in again] == ["db"]
    cur = HostOutcome("h1", SHA, SHA, "Succeeded", crash_restarts={c.subject: c.restarts for c in again})
    (e,) = detect(HostOutcome("h1", SHA, SHA, "Succeeded"), cur, 0.0)
    assert (e.kind, e.subject, e.severity) == ("crash-restart", "vm/db", "warning")
    assert "restart 3" in e.message


def test_ready_series_are_read_from_the_probers_snapshot() -> None:
    m = Metrics()
    web, db = VMKey("default", "web"), VMKey("default", "db")
    ready, off = (
        Readiness(True, ReadyReason(ReadyKind.RUNNING), 0.0),
        Readiness(False, ReadyReason(ReadyKind.NOT_RUNNING), 0.0),
    )
    assert samples(m, "reconciler_vm_ready") == {}  # nothing followed yet
    snapshot = Snapshot((("h1", {web: ready, db: off}),))
    m.vm_ready.follow(lambda: snapshot.by_host())
    assert samples(m, "reconciler_vm_ready") == {("h1", "vm/web"): 1, ("h1", "vm/db"): 0}
    snapshot = Snapshot((("h1", {web: ready}), ("h2", {db: ready})))  # db moved to h2
    assert samples(m, "reconciler_vm_ready") == {("h1", "vm/web"): 1, ("h2", "vm/db"): 1}
    lines = [x for x in m.render().decode().splitlines() if x.startswith("reconciler_vm_ready{")]
    assert lines == [
        'reconciler_vm_ready{host="h1",vm="vm/web"} 1.0',
        'reconciler_vm_ready{host="h2",vm="vm/db"} 1.0',
    ]
