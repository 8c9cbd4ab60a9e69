"""A change's reasons are records made where the plan decides; only wording/reasons.py
says them. Every kind has words, the words join as the plan line always read, and a
reason's values (not its words) are what the plan carries: a comparison's note as a
``Note``, a plan error as the ``Problem`` the plan's errors hold."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.model import VMKey
from reconciler.model.changes import Action
from reconciler.model.problems import Problem
from reconciler.model.reasons import ChangeReason, Note, Noted, Why
from reconciler.model.refusal import Guard, PruneRefusal
from reconciler.model.rollout import Halt
from reconciler.plan.build import build_plan
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.reasons import fields, joined, note, one, said
from tests.helpers.plans import REV, live_of, rendered


@pytest.mark.parametrize("kind", list(Why))
def test_every_kind_has_words(kind: Why) -> None:
    halt = Halt(VMKey("default", "web-0"), 600.0)
    noted, problem = Note(Noted.NO_BALLOON), Problem("a cause")
    refused = PruneRefusal(Guard.HELD, "a" * 40, 30)
    r = ChangeReason(
        kind,
        "x",
        "y",
        names=("spec.a",),
        count=1,
        total=2,
        halt=halt,
        note=noted,
        problem=problem,
        refusal=refused,
    )
    words = one(r)
    assert words.strip()
    assert "None" not in words


@pytest.mark.parametrize("kind", list(Noted))
def test_every_note_has_words(kind: Noted) -> None:
    words = note(Note(kind, "disk[vdb]", "2", "attach", count=3, total=1))
    assert words.strip()
    assert "None" not in words


def test_a_note_says_its_values() -> None:
    assert note(Note(Noted.SPARE_SLOT, "disk[vdb]", count=14)) == (
        "disk[vdb]: hot-added into a spare hotplug slot (14 left)"
    )
    assert note(Note(Noted.VCPUS_UNPLUG, value="2", count=4, total=1)) == (
        "vCPUs 4 -> 2: the guest can unplug 1: restart-class"
    )
    assert note(Note(Noted.OP_REFUSED, value="2", op="set-vcpus")) == (
        "live set-vcpus 2 vCPUs was refused by libvirt: takes effect at the next cold boot"
    )


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


def test_a_plan_error_is_carried_as_the_problem_the_plan_holds() -> None:
    """A name taken by a domain of another owner: the skipped change's reason is the plan
    error itself (a record), said as the error's message."""
    text = "<domain type='kvm'><name>web</name><memory unit='MiB'>128</memory></domain>"
    d = rendered("web", text)
    live = dataclasses.replace(live_of(d), mark=None)  # a domain the reconciler does not manage
    plan = build_plan(REV, [d], [live], PlanPolicy())
    (c,) = plan.changes
    (error,) = plan.errors
    assert (c.action, c.reasons) == (Action.SKIPPED, (ChangeReason(Why.PROBLEM, problem=error),))
    assert error.vm == d.key
    assert said(c) == error.message
    assert error.message.startswith("a domain of this name exists and is not managed by the reconciler")
