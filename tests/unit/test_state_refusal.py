"""``state.json`` keeps the prune guard's refusal as its record, worded when shown
(``status.refused``). Aspects: each guard's record goes through the file (JSON) and comes
back equal, with the words ``wording.refusal`` gives it; the daemon's bookkeeping writes
the record, no words, and logs a refusal once; ``status -o json`` and the page word it,
the status schema unchanged; a file of the previous version, which kept the words, still
loads (the guard's memory, the status document) and reads as the refusal it holds for;
an entry not well formed is shown as it is."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
import structlog

from reconciler import ownership
from reconciler.daemon import books, hoststate
from reconciler.daemon.hoststate import HostState
from reconciler.model import LiveDomain, PowerState
from reconciler.model.refusal import Guard, PruneRefusal
from reconciler.model.results import Reason, ReconcileStatus
from reconciler.plan.build import build_plan
from reconciler.settings.host import HostConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.status import refused, status_document
from reconciler.wording import refusal
from tests.helpers import schemas
from tests.helpers.clock import FakeClock
from tests.helpers.records import rendered

REV = "0123456789abcdef" * 2 + "01234567"
RECORDS = [  # each guard's refusal, as ownership.judge makes them
    PruneRefusal(Guard.MAX_PRUNE, REV, 1, prunable=2),
    PruneRefusal(Guard.MAX_PRUNE, REV, 2, prunable=2, gone=1),
    PruneRefusal(Guard.MAX_PRUNE_PERCENT, REV, 30, prunable=4, managed=10),
    PruneRefusal(Guard.MAX_PRUNE_PERCENT, REV, 20, prunable=2, managed=10, gone=1),
    PruneRefusal(Guard.HELD, REV, 30),
]


def live(name: str, owner: str) -> LiveDomain:
    d = rendered(name)
    xml = ownership.with_mark(d.xml, ownership.mark_for(d, "b" * 40, owner=owner))
    return LiveDomain(name, "", PowerState.SHUTOFF, xml, mark=ownership.read_mark(xml))


# A host's outcome as state.json keeps it, but its refusal.
HOST = {"uri": "test:///default", "reason": "PruneFailed", "message": "", "attempted_revision": REV,
        "applied_revision": "", "duration_ms": 1}  # fmt: skip


def _through_the_file(entry: object) -> dict[str, object]:
    return json.loads(json.dumps(entry))  # type: ignore[no-any-return]


@pytest.mark.parametrize("record", RECORDS)
def test_each_refusal_comes_back_from_the_file_as_its_record(record: PruneRefusal) -> None:
    entry = _through_the_file(refused.kept(record, 30, ["vm6", "vm7"]))
    assert "message" not in entry
    assert not any(refusal.said(record) in str(v) for v in entry.values())
    assert (entry["revision"], entry["limit"], entry["would_prune"]) == (REV, 30, ["vm6", "vm7"])
    assert refused.recorded(entry) == record
    assert refused.message(entry) == refusal.said(record)


@pytest.mark.parametrize("record", RECORDS)
def test_status_shows_the_refusal_in_words_under_the_schema_it_had(record: PruneRefusal) -> None:
    host = {**HOST, "prune_refused": refused.kept(record, 30, ["vm6"])}
    doc = status_document({"hosts": {"h1": _through_the_file(host)}}, [], [])
    assert doc["hosts"]["h1"]["pruneRefused"] == {
        "revision": REV,
        "limit": 30,
        "message": refusal.said(record),
        "wouldPrune": ["vm6"],
    }
    schemas.check(_through_the_file(doc), "status")


# hosts.<host>.prune_refused as the previous version wrote it: the refusal's words.
PREVIOUS = {
    "revision": REV,
    "limit": 30,
    "message": refusal.said(PruneRefusal(Guard.MAX_PRUNE_PERCENT, REV, 30, prunable=4, managed=10)),
    "would_prune": ["vm6", "vm7", "vm8", "vm9"],
}


def test_a_state_file_of_the_previous_version_still_loads() -> None:
    s = hoststate.guard_restored(HostState(), {"prune_refused": PREVIOUS})
    assert s.prune_refused == PREVIOUS  # the guard's memory: revision and limit
    held = PruneRefusal(Guard.HELD, REV, 30)  # what the guard says of it at the next reconcile
    assert refused.recorded(PREVIOUS) == held
    assert refused.message(PREVIOUS) == refusal.said(held)
    doc = status_document({"hosts": {"h1": {**HOST, "prune_refused": PREVIOUS}}}, [], [])
    assert doc["hosts"]["h1"]["pruneRefused"]["message"] == refusal.said(held)
    schemas.check(_through_the_file(doc), "status")
    # The guard reads it as it always did: 2 of 10 (20%) pass maxPrunePercent=30, yet the
    # revision stays refused, in the very words its record gives.
    fleet = [live(f"vm{i}", "me") for i in range(10)]
    policy = PlanPolicy(prune=True, owner="me", prune_held=(REV, 30))  # as PREVIOUS holds them
    assert build_plan(REV, [rendered(f"vm{i}") for i in range(8)], fleet, policy).prune_refused == held


def test_an_entry_not_well_formed_is_shown_as_it_is() -> None:
    for entry in ({"limit": 30}, {"revision": REV, "limit": "30"}, "refused"):
        host = {"reason": "PruneFailed", "prune_refused": entry}
        assert refused.shown(host) is host
        assert refused.message(entry if isinstance(entry, dict) else None) == ""
    odd = {
        **refused.kept(RECORDS[0], 30, []),
        "refusal": {"guard": "maxPrune", "revision": REV, "limit": True},
    }
    assert refused.recorded(odd) == PruneRefusal(Guard.HELD, REV, 30)  # a record not well formed: held
    assert refused.shown("not a host") == "not a host"


@dataclass
class _Runner:
    """What ``books.record_guard`` reads and replaces of a host's runner."""

    target: HostTarget
    name: str = "h1"
    clock: FakeClock = field(default_factory=FakeClock)
    state: HostState = field(default_factory=HostState)
    window_s: float = 3600.0


def test_the_daemon_keeps_the_record_and_logs_a_refusal_once() -> None:
    fleet = [live(f"vm{i}", "me") for i in range(10)]
    policy = PlanPolicy(prune=True, owner="me")
    plan = build_plan(REV, [rendered(f"vm{i}") for i in range(6)], fleet, policy)
    assert plan.prune_refused is not None
    h = _Runner(HostTarget("test:///default", HostConfig(), policy))
    status = ReconcileStatus(Reason.PRUNE_FAILED, REV, "", 0.0, 0)
    with structlog.testing.capture_logs() as logs:
        books.record_guard(h, plan, status, fleet)  # type: ignore[arg-type]
        entry = h.state.prune_refused
        books.record_guard(h, plan, status, fleet)  # type: ignore[arg-type]
    assert entry is not None
    assert h.state.prune_refused == entry
    assert _through_the_file(entry) == {
        "revision": REV,
        "limit": 30,
        "would_prune": ["vm6", "vm7", "vm8", "vm9"],
        "refusal": {
            "guard": "maxPrunePercent",
            "revision": REV,
            "limit": 30,
            "prunable": 4,
            "managed": 10,
            "gone": 0,
        },
    }
    assert [e["message"] for e in logs if e["event"] == "prune refused"] == [refusal.said(plan.prune_refused)]


def test_the_guards_inputs_are_made_for_each_pass_and_not_held_after_it() -> None:
    h = _Runner(HostTarget("test:///default", HostConfig(), PlanPolicy(prune=True, owner="me")))
    h.state = hoststate.applied_managed(h.state, ("vm0", "vm1"), 0.0, 3600.0)
    target = books.guarded(h, [h])  # type: ignore[arg-type, list-item]
    assert target.policy.prune_base == frozenset({"vm0", "vm1"})
    after = books.unguarded(target)
    assert (after.policy.prune_base, after.policy.elsewhere) == (None, None)
    assert after.policy == h.target.policy  # the rest as it was
    assert books.unguarded(after) is after
