"""The words of every notification event, pinned: ``daemon.events.detect`` finds the
events of a host's outcomes and ``wording/events.py`` says them, the very lines webhooks,
Slack and Alertmanager always carried. Aspects: each kind firing and each one resolved,
the rollback's two decisions, the probes' events (not Ready, a liveness failure), a commit
status's description."""

from __future__ import annotations

from reconciler.daemon.events import HostOutcome, detect, rollback_event
from reconciler.model.refusal import Guard, PruneRefusal
from reconciler.wording import events as words

NOW = 1_714_564_800.0
SHA, OLD = "b" * 40, "a" * 40
REFUSED = PruneRefusal(Guard.MAX_PRUNE_PERCENT, SHA, 30, 3, 4)


def messages(prev: HostOutcome, cur: HostOutcome) -> list[tuple[str, str]]:
    return [(e.kind, e.message) for e in detect(prev, cur, NOW)]


def test_each_event_in_its_words() -> None:
    ok = HostOutcome("h1", OLD, OLD, "Succeeded")
    trouble = HostOutcome(
        "h1", SHA, OLD, "ApplyFailed", first_error="vm/web: define failed: no", unreachable="",
        drift_left={"vm/web": ("memory", "cpu")}, drift_healed={"vm/db": ("disk[vdb]",)},
        crash_loop=frozenset({"vm/db"}), crash_restarts={"vm/api": 3}, prune_refused=REFUSED,
        halted="Halted: vm/web not Ready", autohealed={"vm/pool-1": "replica reprovisioned"},
    )  # fmt: skip
    assert messages(ok, trouble) == [
        ("failed", "h1: ApplyFailed: vm/web: define failed: no"),
        ("drift", "vm/web on h1: drift left (selfHeal off): memory, cpu"),
        ("drift", "vm/db on h1: drift healed: disk[vdb]"),
        (
            "prune-refused",
            "h1: prune refused: 3 of 4 managed domains would be deleted (75%), more than maxPrunePercent=30; "
            f"held for revision {SHA[:12]} until a new commit, a higher maxPrunePercent or maxPrune, or "
            f"`reconciler apply --confirm-prune {SHA[:12]}` / policy.confirmPrune: '{SHA[:12]}'",
        ),
        ("rollout-halted", f"h1: revision {SHA[:12]}: rollout Halted: vm/web not Ready"),
        ("crash-loop", "vm/db on h1 keeps crashing: restarts wait (CrashLoopBackOff)"),
        ("crash-restart", "vm/api on h1: crashed, started again (restart 3)"),
        ("autohealed", "vm/pool-1 on h1: replica reprovisioned"),
    ]
    applied = HostOutcome("h1", SHA, SHA, "Succeeded")
    assert messages(trouble, applied) == [
        ("applied", f"h1: applied {SHA[:12]}"),
        ("failed", "h1: reconciles succeed again"),
        ("drift", "vm/web on h1: no drift any more"),
        ("prune-refused", "h1: prune no longer refused"),
        ("rollout-halted", "h1: rollout no longer halted"),
        ("crash-loop", "vm/db on h1: crash loop over"),
    ]
    other = HostOutcome("h1", SHA, OLD, "BuildFailed", first_error="vms/x.yaml:3:1: bad")
    assert messages(trouble, other)[:2] == [
        ("failed", "h1: BuildFailed: vms/x.yaml:3:1: bad"),
        ("failed", "h1: no longer ApplyFailed"),
    ]
    down = HostOutcome("h1", SHA, SHA, "Succeeded", unreachable="test:///x: connection refused")
    assert messages(applied, down) == [
        ("host-unreachable", "host h1 unreachable: test:///x: connection refused")
    ]
    assert messages(down, applied) == [("host-reachable", "host h1 reachable again")]


def test_a_rollback_in_its_words() -> None:
    applied = rollback_event("applied", SHA, OLD, "confirmed by policy.confirmRollback", NOW)
    refused = rollback_event("refused", SHA, OLD, "policy allowRollback: false", NOW)
    assert (applied.severity, applied.message) == (
        "warning",
        f"rollback {SHA[:12]} -> {OLD[:12]} applied: confirmed by policy.confirmRollback",
    )
    assert (refused.severity, refused.message) == (
        "error",
        f"rollback {SHA[:12]} -> {OLD[:12]} refused: policy allowRollback: false",
    )


def test_the_probes_events_in_their_words() -> None:
    assert words.readiness("vm/web", "h1", "not ready: http probe failed") == (
        "vm/web on h1: not ready: http probe failed"
    )
    assert words.liveness_failed("vm/web", "h1", "tcp 22: refused") == (
        "vm/web on h1: liveness probe failed (tcp 22: refused): guest ended, restarted by its run strategy"
    )


def test_a_commit_status_in_its_words() -> None:
    assert words.commit_status("h1", "", "") == "h1: reconciling"
    assert words.commit_status("h1", "Succeeded", "ignored") == "h1: applied"
    assert words.commit_status("h1", "ApplyFailed", "") == "h1: ApplyFailed"
    assert (
        words.commit_status("h1", "BuildFailed", "vms/x.yaml:1:1: bad\nmore")
        == "h1: BuildFailed: vms/x.yaml:1:1: bad"
    )
