"""Live changes that know their limits, and drift judged on the right definition (pure).

Covers: the running domain's capacity read from its definition (spare hotplug slots:
empty ``pcie-root-port`` controllers on q35, free root-bus slots on i440fx, unknown
for XML libvirt did not write; vCPUs the guest can unplug; a balloon); a hot-add is
live while a slot is spare and says how many remain, restart-class beyond; a vCPU
decrease is restart-class unless the guest can unplug them, an increase stays live; a
balloon change without a balloon is restart-class; a device on a sealed root port
(``hotplug='off'``) is unplugged only by a restart; under rollout Restart a change the
running domain cannot take restarts it, under Stage it is RestartRequired; a live
operation libvirt refused once (recorded in the mark) is staged, not tried again, and
a cold boot clears the record; an edit of the persistent definition alone is
corrected there without a restart (Restart) and without a false RestartRequired
(Stage), while a running guest that differs from git is restarted under Restart.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from reconciler import ownership
from reconciler.compare.capacity import Capacity, capacity
from reconciler.model import PowerState, Rollout
from reconciler.model.changes import Action, ChangeClass, LiveOpKind
from reconciler.plan.build import build_plan
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.reasons import said
from tests.helpers.plans import REV, live_of, one, rendered

DISK = "<disk type='file' device='disk'><source file='/v/{n}.qcow2'/><target dev='{n}' bus='virtio'/></disk>"


def q35(name: str, *, vcpus: int = 1, devices: str = "", controllers: str = "", vcpu_map: str = "") -> str:
    return (
        f"<domain type='kvm'><name>{name}</name><memory unit='MiB'>128</memory>"
        f"<vcpu current='{vcpus}'>4</vcpu>{vcpu_map}<os><type arch='x86_64' machine='pc-q35-8.2'>hvm</type></os>"
        f"<devices>{controllers}{devices}</devices></domain>"
    )


def ports(free: int, used: int = 1) -> str:
    """A pcie-root controller, ``used`` root ports holding a device each, ``free`` empty ones."""
    out = "<controller type='pci' index='0' model='pcie-root'/>"
    for i in range(1, used + free + 1):
        out += f"<controller type='pci' index='{i}' model='pcie-root-port'><target chassis='{i}' port='0x{i + 7:x}'/></controller>"
    return out


def held_disks(used: int) -> str:
    return "".join(
        DISK.format(n=f"vd{chr(ord('a') + i)}").replace(
            "</disk>",
            f"<address type='pci' domain='0x0000' bus='0x{i + 1:02x}' slot='0x00' function='0x0'/></disk>",
        )
        for i in range(used)
    )


def test_capacity_counts_empty_root_ports_on_q35() -> None:
    tree = ET.fromstring(q35("a", controllers=ports(free=2, used=1), devices=held_disks(1)))
    assert capacity(tree) == Capacity(spare_slots=2, unpluggable_vcpus=0, balloon=True)
    off = ports(free=2, used=1).replace("<target chassis='3'", "<target hotplug='off' chassis='3'")
    assert capacity(ET.fromstring(q35("a", controllers=off, devices=held_disks(1)))).spare_slots == 1


def test_capacity_unknown_without_libvirt_controllers_and_on_i440fx_counts_root_slots() -> None:
    assert capacity(ET.fromstring(q35("a", devices=DISK.format(n="vda")))).spare_slots is None
    pc = (
        "<domain><name>p</name><os><type machine='pc-i440fx-8.2'>hvm</type></os><devices>"
        + "".join(f"<video><address type='pci' bus='0x00' slot='0x{s:02x}'/></video>" for s in range(0, 30))
        + "</devices></domain>"
    )
    assert capacity(ET.fromstring(pc)).spare_slots == 2  # 31 slots past the host bridge, 29 used


def test_capacity_vcpus_and_balloon() -> None:
    vmap = "<vcpus><vcpu id='0' enabled='yes' hotpluggable='no'/><vcpu id='1' enabled='yes' hotpluggable='yes'/><vcpu id='2' enabled='no' hotpluggable='yes'/></vcpus>"
    tree = ET.fromstring(q35("a", vcpus=2, vcpu_map=vmap, devices="<memballoon model='none'/>"))
    assert (capacity(tree).unpluggable_vcpus, capacity(tree).balloon) == (1, False)


def hot_add(free: int, adds: int, rollout: Rollout | None = None):  # type: ignore[no-untyped-def]
    base = ports(free=free, used=1)
    old = rendered("a", q35("a", devices=DISK.format(n="vda")))
    new_disks = "".join(DISK.format(n=f"vd{chr(ord('b') + i)}") for i in range(adds))
    new = rendered("a", q35("a", devices=DISK.format(n="vda") + new_disks), rollout=rollout)
    running = q35("a", controllers=base, devices=held_disks(1))
    live = live_of(old, old.xml, running=running)
    return one(build_plan(REV, [new], [live], PlanPolicy()), "a")


def test_hot_adds_take_spare_slots_and_say_how_many_remain() -> None:
    c = hot_add(free=2, adds=2)
    assert c.action == Action.UPDATE
    assert [str(op) for op in c.live_ops] == ["attach disk[vdb]", "attach disk[vdc]"]
    assert not c.restart_required
    assert "disk[vdb]: hot-added into a spare hotplug slot (1 left)" in said(c)
    assert "disk[vdc]: hot-added into a spare hotplug slot (0 left)" in said(c)


def test_a_hot_add_beyond_the_spare_slots_is_restart_class() -> None:
    c = hot_add(free=1, adds=2)
    assert [str(op) for op in c.live_ops] == ["attach disk[vdb]"]
    assert c.restart_required
    assert "disk[vdc]: no spare hotplug slot on the running domain: restart-class" in said(c)
    classes = {f.path: f.change_class for f in c.fields}
    assert classes == {"devices/disk[vdb]": ChangeClass.LIVE, "devices/disk[vdc]": ChangeClass.RESTART}
    restarted = hot_add(free=0, adds=1, rollout=Rollout.RESTART)
    assert restarted.action == Action.RESTART


@pytest.mark.parametrize(
    ("before", "after", "unpluggable", "live"),
    [(2, 1, 0, False), (2, 1, 1, True), (1, 2, 0, True)],
)
def test_vcpu_changes_are_live_only_when_the_guest_can_make_them(
    before: int, after: int, unpluggable: int, live: bool
) -> None:
    vmap = (
        "<vcpus>"
        + "".join(
            f"<vcpu id='{i}' enabled='yes' hotpluggable='{'yes' if i >= before - unpluggable else 'no'}'/>"
            for i in range(before)
        )
        + "</vcpus>"
    )
    old = rendered("a", q35("a", vcpus=before))
    new = rendered("a", q35("a", vcpus=after))
    live_dom = live_of(old, old.xml, running=q35("a", vcpus=before, vcpu_map=vmap))
    c = one(build_plan(REV, [new], [live_dom], PlanPolicy()), "a")
    assert c.action == Action.UPDATE  # the definition is updated either way
    assert [(op.kind, op.value) for op in c.live_ops] == (
        [(LiveOpKind.SET_VCPUS, str(after))] if live else []
    )
    assert c.restart_required is not live
    if not live:
        assert f"vCPUs {before} -> {after}: the guest can unplug {unpluggable}: restart-class" in said(c)


def test_a_refused_live_operation_is_staged_once_and_cleared_by_a_cold_boot() -> None:
    old = rendered("a", q35("a", vcpus=1))
    new = rendered("a", q35("a", vcpus=2))
    mark = replace(ownership.mark_for(new, REV), refused=("set-vcpus 2",))
    live_dom = live_of(new, new.xml, running=q35("a", vcpus=1), mark=mark)
    c = one(build_plan(REV, [new], [live_dom], PlanPolicy()), "a")
    assert c.live_ops == ()
    assert c.restart_required
    assert not c.drift
    assert "live set-vcpus 2 vCPUs was refused by libvirt: takes effect at the next cold boot" in said(c)
    # Another value is another operation: tried.
    newer = rendered("a", q35("a", vcpus=3))
    live_dom = live_of(
        old,
        old.xml,
        running=q35("a", vcpus=1),
        mark=replace(ownership.mark_for(old, REV), refused=("set-vcpus 2",)),
    )
    c = one(build_plan(REV, [newer], [live_dom], PlanPolicy()), "a")
    assert [op.key for op in c.live_ops] == ["set-vcpus 3"]
    assert ownership.with_start(mark, 1.0, 0).refused == ()
    assert ownership.read_mark(ownership.with_mark(new.xml, mark)) == mark  # round trip


@pytest.mark.parametrize("rollout", [Rollout.STAGE, Rollout.RESTART])
def test_an_edit_of_the_persistent_definition_alone_is_corrected_there(rollout: Rollout) -> None:
    """``virsh edit`` of the vCPU topology of a running VM (restart-class): the running
    guest still matches git, so the definition is put back and the guest is left running."""
    topology = "<cpu><topology sockets='{}' cores='1' threads='1'/></cpu>"
    d = rendered("a", q35("a", vcpus=2).replace("<os>", topology.format(4) + "<os>"), rollout=rollout)
    edited = d.xml.replace("sockets='4'", "sockets='2'")
    c = one(build_plan(REV, [d], [live_of(d, edited, running=d.xml)], PlanPolicy()), "a")
    assert [(f.path, f.change_class) for f in c.fields] == [("cpu/topology@sockets", ChangeClass.RESTART)]
    assert c.drift
    assert c.action == Action.UPDATE
    assert not c.restart_required
    assert c.definition is not None


def test_a_running_guest_that_differs_from_git_is_restarted_under_restart() -> None:
    d = rendered("a", q35("a"), rollout=Rollout.RESTART)
    running = q35("a").replace("machine='pc-q35-8.2'", "machine='pc-q35-7.0'")
    c = one(build_plan(REV, [d], [live_of(d, running, running=running)], PlanPolicy()), "a")
    assert c.drift
    assert c.action == Action.RESTART
    staged = one(
        build_plan(
            REV, [replace(d, rollout=Rollout.STAGE)], [live_of(d, running, running=running)], PlanPolicy()
        ),
        "a",
    )
    assert (staged.action, staged.restart_required) == (Action.UPDATE, True)


def test_a_stopped_domain_has_no_limits() -> None:
    old = rendered("a", q35("a", vcpus=2))
    new = rendered("a", q35("a", vcpus=1))
    c = one(build_plan(REV, [new], [live_of(old, old.xml, PowerState.SHUTOFF)], PlanPolicy()), "a")
    assert (c.action, c.defines, c.restart_required, c.live_ops) == (Action.START, True, False, ())


def test_a_device_on_a_sealed_root_port_is_unplugged_only_by_a_restart() -> None:
    # vda (boot time) sits on port 1, sealed as KubeVirt seals it; vdb was hot-added into port 2
    sealed = ports(free=1, used=2).replace("<target chassis='1'", "<target hotplug='off' chassis='1'")
    running = q35("a", controllers=sealed, devices=held_disks(2))
    assert capacity(ET.fromstring(running)).sealed == frozenset({"disk[vda]"})
    both = rendered("a", q35("a", devices=DISK.format(n="vda") + DISK.format(n="vdb")))
    for gone, live in (("vda", False), ("vdb", True)):
        keep = "vdb" if gone == "vda" else "vda"
        new = rendered("a", q35("a", devices=DISK.format(n=keep)))
        c = one(build_plan(REV, [new], [live_of(both, both.xml, running=running)], PlanPolicy()), "a")
        assert [str(op) for op in c.live_ops] == ([f"detach disk[{gone}]"] if live else [])
        assert c.restart_required is not live
        if not live:
            assert "disk[vda]: its root port is sealed (hotplug off): restart-class" in said(c)
