"""A change's reasons are records made where the plan decides; only wording/reasons.py
says them. Every kind has words, the words join as the plan line always read, and a
reason's values (not its words) are what the plan carries."""

from __future__ import annotations

import pytest

from reconciler.model import VMKey
from reconciler.model.changes import Action
from reconciler.model.reasons import ChangeReason, Why
from reconciler.model.rollout import Halt
from reconciler.plan.build import build_plan
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.reasons import fields, joined, one, said
from tests.helpers.plans import REV, rendered


@pytest.mark.parametrize("kind", list(Why))
def test_every_kind_has_words(kind: Why) -> None:
    halt = Halt(VMKey("default", "web-0"), 600.0)
    words = one(ChangeReason(kind, text="x", other="y", names=("spec.a",), count=1, total=2, halt=halt))
    assert words.strip()
    assert "None" not in words


def test_the_reasons_join_as_one_line_in_their_order() -> None:
    reasons = (
        ChangeReason(Why.SPEC_CHANGED, names=("spec.template.spec.domain.memory.guest",)),
        ChangeReason(Why.LIVE, names=("set-memory 2Gi",)),
    )
    assert joined(reasons) == "spec changed: spec.template.spec.domain.memory.guest; live: set-memory 2Gi"


def test_fields_past_four_are_counted() -> None:
    assert fields(("a", "b", "c", "d", "e", "f")) == "a, b, c, d (+2 more)"
    assert fields(("a",)) == "a"


def test_a_held_start_says_the_move_that_holds_it() -> None:
    wait = ChangeReason(Why.MOVE_WAIT, "host-a", "host-b")
    r = ChangeReason(Why.NOT_STARTED, of=(wait,))
    assert one(r) == (
        "not started: move host-a → host-b: waits until the copy on host-a is stopped and undefined"
    )


def test_a_create_carries_its_run_strategy_as_a_value() -> None:
    text = "<domain type='kvm'><name>web</name><memory unit='MiB'>128</memory></domain>"
    d = rendered("web", text)
    (c,) = build_plan(REV, [d], [], PlanPolicy()).changes
    assert c.action == Action.CREATE
    assert c.key == VMKey("default", "web")
    assert c.reasons == (ChangeReason(Why.CREATE, text=str(d.run_strategy), flag=True),)
    assert said(c) == f"not defined on this host; runStrategy {d.run_strategy}: define and start"
