"""The prune guard's refusal is a record (``model.refusal.PruneRefusal``: which guard, the
revision, the counts and the limit), made by ``ownership.judge``; only
``wording/refusal.py`` says it. Aspects: each guard's words, exactly as the plan, status,
``state.json`` and events always said them; the guard fills only what its words name
(equal records read the same); a held domain's reason and the plan's warning carry the
same record and words."""

from __future__ import annotations

import pytest

from reconciler import ownership
from reconciler.model import LiveDomain, PowerState
from reconciler.model.reasons import Why
from reconciler.model.refusal import Guard, PruneRefusal
from reconciler.plan.build import build_plan
from reconciler.settings.policy import PlanPolicy
from reconciler.wording import refusal
from reconciler.wording.problems import words
from reconciler.wording.reasons import said
from tests.helpers.records import rendered

REV = "0123456789abcdef" * 2 + "01234567"
HINT = (
    "held for revision 0123456789ab until a new commit, a higher maxPrunePercent or maxPrune, or "
    "`reconciler apply --confirm-prune 0123456789ab` / policy.confirmPrune: '0123456789ab'"
)

WORDS = [
    (
        PruneRefusal(Guard.MAX_PRUNE, REV, 1, prunable=2),
        f"prune refused: 2 managed domains would be deleted, more than maxPrune=1; {HINT}",
    ),
    (
        PruneRefusal(Guard.MAX_PRUNE, REV, 2, prunable=2, gone=1),
        "prune refused: 2 managed domains would be deleted (with 1 pruned earlier in the window), "
        f"more than maxPrune=2; {HINT}",
    ),
    (
        PruneRefusal(Guard.MAX_PRUNE_PERCENT, REV, 30, prunable=4, managed=10),
        f"prune refused: 4 of 10 managed domains would be deleted (40%), more than maxPrunePercent=30; {HINT}",
    ),
    (
        PruneRefusal(Guard.MAX_PRUNE_PERCENT, REV, 20, prunable=2, managed=10, gone=1),
        "prune refused: 2 of 10 managed domains would be deleted (with 1 pruned earlier in the window) "
        f"(30%), more than maxPrunePercent=20; {HINT}",
    ),
    (
        PruneRefusal(Guard.MAX_PRUNE_PERCENT, REV, 30, prunable=3),
        f"prune refused: 3 of 0 managed domains would be deleted (all), more than maxPrunePercent=30; {HINT}",
    ),
    (
        PruneRefusal(Guard.HELD, REV, 30),
        f"prune refused earlier for this revision (maxPrunePercent=30); {HINT}",
    ),
]


def live(name: str, owner: str) -> LiveDomain:
    d = rendered(name)
    xml = ownership.with_mark(d.xml, ownership.mark_for(d, "b" * 40, owner=owner))
    return LiveDomain(name, "", PowerState.SHUTOFF, xml, mark=ownership.read_mark(xml))


def test_every_guard_is_pinned() -> None:
    assert {r.guard for r, _ in WORDS} == set(Guard)


@pytest.mark.parametrize(("record", "text"), WORDS)
def test_words_of_each_refusal(record: PruneRefusal, text: str) -> None:
    assert refusal.said(record) == text


@pytest.mark.parametrize(
    ("guard", "expected"),
    [
        (ownership.GuardPolicy(count=3), PruneRefusal(Guard.MAX_PRUNE, REV, 3, prunable=4)),
        (ownership.GuardPolicy(limit=30), PruneRefusal(Guard.MAX_PRUNE_PERCENT, REV, 30, 4, managed=10)),
        (ownership.GuardPolicy(limit=50, held=(REV, 50)), PruneRefusal(Guard.HELD, REV, 50)),
        (ownership.GuardPolicy(limit=50, held=("c" * 40, 50)), None),
        (ownership.GuardPolicy(limit=30, confirm=REV[:7]), None),
    ],
)
def test_the_guard_fills_what_its_words_name(
    guard: ownership.GuardPolicy, expected: PruneRefusal | None
) -> None:
    assert ownership.judge(4, 10, REV, guard).refused == expected


def test_held_domains_and_the_warning_carry_one_record() -> None:
    fleet = [live(f"vm{i}", "me") for i in range(10)]
    plan = build_plan(REV, [rendered(f"vm{i}") for i in range(6)], fleet, PlanPolicy(prune=True, owner="me"))
    assert plan.prune_refused == PruneRefusal(Guard.MAX_PRUNE_PERCENT, REV, 30, prunable=4, managed=10)
    (warning,) = plan.warnings
    assert words(warning) == refusal.said(plan.prune_refused)
    held = [c for c in plan.changes if c.name in {f"vm{i}" for i in range(6, 10)}]
    assert len(held) == 4
    for c in held:
        (reason,) = c.reasons
        assert (reason.kind, reason.refusal) == (Why.LEFT_GUARDED, plan.prune_refused)
        assert said(c) == f"VM left git; not pruned: {refusal.said(plan.prune_refused)}"
