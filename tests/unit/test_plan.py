"""build_plan / format_plan, pure (hand-written XML, no host).

Covers:
- golden plans for tests/data/diff/<case>/ (desired.xml, persistent.xml, optional
  running.xml, meta: state / strategy / rollout / mark) -> plan.txt;
- create per run strategy (started or define only);
- ownership: unmanaged same-name domain is an error and left alone; adopt;
- host assignment: other hosts' VMs neither planned nor pruned; claimUnselected;
- prune: disabled, guard with its reason, per-VM opt-out, ephemeral artefacts;
- drift: config and live drift reverted or reported; power drift;
- rollout: Stage (RestartRequired, kept until the next cold boot), Restart, never
  for Manual / Once; Halted stops; live operations listed;
- the plan cache: same plan, comparisons reused; a second identical plan is empty;
  domains no longer desired are forgotten;
- a requested unplug is not requested again; one VM that cannot be compared is an
  error of its own;
- the final definition, computed in the plan for every change apply defines: the
  rendered XML with the live device addresses carried over (an added device never moves
  an existing one) and the ownership mark of the plan's revision and owner, its run
  bookkeeping kept, its sha256 in the plan's JSON; none for a change that defines
  nothing, nor for a plan nothing applies (``define=False``).
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import ownership
from reconciler.compare.cache import CompareCache
from reconciler.model import (
    LiveDomain,
    OwnershipMark,
    PowerState,
    RenderedDomain,
    Rollout,
    RunStrategy,
    VMKey,
)
from reconciler.model.changes import Action, ChangeClass, LiveOpKind
from reconciler.plan.build import build_plan
from reconciler.plan.output import plan_document
from reconciler.plan.text import format_plan
from reconciler.settings.host import HostConfig
from reconciler.settings.policy import Elsewhere, PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.wording import refusal
from reconciler.wording.problems import words
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from collections.abc import Callable

DATA = Path(__file__).resolve().parents[1] / "data" / "diff"
REV = "0123456789abcdef0123456789abcdef01234567"


def xml(name: str, *, memory: int = 128, vcpus: int = 1, clock: str = "utc", devices: str = "") -> str:
    return (
        f"<domain type='kvm'><name>{name}</name><memory unit='MiB'>{memory}</memory>"
        f"<vcpu current='{vcpus}'>4</vcpu><os><type arch='x86_64' machine='q35'>hvm</type></os>"
        f"<clock offset='{clock}'/><devices>{devices}</devices></domain>"
    )


def rendered(
    name: str, text: str | None = None, strategy: RunStrategy = RunStrategy.ALWAYS, **kw: object
) -> RenderedDomain:
    text = text if text is not None else xml(name)
    return RenderedDomain(
        key=VMKey.from_domain(name),
        uuid="",
        xml_data=text,
        spec_hash=hashlib.sha256(text.encode()).hexdigest(),
        run_strategy=strategy,
        source_path=f"vms/{name}.yaml",
        **kw,  # type: ignore[arg-type]
    )


def live_of(
    d: RenderedDomain,
    persistent: str | None = None,
    state: PowerState = PowerState.RUNNING,
    running: str | None = None,
    reason: str = "",
    mark: OwnershipMark | bool | None = True,
) -> LiveDomain:
    """The domain as a host that applied ``d`` holds it (``persistent`` differs when drifted)."""
    if mark is True:
        m: OwnershipMark | None = ownership.mark_for(d, "f" * 40)
    elif mark is False:
        m = None
    else:
        m = mark if isinstance(mark, OwnershipMark) else None
    text = persistent if persistent is not None else d.xml
    active = state in (PowerState.RUNNING, PowerState.PAUSED)
    return LiveDomain(
        name=d.name,
        uuid="",
        state=state,
        persistent_xml=ownership.with_mark(text, m) if m is not None else text,
        live_xml=(running if running is not None else text) if active else "",
        mark=m,
        state_reason=reason,
    )


def one(plan, name: str):  # type: ignore[no-untyped-def]
    (c,) = [c for c in plan.changes if c.name == name]
    return c


# -- golden cases -------------------------------------------------------------------------

GOLDEN = sorted(p.name for p in DATA.iterdir() if (p / "desired.xml").exists()) if DATA.exists() else []


@pytest.mark.parametrize("case", GOLDEN)
def test_golden_plan(case: str, golden: Callable[[Path, str], None]) -> None:
    d_dir = DATA / case
    meta = json.loads((d_dir / "meta.json").read_text())
    d = rendered(
        "web",
        (d_dir / "desired.xml").read_text(),
        RunStrategy(meta.get("strategy", "Always")),
        rollout=Rollout(meta["rollout"]) if "rollout" in meta else None,
    )
    old = rendered("web", (d_dir / "persistent.xml").read_text(), d.run_strategy)
    mark = ownership.mark_for(old if meta.get("spec_moved", True) else d, "f" * 40)
    running = d_dir / "running.xml"
    live = live_of(
        d,
        (d_dir / "persistent.xml").read_text(),
        PowerState(meta.get("state", "running")),
        running.read_text() if running.exists() else None,
        meta.get("reason", ""),
        mark,
    )
    policy = PlanPolicy(self_heal=meta.get("self_heal", True))
    plan = build_plan(REV, [d], [live], policy)
    golden(d_dir / "plan.txt", format_plan(plan, verbose=True) + "\n")


# -- create / ownership / assignment ----------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "start"),
    [
        (RunStrategy.ALWAYS, True),
        (RunStrategy.RERUN_ON_FAILURE, True),
        (RunStrategy.ONCE, True),
        (RunStrategy.MANUAL, False),
        (RunStrategy.HALTED, False),
    ],
)
def test_create_per_strategy(strategy: RunStrategy, start: bool) -> None:
    c = one(build_plan(REV, [rendered("a", strategy=strategy)], [], PlanPolicy()), "a")
    assert c.action == Action.CREATE
    assert c.start is start


def test_unmanaged_domain_is_an_error_and_left_alone() -> None:
    d = rendered("a")
    theirs = live_of(d, xml("a", memory=64), mark=False)
    plan = build_plan(REV, [d], [theirs], PlanPolicy(prune=True))
    c = one(plan, "a")
    assert c.action == Action.SKIPPED
    assert c.is_noop
    assert tuple(map(words, plan.errors)) == (
        "vm/a: a domain of this name exists and is not managed by the reconciler; set annotation "
        'reconciler.kubevirt.io/adopt: "true" to take it over',
    )
    adopted = one(build_plan(REV, [replace(d, adopt=True)], [theirs], PlanPolicy()), "a")
    assert adopted.action == Action.ADOPT
    assert [f.path for f in adopted.fields] == ["currentMemory", "memory"]


def test_unmanaged_domain_outside_git_is_ignored() -> None:
    theirs = live_of(rendered("x"), mark=False)
    assert build_plan(REV, [], [theirs], PlanPolicy(prune=True)).changes == ()


def test_host_assignment() -> None:
    mine = rendered("mine", hostname="host-a")
    theirs = rendered("theirs", hostname="host-b")
    floating = rendered("floating")
    # "theirs" is defined here and now selects host-b: it moves out (stopped, undefined),
    # unless host-b is not one of this daemon's hosts and the prune guard stops it (1 of 1).
    live = [live_of(theirs)]
    plan = build_plan(REV, [mine, theirs, floating], live, PlanPolicy(host="host-a", prune=True))
    assert {c.name: c.action for c in plan.changes} == {
        "mine": Action.CREATE,
        "floating": Action.CREATE,
        "theirs": Action.SKIPPED,
    }
    assert said(one(plan, "theirs")).startswith("move host-a → host-b: not moved: prune refused")
    two_hosts = PlanPolicy(host="host-a", elsewhere=Elsewhere(hosts=frozenset({"host-b"})))
    plan = build_plan(REV, [mine, theirs, floating], live, two_hosts)
    assert one(plan, "theirs").action == Action.DELETE
    assert said(one(plan, "theirs")).startswith("move host-a → host-b: stop gracefully and undefine here")
    # On host-b, the new copy waits while host-a still holds one.
    on_b = PlanPolicy(host="host-b", elsewhere=Elsewhere({"theirs": "host-a"}, hosts=frozenset({"host-a"})))
    plan = build_plan(REV, [theirs], [], on_b)
    assert one(plan, "theirs").action == Action.WAIT
    assert not one(plan, "theirs").start
    assert "move host-a → host-b: waits until the copy on host-a" in said(one(plan, "theirs"))
    unreachable = PlanPolicy(
        host="host-b", elsewhere=Elsewhere({"theirs": "host-a"}, frozenset({"host-a"}), frozenset({"host-a"}))
    )
    assert "host host-a is unreachable" in said(one(build_plan(REV, [theirs], [], unreachable), "theirs"))
    plan = build_plan(REV, [mine, floating], [], PlanPolicy(host="host-a", claim_unselected=False))
    assert [c.name for c in plan.changes] == ["mine"]


# -- prune --------------------------------------------------------------------------------


def managed_fleet(n: int) -> list[LiveDomain]:
    return [live_of(rendered(f"vm{i}"), state=PowerState.SHUTOFF) for i in range(n)]


def test_prune_disabled_by_default() -> None:
    fleet = managed_fleet(4)
    plan = build_plan(REV, [rendered(f"vm{i}") for i in range(3)], fleet, PlanPolicy())
    assert one(plan, "vm3").action == Action.SKIPPED
    assert "pruning is disabled" in said(one(plan, "vm3"))


def test_prune_guard_refuses_and_says_why() -> None:
    fleet = managed_fleet(10)
    keep = [rendered(f"vm{i}") for i in range(6)]  # 4 of 10 leave: 40% > 30%
    plan = build_plan(REV, keep, fleet, PlanPolicy(prune=True))
    assert not any(c.action == Action.DELETE for c in plan.changes)
    assert len(plan.warnings) == 1
    assert words(plan.warnings[0]).startswith(
        "prune refused: 4 of 10 managed domains would be deleted (40%), more than maxPrunePercent=30; "
    )
    assert plan.prune_refused is not None
    assert refusal.said(plan.prune_refused) == words(plan.warnings[0])
    assert all("not pruned: prune refused" in said(one(plan, f"vm{i}")) for i in range(6, 10))
    from reconciler.daemon.books import held_by_guard  # what the daemon records as would_prune

    assert [c.name for c in plan.changes if held_by_guard(c, "", True)] == [f"vm{i}" for i in range(6, 10)]
    plan = build_plan(REV, [*keep, rendered("vm6")], fleet, PlanPolicy(prune=True))  # 3 of 10: allowed
    assert sorted(c.name for c in plan.changes if c.action == Action.DELETE) == ["vm7", "vm8", "vm9"]


def test_prune_opt_out_and_ephemeral() -> None:
    from reconciler.model import VolumeSpec

    keep = rendered("keep", prune=False)
    eph = rendered("eph", volumes=(VolumeSpec(kind="cloudinit-iso", path="/v/eph-ci.iso", ephemeral=True),))
    fleet = [live_of(keep), live_of(eph), *managed_fleet(8)]
    plan = build_plan(REV, [rendered(f"vm{i}") for i in range(8)], fleet, PlanPolicy(prune=True))
    assert one(plan, "keep").action == Action.SKIPPED
    assert "prune: false" in said(one(plan, "keep"))
    c = one(plan, "eph")
    assert c.action == Action.DELETE
    assert "1 ephemeral artefact(s) removed" in said(c)


# -- drift ---------------------------------------------------------------------------------


@pytest.mark.parametrize("self_heal", [True, False])
def test_config_drift(self_heal: bool) -> None:
    d = rendered("a", strategy=RunStrategy.HALTED)
    drifted = live_of(d, xml("a", memory=256), PowerState.SHUTOFF)
    c = one(build_plan(REV, [d], [drifted], PlanPolicy(self_heal=self_heal)), "a")
    assert c.drift
    assert c.action == (Action.UPDATE if self_heal else Action.UNCHANGED)
    assert ("reverting" in said(c)) is self_heal


def test_live_drift_is_reverted_live() -> None:
    d = rendered("a", xml("a", vcpus=2))
    running = xml("a", vcpus=1)  # someone ran virsh setvcpus --live
    c = one(build_plan(REV, [d], [live_of(d, running=running)], PlanPolicy()), "a")
    assert c.drift
    assert c.action == Action.UPDATE
    assert [(op.kind, op.value) for op in c.live_ops] == [(LiveOpKind.SET_VCPUS, "2")]
    c = one(build_plan(REV, [d], [live_of(d, running=running)], PlanPolicy(self_heal=False)), "a")
    assert c.drift
    assert c.action == Action.UNCHANGED
    assert c.live_ops == ()


@pytest.mark.parametrize("self_heal", [True, False])
def test_power_drift(self_heal: bool) -> None:
    d = rendered("a")
    mark = ownership.with_start(ownership.mark_for(d, REV), 1000.0, 0)
    destroyed = live_of(d, state=PowerState.SHUTOFF, reason="destroyed", mark=mark)
    c = one(build_plan(REV, [d], [destroyed], PlanPolicy(self_heal=self_heal)), "a")
    assert c.drift
    assert c.start is self_heal


# -- rollout and live changes ----------------------------------------------------------------


def spec_change(strategy: RunStrategy, rollout: Rollout | None, policy_rollout: Rollout = Rollout.STAGE):  # type: ignore[no-untyped-def]
    old = rendered("a", xml("a"), strategy)
    new = rendered("a", xml("a", clock="localtime"), strategy, rollout=rollout)
    live = live_of(old)
    return one(build_plan(REV, [new], [live], PlanPolicy(rollout=policy_rollout)), "a")


def test_stage_is_the_default() -> None:
    c = spec_change(RunStrategy.ALWAYS, None)
    assert c.action == Action.UPDATE
    assert c.restart_required
    assert [(f.path, f.change_class) for f in c.fields] == [("clock@offset", ChangeClass.RESTART)]


@pytest.mark.parametrize("host_default", [True, False])
def test_restart_by_annotation_or_host_default(host_default: bool) -> None:
    c = spec_change(RunStrategy.ALWAYS, None if host_default else Rollout.RESTART, Rollout.RESTART)
    assert c.action == Action.RESTART
    assert not c.restart_required


@pytest.mark.parametrize("strategy", [RunStrategy.MANUAL, RunStrategy.ONCE])
def test_manual_and_once_are_never_restarted(strategy: RunStrategy) -> None:
    c = spec_change(strategy, Rollout.RESTART)
    assert c.action == Action.UPDATE
    assert c.restart_required
    assert "never restarted" in said(c)


def test_staged_change_stays_restart_required_until_cold_boot() -> None:
    new = rendered("a", xml("a", clock="localtime"))
    live = live_of(new, running=xml("a"))  # definition updated, running domain not yet
    c = one(build_plan(REV, [new], [live], PlanPolicy()), "a")
    assert c.action == Action.UNCHANGED
    assert c.restart_required
    assert "until the next cold boot" in said(c)
    cold = live_of(new)
    assert not one(build_plan(REV, [new], [cold], PlanPolicy()), "a").restart_required


def test_live_change_lists_operations() -> None:
    old = rendered("a", xml("a", memory=128, vcpus=1))
    new = rendered(
        "a",
        xml(
            "a",
            memory=96,
            vcpus=2,
            devices="<disk type='file' device='disk'><source file='/d'/><target dev='vdb' bus='virtio'/></disk>",
        ),
    )
    c = one(build_plan(REV, [new], [live_of(old, old.xml)], PlanPolicy()), "a")
    assert c.action == Action.UPDATE
    assert not c.restart_required
    assert {f.change_class for f in c.fields} == {ChangeClass.LIVE}
    assert [(op.kind, op.target, op.value) for op in c.live_ops] == [
        (LiveOpKind.SET_MEMORY, "", str(96 * 1024)),
        (LiveOpKind.ATTACH, "disk[vdb]", ""),
        (LiveOpKind.SET_VCPUS, "", "2"),
    ]


def test_halted_domain_running_is_stopped() -> None:
    d = rendered("a", strategy=RunStrategy.HALTED)
    old_mark = ownership.mark_for(rendered("a"), REV)  # it was Always before this commit
    c = one(build_plan(REV, [d], [live_of(d, mark=old_mark)], PlanPolicy()), "a")
    assert c.stop
    assert not c.drift
    # Powering off is the headline, counted as a stop; the new mark (runStrategy Halted)
    # is defined on the way.
    assert c.action == Action.STOP
    assert c.definition is not None
    assert c.defines


# -- cache -----------------------------------------------------------------------------------


def test_cache_reuses_comparisons_and_gives_the_same_plan() -> None:
    desired = [rendered(f"vm{i}", xml(f"vm{i}")) for i in range(20)]
    live = [live_of(d) for d in desired]
    live[3] = live_of(desired[3], xml("vm3", memory=64))
    cache = CompareCache()
    first = build_plan(REV, desired, live, PlanPolicy(), cache=cache)
    assert cache.misses == 20
    assert cache.hits == 0
    second = build_plan(REV, desired, live, PlanPolicy(), cache=cache)
    assert cache.hits == 20
    assert (
        format_plan(first, True)
        == format_plan(second, True)
        == format_plan(build_plan(REV, desired, live, PlanPolicy()), True)
    )
    assert [c.name for c in first.changes if not c.is_noop] == ["vm3"]


def test_in_sync_host_gives_an_empty_plan() -> None:
    desired = [rendered(f"vm{i}", xml(f"vm{i}")) for i in range(5)]
    plan = build_plan(REV, desired, [live_of(d) for d in desired], PlanPolicy())
    assert not plan.has_changes
    assert format_plan(plan) == f"plan for revision {REV[:12]}:\n  (5 unchanged)"


def test_requested_unplug_is_not_requested_again() -> None:
    disk = "<disk type='file' device='disk'><source file='/d'/><target dev='vdc' bus='virtio'/></disk>"
    d = rendered("a", xml("a"))
    held = live_of(d, running=xml("a", devices=disk))  # the guest still holds vdc
    c = one(build_plan(REV, [d], [held], PlanPolicy()), "a")
    assert [(op.kind, op.target) for op in c.live_ops] == [(LiveOpKind.DETACH, "disk[vdc]")]
    assert held.mark is not None
    asked = replace(held, mark=replace(held.mark, unplugs=("disk[vdc]",)))
    c = one(build_plan(REV, [d], [asked], PlanPolicy()), "a")
    assert c.action == Action.UNCHANGED
    assert c.live_ops == ()
    assert not c.drift
    assert c.restart_required  # it leaves at the next cold boot
    assert [(f.path, f.change_class) for f in c.fields] == [("devices/disk[vdc]", ChangeClass.RESTART)]


def test_one_vm_that_cannot_be_compared_does_not_stop_the_plan() -> None:
    bad = rendered("bad", xml("bad").replace("unit='MiB'", "unit='parsec'"))
    good = rendered("good", xml("good", memory=64))
    plan = build_plan(REV, [bad, good], [live_of(bad, xml("bad")), live_of(good, xml("good"))], PlanPolicy())
    assert one(plan, "bad").action == Action.SKIPPED
    assert tuple(map(words, plan.errors)) == (
        "vm/bad: cannot compare with the domain on this host: unknown memory unit 'parsec'",
    )
    assert one(plan, "good").action == Action.UPDATE


def test_cache_forgets_domains_no_longer_desired() -> None:
    desired = [rendered(f"vm{i}", xml(f"vm{i}")) for i in range(5)]
    live = [live_of(d) for d in desired]
    cache = CompareCache()
    build_plan(REV, desired, live, PlanPolicy(), cache=cache)
    assert sorted(cache.names()) == [f"vm{i}" for i in range(5)]
    for _ in range(2):  # two plans without vm2..vm4: they are forgotten
        build_plan(REV, desired[:2], live[:2], PlanPolicy(), cache=cache)
    assert sorted(cache.names()) == ["vm0", "vm1"]
    cache.hits = cache.misses = 0
    again = build_plan(REV, desired, live, PlanPolicy(), cache=cache)
    assert (cache.hits, cache.misses) == (2, 3)
    assert format_plan(again, True) == format_plan(build_plan(REV, desired, live, PlanPolicy()), True)


def test_the_plan_carries_the_final_definition() -> None:
    vda = "<disk type='file' device='disk'><source file='/d/a.img'/><target dev='vda' bus='virtio'/>"
    vdb = "<disk type='file' device='disk'><source file='/d/b.img'/><target dev='vdb' bus='virtio'/>"
    at = "<address type='pci' domain='0x0000' bus='0x00' slot='0x07' function='0x0'/>"
    old = rendered("web", xml("web", devices=vda + "</disk>"), RunStrategy.HALTED)
    started = ownership.with_start(ownership.mark_for(old, "f" * 40, owner="me"), 5.0, 1)
    live = live_of(old, xml("web", devices=vda + at + "</disk>"), PowerState.SHUTOFF, mark=started)
    new = rendered("web", xml("web", devices=vda + "</disk>" + vdb + "</disk>"), RunStrategy.HALTED)
    fresh = rendered("db", strategy=RunStrategy.HALTED)
    plan = build_plan(REV, [new, fresh], [live], PlanPolicy(owner="me"))
    c = one(plan, "web")
    assert c.action == Action.UPDATE
    assert c.definition is not None
    assert c.definition.mark == ownership.mark_for(new, REV, started, "me")
    assert (c.definition.mark.commit, c.definition.mark.started, c.definition.mark.restarts) == (REV, True, 1)
    assert ownership.read_mark(c.definition.xml) == c.definition.mark
    disks = ET.fromstring(c.definition.xml).findall("devices/disk")
    assert [d.find("address") is not None for d in disks] == [True, False]  # vdb: libvirt gives it one
    assert disks[0].find("address").get("slot") == "0x07"  # type: ignore[union-attr]
    created = one(plan, "db")
    assert created.definition is not None
    unmarked = ownership.strip_mark(ET.fromstring(created.definition.xml))
    assert ET.tostring(unmarked) == ET.tostring(ET.fromstring(fresh.xml))
    assert created.definition.mark == ownership.mark_for(fresh, REV, None, "me")
    shown = plan_document(plan, HostTarget("test:///default", HostConfig()), "h1")["changes"]
    assert [e.get("definitionSha256") for e in shown] == [
        hashlib.sha256(d.xml.encode()).hexdigest() for d in (created.definition, c.definition)
    ]
    in_sync = build_plan(REV, [new], [live_of(new, state=PowerState.SHUTOFF)], PlanPolicy())
    assert one(in_sync, "web").definition is None  # unchanged: nothing to define
    simulated = build_plan(REV, [new, fresh], [live], PlanPolicy(owner="me"), define=False)
    assert [c.definition for c in simulated.changes] == [None, None]
