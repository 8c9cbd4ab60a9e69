"""Paced restarts (plan/pace.py): batches by a pool's or the host's maxUnavailable,
VMs already not Ready counted, the next batch only when the last is Ready, a halt after
the progress deadline, a new commit replacing it; driven by a fake clock."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.model import PowerState, RenderedDomain, RunStrategy, VMKey
from reconciler.model.changes import Action, Change, Definition, Plan
from reconciler.model.health import Probe, ProbeAction, Probes
from reconciler.model.rollout import (
    Health,
    PaceGroup,
    Pacing,
    ReadySource,
    UpdateStrategy,
    scaled_limit,
    valid_limit,
)
from reconciler.ownership import mark_for
from reconciler.plan.pace import pace_plan
from reconciler.wording import rollout as words
from reconciler.wording.reasons import said
from tests.helpers.clock import FakeClock
from tests.helpers.plans import REV, because, live_of, rendered

XML = "<domain type='kvm'><name>{}</name></domain>"


def pool_vm(name: str, order: int, *, size: int = 3, limit: str = "1", strategy: str = "proactive") -> Change:
    d = rendered(
        name,
        XML.format(name),
        pace=PaceGroup("pool/web", limit, size, UpdateStrategy(strategy), order),
    )
    return restart(d)


def restart(d: RenderedDomain) -> Change:
    definition = Definition(d.xml, mark_for(d, REV, None, ""))
    return Change(
        d.key,
        Action.RESTART,
        because("restart-class change"),
        desired=d,
        live=live_of(d),
        definition=definition,
    )


def unchanged(
    name: str, state: PowerState = PowerState.RUNNING, strategy: RunStrategy = RunStrategy.ALWAYS
) -> Change:
    d = rendered(name, XML.format(name), strategy)
    return Change(d.key, Action.UNCHANGED, because("in sync"), desired=d, live=live_of(d, state=state))


def key(name: str) -> VMKey:
    return VMKey.from_domain(name)


def actions(plan: Plan) -> dict[str, Action]:
    return {c.name: c.action for c in plan.changes}


def pool_plan(*names: str) -> Plan:
    return Plan(REV, tuple(pool_vm(n, int(n[-1])) for n in names))


def test_limits_round_down_and_are_at_least_one() -> None:
    assert scaled_limit("25%", 10) == 2  # 2.5 down
    assert scaled_limit("10%", 3) == 1  # 0.3 down, at least 1
    assert scaled_limit("100%", 3) == 3
    assert scaled_limit("2", 10) == 2
    assert valid_limit("25%")
    assert valid_limit("3")
    assert not valid_limit("101%")
    assert not valid_limit("-1")
    assert not valid_limit("x%")


def test_pool_of_three_with_max_unavailable_one_restarts_one_at_a_time() -> None:
    clock = FakeClock()
    first = pace_plan(pool_plan("web-0", "web-1", "web-2"), Pacing(), None, now=clock.time())
    assert actions(first) == {"web-0": Action.RESTART, "web-1": Action.WAIT, "web-2": Action.WAIT}
    p = first.pacing
    assert p is not None
    assert p.health == Health.PROGRESSING
    assert [b.keys for b in p.batches] == [(key("web-0"),), (key("web-1"),), (key("web-2"),)]
    assert words.batches(p.batches) == (
        "restart in 3 batches of 1: web-0, web-1, web-2; each waits for Ready (running)"
    )
    waiting = next(c for c in first.changes if c.name == "web-1")
    assert waiting.definition is None
    assert not waiting.defines
    assert "batch 2 of 3, after web-0 is Ready" in said(waiting)

    # web-0 restarted but not Ready yet: the others still wait
    clock.advance(30)
    done0 = Plan(REV, (unchanged("web-0"), pool_vm("web-1", 1), pool_vm("web-2", 2)))
    ready = {key("web-0"): False}
    second = pace_plan(
        done0, Pacing(), p.progress, now=clock.time(), ready=ReadySource(lambda k: ready.get(k, True))
    )
    assert actions(second)["web-1"] == Action.WAIT
    assert actions(second)["web-2"] == Action.WAIT
    assert second.pacing is not None
    assert second.pacing.progress.batch == (key("web-0"),)

    # Ready: the next batch goes
    ready[key("web-0")] = True
    third = pace_plan(
        done0,
        Pacing(),
        second.pacing.progress,
        now=clock.time(),
        ready=ReadySource(lambda k: ready.get(k, True)),
    )
    assert actions(third) == {"web-0": Action.UNCHANGED, "web-1": Action.RESTART, "web-2": Action.WAIT}
    assert third.pacing is not None
    assert third.pacing.progress.batch == (key("web-1"),)


def test_replicas_already_not_ready_count_against_the_limit_and_go_first() -> None:
    plan = Plan(REV, (pool_vm("web-0", 0), pool_vm("web-1", 1), pool_vm("web-2", 2)))
    not_ready = {key("web-2")}
    paced = pace_plan(plan, Pacing(), None, now=0.0, ready=ReadySource(lambda k: k not in not_ready))
    # web-2 is unavailable already: restarting it costs nothing, and it uses the one slot
    assert actions(paced) == {"web-0": Action.WAIT, "web-1": Action.WAIT, "web-2": Action.RESTART}

    # an unrestarted replica not Ready fills the limit: no restart of a Ready one goes
    other = Plan(REV, (pool_vm("web-0", 0), pool_vm("web-1", 1), unchanged_pool("web-2", 2)))
    held = pace_plan(other, Pacing(), None, now=0.0, ready=ReadySource(lambda k: k not in not_ready))
    assert actions(held)["web-0"] == Action.WAIT
    assert actions(held)["web-1"] == Action.WAIT


def unchanged_pool(name: str, order: int) -> Change:
    d = rendered(name, XML.format(name), pace=PaceGroup("pool/web", "1", 3, UpdateStrategy.PROACTIVE, order))
    return Change(d.key, Action.UNCHANGED, because("in sync"), desired=d, live=live_of(d))


def test_selection_order_and_percentages() -> None:
    plan = Plan(REV, tuple(pool_vm(f"web-{i}", 3 - i, size=4, limit="50%") for i in range(4)))
    paced = pace_plan(plan, Pacing(), None, now=0.0)
    assert paced.pacing is not None
    assert [b.keys for b in paced.pacing.batches] == [
        (key("web-3"), key("web-2")),
        (key("web-1"), key("web-0")),
    ]


def test_host_wide_limit_and_the_annotation_group() -> None:
    vms = [restart(rendered(f"vm-{i}", XML.format(f"vm-{i}"))) for i in range(8)]
    solo = restart(rendered("db", XML.format("db"), pace=PaceGroup(max_unavailable="100%")))
    paced = pace_plan(Plan(REV, (*vms, solo)), Pacing(), None, now=0.0)
    assert paced.pacing is not None
    first = paced.pacing.batches[0].keys
    assert first == (key("vm-0"), key("vm-1"), key("db"))  # 25% of 8; db in its own group of 100%
    assert len(paced.pacing.batches) == 4


def test_a_batch_not_ready_by_the_deadline_halts_and_a_new_commit_replaces_it() -> None:
    clock = FakeClock()
    pacing = Pacing(progress_deadline_s=600)
    first = pace_plan(pool_plan("web-0", "web-1", "web-2"), pacing, None, now=clock.time())
    assert first.pacing is not None
    after = Plan(REV, (unchanged("web-0"), pool_vm("web-1", 1), pool_vm("web-2", 2)))
    never = lambda k: k != key("web-0")  # noqa: E731
    clock.advance(599)
    waiting = pace_plan(after, pacing, first.pacing.progress, now=clock.time(), ready=ReadySource(never))
    assert waiting.pacing is not None
    assert waiting.pacing.health == Health.PROGRESSING
    clock.advance(1)
    halted = pace_plan(
        after,
        pacing,
        waiting.pacing.progress,
        now=clock.time(),
        ready=ReadySource(
            never, cause=lambda k: "guestAgentPing: no answer", waits_for=lambda k: "guestAgentPing"
        ),
    )
    p = halted.pacing
    assert p is not None
    assert p.health == Health.HALTED
    assert p.halted is not None
    assert words.halt(p.halted) == "halted at vm/web-0: not Ready after 10m (guestAgentPing: no answer)"
    assert actions(halted) == {"web-0": Action.UNCHANGED, "web-1": Action.WAIT, "web-2": Action.WAIT}
    # it stays halted, even once web-0 is Ready, until a new commit
    clock.advance(60)
    still = pace_plan(after, pacing, p.progress, now=clock.time())
    assert still.pacing is not None
    assert still.pacing.health == Health.HALTED
    newer = replace(after, revision="f" * 40)
    resumed = pace_plan(newer, pacing, p.progress, now=clock.time())
    assert resumed.pacing is not None
    assert resumed.pacing.halted is None
    assert actions(resumed)["web-1"] == Action.RESTART


@pytest.mark.parametrize("strategy", ["opportunistic", "unmanaged"])
def test_opportunistic_pools_are_staged(strategy: str) -> None:
    plan = Plan(REV, tuple(pool_vm(f"web-{i}", i, strategy=strategy) for i in range(3)))
    paced = pace_plan(plan, Pacing(), None, now=0.0)
    assert set(actions(paced).values()) == {Action.UPDATE}
    assert all(c.restart_required and c.definition is not None for c in paced.changes)
    assert paced.pacing is not None
    assert paced.pacing.batches == ()
    assert paced.pacing.health == Health.HEALTHY


def test_health_degraded_when_a_vm_is_not_ready_and_nothing_runs() -> None:
    plan = Plan(REV, (unchanged("a"), unchanged("b", PowerState.SHUTOFF)))
    paced = pace_plan(plan, Pacing(), None, now=0.0)
    assert paced.pacing is not None
    assert paced.pacing.health == Health.DEGRADED
    assert paced.pacing.not_ready == (key("b"),)
    halted_vm = unchanged("c", PowerState.SHUTOFF, strategy=RunStrategy.HALTED)
    healthy = pace_plan(Plan(REV, (unchanged("a"), halted_vm)), Pacing(), None, now=0.0)
    assert healthy.pacing is not None
    assert healthy.pacing.health == Health.HEALTHY


def test_the_batches_say_what_ready_means() -> None:
    probed = ReadySource(lambda k: True, waits_for=lambda k: "guestAgentPing")
    paced = pace_plan(pool_plan("web-0", "web-1", "web-2"), Pacing(), None, now=0.0, ready=probed)
    assert paced.pacing is not None
    assert words.batches(paced.pacing.batches) == (
        "restart in 3 batches of 1: web-0, web-1, web-2; each waits for Ready (guestAgentPing)"
    )


def test_the_batches_say_the_readiness_probe_of_the_new_definition_without_a_prober() -> None:
    """As ``plan`` and the PR diff pace (no prober): the probe each batch waits for comes
    from the definition the restart brings; a VM without one waits for running."""
    probe = Probes(readiness=Probe(ProbeAction.GUEST_AGENT_PING))
    plan = Plan(
        REV,
        tuple(
            replace(c, desired=replace(c.desired, probes=probe)) if c.desired and c.name != "web-2" else c
            for c in pool_plan("web-0", "web-1", "web-2").changes
        ),
    )
    paced = pace_plan(plan, Pacing(), None, now=0.0)
    assert paced.pacing is not None
    assert [b.waits_for for b in paced.pacing.batches] == ["guestAgentPing", "guestAgentPing", "running"]
    assert words.batches(paced.pacing.batches) == (
        "restart in 3 batches of 1: web-0, web-1, web-2; each waits for Ready (guestAgentPing, running)"
    )


def test_a_halt_without_a_readiness_source_says_what_it_saw() -> None:
    first = pace_plan(pool_plan("web-0", "web-1", "web-2"), Pacing(progress_deadline_s=60), None, now=0.0)
    assert first.pacing is not None
    down = Plan(REV, (unchanged("web-0", PowerState.SHUTOFF), pool_vm("web-1", 1), pool_vm("web-2", 2)))
    halted = pace_plan(down, Pacing(progress_deadline_s=60), first.pacing.progress, now=60.0)
    assert halted.pacing is not None
    assert halted.pacing.halted is not None
    assert words.halt(halted.pacing.halted) == "halted at vm/web-0: not Ready after 1m (domain shutoff)"


def test_a_probed_vm_is_ready_only_by_an_answer_of_its_new_run() -> None:
    """The prober's Ready of the run a restart ended (its ``since`` before the guest's last
    start, as the domain's mark says) is not the new run's: the next batch waits."""
    probes = Probes(readiness=Probe(ProbeAction.GUEST_AGENT_PING))
    first = pace_plan(pool_plan("web-0", "web-1", "web-2"), Pacing(), None, now=100.0)
    assert first.pacing is not None
    d = rendered("web-0", XML.format("web-0"), probes=probes)
    restarted = replace(mark_for(d, REV, None, ""), started=True, last_start=130.0)
    done0 = Change(d.key, Action.UNCHANGED, because("in sync"), desired=d, live=live_of(d, mark=restarted))
    plan = Plan(REV, (done0, pool_vm("web-1", 1), pool_vm("web-2", 2)))

    def paced(since: float) -> dict[str, Action]:
        source = ReadySource(lambda k: True, since=lambda k: since if k == key("web-0") else 0.0)
        return actions(pace_plan(plan, Pacing(), first.pacing.progress, now=140.0, ready=source))  # type: ignore[union-attr]

    assert paced(since=90.0)["web-1"] == Action.WAIT  # Ready since before its restart: the old run's
    assert paced(since=135.0)["web-1"] == Action.RESTART  # Ready on the new run: the next batch goes


def test_a_batch_vm_that_does_not_run_is_not_ready_whatever_the_prober_last_said() -> None:
    """Its restart's stop done, its start not yet: the prober may still say Ready (the run
    that ended); the next batch waits."""
    first = pace_plan(pool_plan("web-0", "web-1", "web-2"), Pacing(), None, now=100.0)
    assert first.pacing is not None
    off = Plan(REV, (unchanged("web-0", PowerState.SHUTOFF), pool_vm("web-1", 1), pool_vm("web-2", 2)))
    paced = pace_plan(off, Pacing(), first.pacing.progress, now=110.0, ready=ReadySource(lambda k: True))
    assert actions(paced)["web-1"] == Action.WAIT
