"""The planned revision as a value, and its file (plan/planned.py, plan/saved.py).

Covers: fingerprints of live domains and what ``changed_since`` says of each kind of
move (defined, undefined, power state, definition, running domain); which changes
stop a VM; ``with_live`` fills in the domains read again; a restart decided inside a
restart window is refused once the window has closed; the file round-trips every
record a plan carries (host config maps, devices, policy with the prune guard's
memory and host moves, windows, volumes with payload bytes, revisions, placement
needs) and leaves out the live domains and Secret values (naming the Secrets); a file
that is not a plan, of another version, or with an unknown key is refused by name.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from reconciler.model import (
    ConfigDigest,
    CpuNeed,
    LiveDomain,
    PowerState,
    Problem,
    RenderedDomain,
    RevisionInfo,
    Rollout,
    RunStrategy,
    Severity,
    VMKey,
    VolumeSpec,
)
from reconciler.model.changes import Action, Change, ChangeClass, FieldChange, LiveOp, LiveOpKind, Plan
from reconciler.model.reasons import ChangeReason, Note, Noted, Why
from reconciler.model.refusal import Guard, PruneRefusal
from reconciler.model.secretdata import SecretData
from reconciler.plan import saved
from reconciler.plan.planned import (
    PlannedRevision,
    changed_since,
    closed_windows,
    fingerprint,
    stops_a_vm,
    touched_fingerprints,
    with_live,
)
from reconciler.settings.host import HostConfig, HostDevice, ImageSource, NetworkTarget
from reconciler.settings.policy import Elsewhere, PlanPolicy
from reconciler.settings.windows import window
from tests.helpers.plans import because

SATURDAY_0230 = 1735957800.0  # 2025-01-04 02:30 UTC, inside "0 2 * * 6" for 2h
SATURDAY_0500 = SATURDAY_0230 + 2.5 * 3600
WINDOW = window("0 2 * * 6", "2h")


def live(name: str, state: PowerState = PowerState.RUNNING, xml: str = "<domain/>") -> LiveDomain:
    return LiveDomain(name, "u-" + name, state, xml, xml if state == PowerState.RUNNING else "")


def rendered(name: str, **kw: object) -> RenderedDomain:
    return RenderedDomain(
        key=VMKey.from_domain(name),
        uuid="u-" + name,
        xml_data=f"<domain><name>{name}</name></domain>",
        spec_hash="h-" + name,
        run_strategy=RunStrategy.ALWAYS,
        source_path=f"vms/{name}.yaml",
        **kw,  # type: ignore[arg-type]
    )


def planned(*changes: Change, policy: PlanPolicy | None = None) -> PlannedRevision:
    plan = Plan(revision="c" * 40, changes=changes, owner="team-a")
    lives = [c.live for c in changes if c.live is not None]
    return PlannedRevision(
        plan=plan,
        uri="qemu:///system",
        host="h1",
        config=HostConfig(name="h1"),
        policy=policy or PlanPolicy(host="h1", owner="team-a"),
        revision="c" * 40,
        entry="overlays/prod",
        live=touched_fingerprints(plan, lives),
    )


def test_what_changed_since_the_plan_is_said_per_domain() -> None:
    a, b, c, d, e = (live(n) for n in "abcde")
    p = planned(
        Change(VMKey.from_domain("a"), Action.UPDATE, because("x"), live=a),
        Change(VMKey.from_domain("b"), Action.UPDATE, because("x"), live=b),
        Change(VMKey.from_domain("c"), Action.STOP, because("x"), live=c, stop=True),
        Change(VMKey.from_domain("d"), Action.RESTART, because("x"), live=d),
        Change(VMKey.from_domain("e"), Action.UNCHANGED, because("x"), live=e),
        Change(VMKey.from_domain("f"), Action.CREATE, because("x"), desired=rendered("f")),
    )
    assert set(p.live) == {"a", "b", "c", "d", "f"}  # unchanged ones are not checked
    assert p.live["f"] is None
    now = {
        "a": a,
        "b": live("b", xml="<domain><title>edited</title></domain>"),
        "c": live("c", PowerState.SHUTOFF),
        "d": None,
        "f": live("f"),
    }
    assert changed_since(p, now) == (
        "vm/b: its definition changed since the plan",
        "vm/c: was running when planned, now shutoff",
        "vm/d: the domain was undefined since the plan",
        "vm/f: a domain of this name was defined since the plan",
    )
    running = dataclasses.replace(a, live_xml="<domain><devices/></domain>")
    assert changed_since(p, {**now, "a": running})[0] == "vm/a: the running domain changed since the plan"
    assert [c.name for c in p.plan.changes if stops_a_vm(c)] == ["c", "d"]
    filled = with_live(p, now)
    assert [c.live for c in filled.plan.changes] == [a, now["b"], now["c"], None, e, now["f"]]
    assert fingerprint(a) == fingerprint(live("a"))


def test_a_restart_planned_inside_a_window_is_refused_once_it_closed() -> None:
    d = rendered("a")
    restart = Change(VMKey.from_domain("a"), Action.RESTART, because("x"), desired=d, live=live("a"))
    p = planned(restart, policy=PlanPolicy(host="h1", rollout=Rollout.RESTART, restart_windows=(WINDOW,)))
    assert closed_windows(p, SATURDAY_0230) == ()
    assert closed_windows(p, SATURDAY_0500) == (
        "vm/a: its restart was planned inside a restart window, which has closed since",
    )
    now = planned(dataclasses.replace(restart, desired=dataclasses.replace(d, restart_now=True)))
    assert closed_windows(dataclasses.replace(now, policy=p.policy), SATURDAY_0500) == ()
    assert closed_windows(planned(restart), SATURDAY_0500) == ()  # no window: restarted whenever


def test_the_file_round_trips_and_holds_no_live_domain_or_secret_value() -> None:
    secret = SecretData({"default/db": (("password", b"hunter2-in-memory-only"),)})
    desired = rendered(
        "a",
        volumes=(
            VolumeSpec(
                "cloudinit-iso", "/v/a/ci.iso", content=b'{"user-data": "#cloud-config\\n"}', secrets=secret
            ),
            VolumeSpec("file", "/v/a/root.qcow2", capacity=1 << 30, backing="/img/base.qcow2"),
        ),
        rollout=Rollout.RESTART,
        revisions=(RevisionInfo("VirtualMachineClusterInstancetype", "u1", hash="h", commit="c", data="{}"),),
        macs=(("52:54:00:00:00:01", "spec.template.spec.domain.devices.interfaces[0]"),),
        restart_windows=(WINDOW,),
        cpu_need=CpuNeed(2, emulator=True, realtime=(1,)),
        mdev_needs=(("nvidia.com/GRID", "spec.template.spec.domain.devices.gpus[0]"),),
        config=(ConfigDigest("ci", "secret default/db", "sha256:1"),),
    )
    change = Change(
        VMKey.from_domain("a"),
        Action.UPDATE,
        (*because("spec changed"), ChangeReason(Why.NOTE, note=Note(Noted.SPARE_SLOT, "disk[vdb]", count=3))),
        fields=(FieldChange("memory", "1", "2", ChangeClass.LIVE),),
        desired=desired,
        live=live("a"),
        live_ops=(LiveOp(LiveOpKind.SET_MEMORY, value="2048"),),
        restart_required=True,
    )
    config = HostConfig(
        name="h1",
        images={"fedora": ImageSource("/img/fedora.qcow2")},
        networks={"lab": NetworkTarget("bridge", "br0")},
        pod_network=NetworkTarget("user"),
        host_devices={"gpu": HostDevice("mdev", "nvidia-222", ("u1", "u2"))},
        dedicated_cpus=(2, 3),
    )
    policy = PlanPolicy(
        host="h1",
        prune=True,
        rollout=Rollout.RESTART,
        owner="team-a",
        prune_base=frozenset({"a", "b"}),
        prune_held=("c" * 40, 30),
        elsewhere=Elsewhere({"z": "h2"}, frozenset({"h2"}), frozenset({"h2"})),
        restart_windows=(WINDOW,),
    )
    p = dataclasses.replace(planned(change), config=config, policy=policy, planned_at=1.5, plan_ms=7)
    warnings = (
        Problem("deprecated", vm=VMKey("team", "a"), field="spec.x", severity=Severity.WARNING),
        Problem("stale facts", subject="host h1", severity=Severity.WARNING),
    )
    refused = PruneRefusal(Guard.MAX_PRUNE_PERCENT, "c" * 40, 30, prunable=2, managed=2)
    p = dataclasses.replace(p, plan=dataclasses.replace(p.plan, warnings=warnings, prune_refused=refused))
    text = saved.dump([p])
    assert "hunter2" not in text
    doc = json.loads(text)
    entry = doc["plans"][0]
    assert list(entry)[-1] == "plan"  # what it was computed against first
    assert "live" not in entry["plan"]["changes"][0]
    assert entry["plan"]["changes"][0]["desired"]["volumes"][0]["secrets"] == ["default/db"]
    assert (entry["plan"]["changes"][0]["subject"], entry["plan"]["changes"][0]["name"]) == ("vm/a", "a")
    assert entry["plan"]["warnings"][0]["vm"] == "team_a"
    reasons = entry["plan"]["changes"][0]["reasons"]  # records, not words
    assert reasons[0]["problem"]["message"] == "spec changed"
    assert reasons[1]["note"] == {
        "kind": "spare-slot",
        "target": "disk[vdb]",
        "value": "",
        "op": "",
        "count": 3,
        "total": 0,
    }
    expected = {
        "guard": "maxPrunePercent",
        "revision": "c" * 40,
        "limit": 30,
        "prunable": 2,
        "managed": 2,
        "gone": 0,
    }
    assert entry["plan"]["pruneRefused"] == expected  # the guard's record, not its words

    (back,) = saved.load(text.encode(), "plan.json")
    assert back.secrets == {("a", "/v/a/ci.iso"): ("default/db",)}
    (c,) = back.planned.plan.changes
    assert c.live is None  # read again when applied
    assert c.desired is not None
    assert not c.desired.volumes[0].secrets  # taken from the revision when applied
    expect = with_live(p, {"a": None})
    assert dataclasses.replace(back.planned, plan=dataclasses.replace(back.planned.plan, failed=())) == expect
    refilled = saved.with_secrets(back, {"a": desired})
    assert refilled.plan.changes[0].desired.volumes[0].secrets.names() == ("default/db",)  # type: ignore[union-attr]
    moved = dataclasses.replace(desired, volumes=(dataclasses.replace(desired.volumes[0], content=b"{}"),))
    with pytest.raises(saved.SavedPlanError, match="no longer renders it as planned: plan again"):
        saved.with_secrets(back, {"a": moved})


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("not json", "not a saved plan (not JSON"),
        ('{"kind": "Other"}', "not a saved plan (written by `reconciler plan --out FILE`)"),
        ('{"kind": "ReconcilerPlan", "schemaVersion": 1, "plans": []}', "schema version 1"),
        (
            '{"kind": "ReconcilerPlan", "schemaVersion": 3, "plans": []}',
            "a saved plan of schema version 3; this reconciler reads version 5: plan again with it",
        ),
        (  # the prune guard's refusal was text in version 4
            '{"kind": "ReconcilerPlan", "schemaVersion": 4, "plans": []}',
            "a saved plan of schema version 4; this reconciler reads version 5: plan again with it",
        ),
        (
            '{"kind": "ReconcilerPlan", "schemaVersion": 5, "plans": [{"uri": "x", "bogus": 1}]}',
            "plans[0]: 'host' is a required property",
        ),
    ],
)
def test_a_file_that_is_no_plan_of_this_version_is_refused(doc: str, message: str) -> None:
    with pytest.raises(saved.SavedPlanError, match=None) as err:
        saved.load(doc.encode(), "p.json")
    assert message in str(err.value)
    assert str(err.value).startswith("p.json")
