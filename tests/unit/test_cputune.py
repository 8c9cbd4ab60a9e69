"""Dedicated CPUs placed on a host (render.cputune) and through a whole revision.

Covers: placement is deterministic (by name, lowest free CPUs), disjoint, stable (a VM
keeps the CPUs its live domain pins, even when a VM sorted before it arrives), never
hands out a CPU another domain of the host pins, prefers one NUMA cell, and an
exhausted set is an error naming the VMs holding it; what a domain pins reads back
from its XML; IO-thread pinning as KubeVirt pins it; the realtime mask; the NUMA
passthrough cells; a revision's VM that does not fit is left out with a host error
while the others proceed; a cached VM is placed again without being rendered again, and
serialized again only when its placement changes; removing the pins is a restart-class
change.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

import pytest

from reconciler import render, source
from reconciler.context import Context
from reconciler.desired import PipelineCache, desired_state
from reconciler.model import CpuNeed, LiveDomain, PowerState, RenderedDomain, RunStrategy, VMKey
from reconciler.model.changes import ChangeClass
from reconciler.render import cputune
from reconciler.render.cpu import realtime_vcpus
from reconciler.render.placement import held_from_live
from reconciler.settings.host import HostConfig
from reconciler.wording.problems import words
from tests.helpers.domains import diff_domains

if TYPE_CHECKING:
    from tests.helpers.git import GitRepo

TWO = CpuNeed(2)


def test_placement_is_deterministic_disjoint_and_lowest_first() -> None:
    p = cputune.place([("b", TWO), ("a", CpuNeed(2, emulator=True))], range(2, 10), {})
    assert dict(p.cpus) == {"a": (2, 3, 4), "b": (5, 6)}
    assert not p.errors


def test_a_vm_keeps_what_it_holds_when_another_sorts_before_it() -> None:
    held = {"m": (5, 6)}
    p = cputune.place([("m", TWO), ("a", TWO)], range(2, 10), held)
    assert dict(p.cpus) == {"m": (5, 6), "a": (2, 3)}
    # held CPUs leave the set, or clash, or no longer fit the need: placed afresh
    assert cputune.place([("m", TWO)], range(2, 6), {"m": (5, 6)}).cpus == {"m": (2, 3)}
    assert cputune.place([("m", CpuNeed(3))], range(2, 10), held).cpus == {"m": (2, 3, 4)}


def test_cpus_another_domain_pins_are_not_given_away() -> None:
    p = cputune.place([("a", TWO)], range(2, 6), {"manual": (2, 3)})
    assert dict(p.cpus) == {"a": (4, 5)}
    full = cputune.place([("a", CpuNeed(3))], range(2, 6), {"manual": (2, 3)}, host="h1")
    assert full.errors["a"] == (
        "dedicatedCpuPlacement needs 3 of host h1's dedicated CPUs (2-5); 2 are free, the others held by vm/manual"
    )


def test_exhausted_set_names_the_holders() -> None:
    p = cputune.place([("a", TWO), ("b", TWO), ("c", TWO)], range(2, 6), {})
    assert set(p.cpus) == {"a", "b"}
    assert "held by vm/a, vm/b" in p.errors["c"]


def test_one_numa_cell_when_one_has_room() -> None:
    cells = ((0, (0, 1, 2, 3)), (1, (4, 5, 6, 7)))
    p = cputune.place([("a", CpuNeed(1)), ("b", CpuNeed(3))], range(2, 8), {}, cells)
    assert dict(p.cpus) == {"a": (2,), "b": (4, 5, 6)}  # b does not straddle the cells


def domain(need: CpuNeed, iothreads: int = 0, kvm: bool = False) -> render.Draft:
    xml = (
        f'<domain type="{"kvm" if kvm else "qemu"}"><name>x</name><memory unit="b">2147483648</memory>'
        f'<vcpu placement="static">{need.vcpus}</vcpu>'
        + (f"<iothreads>{iothreads}</iothreads>" if iothreads else "")
        + '<os><type arch="x86_64" machine="q35">hvm</type></os><cpu mode="host-model" /><devices /></domain>'
    )
    record = RenderedDomain(VMKey("default", "x"), "u", "", "", RunStrategy.HALTED, "x.yaml", cpu_need=need)
    return render.Draft(ET.fromstring(xml), record)


def pin(
    draft: render.Draft, cpus: tuple[int, ...], cells: tuple[tuple[int, tuple[int, ...]], ...] = ()
) -> RenderedDomain:
    """The draft serialized with ``cpus`` placed for it (``cputune.pin`` on its tree)."""
    return render.finish(draft, render.Placed(cpus=cpus, cells=cells))


def tune(d: RenderedDomain) -> list[tuple[str, dict[str, str]]]:
    el = ET.fromstring(d.xml).find("cputune")
    assert el is not None
    return [(c.tag, dict(c.attrib)) for c in el]


def test_pins_read_back_from_the_xml() -> None:
    pinned = pin(domain(CpuNeed(2, emulator=True)), (7, 3, 9))
    assert cputune.held_cpus(pinned.xml) == (7, 3, 9)
    assert cputune.held_cpus(render.finish(domain(TWO)).xml) == ()


@pytest.mark.parametrize(
    ("need", "iothreads", "pins"),
    [
        (CpuNeed(4, emulator=True), 2, [("1", "9")]),  # on the emulator's CPU
        (CpuNeed(2), 3, [("1", "3"), ("2", "2"), ("3", "3")]),  # as many threads as vCPUs or more
        (CpuNeed(5), 2, [("1", "2,3,4"), ("2", "5,6")]),  # balanced slices
    ],
)
def test_io_threads_pinned_as_kubevirt_pins_them(
    need: CpuNeed, iothreads: int, pins: list[tuple[str, str]]
) -> None:
    cpus = tuple(range(2, 2 + need.count)) if not need.emulator else (2, 3, 4, 5, 9)
    got = [
        (a["iothread"], a["cpuset"])
        for tag, a in tune(pin(domain(need, iothreads), cpus))
        if tag == "iothreadpin"
    ]
    assert got == pins


def test_realtime_and_kvm_hint() -> None:
    d = pin(domain(CpuNeed(4, realtime=realtime_vcpus("0-3,^0", 4)), kvm=True), (2, 3, 4, 5))
    assert ("vcpusched", {"vcpus": "1-3", "scheduler": "fifo", "priority": "1"}) in tune(d)
    root = ET.fromstring(d.xml)
    assert root.find("features/kvm/hint-dedicated") is not None
    assert root.find("features/pmu").get("state") == "off"  # type: ignore[union-attr]
    assert ET.fromstring(pin(domain(TWO), (2, 3)).xml).find("features/kvm") is None  # not on TCG
    assert realtime_vcpus(None, 3) == (0, 1, 2)
    with pytest.raises(ValueError, match="has vCPUs 0-1"):
        realtime_vcpus("0-4", 2)


def test_numa_passthrough_mirrors_the_host_cells() -> None:
    cells = ((0, (0, 1, 2, 3)), (1, (4, 5, 6, 7)))
    d = pin(domain(CpuNeed(4, numa=True)), (2, 3, 4, 5), cells)
    root = ET.fromstring(d.xml)
    assert [dict(c.attrib) for c in root.findall("cpu/numa/cell")] == [
        {"id": "0", "cpus": "0-1", "memory": "1048576", "unit": "KiB"},
        {"id": "1", "cpus": "2-3", "memory": "1048576", "unit": "KiB"},
    ]
    assert [dict(m.attrib) for m in root.findall("numatune/*")] == [
        {"mode": "strict", "nodeset": "0,1"},
        {"cellid": "0", "mode": "strict", "nodeset": "0"},
        {"cellid": "1", "mode": "strict", "nodeset": "1"},
    ]


VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        cpu:
          cores: {cores}
          dedicatedCpuPlacement: true
        memory:
          guest: 512Mi
"""


def test_a_revision_places_what_fits_and_names_what_does_not(git_repo: GitRepo) -> None:
    for name, cores in (("a", 2), ("b", 2), ("c", 3)):
        git_repo.write(f"vms/{name}.yaml", VM.format(name=name, cores=cores))
    git_repo.commit()
    host = HostConfig(name="h1", dedicated_cpus=(2, 3, 4, 5, 6))
    snapshot = source.read_snapshot(git_repo.path)
    d = desired_state(snapshot, "", host, render.HostCaps.default())
    assert {r.name: cputune.held_cpus(r.xml) for r in d.rendered} == {"a": (2, 3), "b": (4, 5)}
    (err,) = map(words, d.host_errors)
    assert err.startswith("vms/c.yaml:")
    assert "vm/c: spec.template.spec.domain.cpu.dedicatedCpuPlacement: cannot run on host h1" in err
    assert "held by vm/a, vm/b" in err
    assert d.failed == (VMKey("default", "c"),)
    # The next revision, with the domains as the host holds them: a and b stay put.
    live = [
        LiveDomain(name=r.name, uuid=r.uuid, state=PowerState.SHUTOFF, persistent_xml=r.xml)
        for r in d.rendered
    ]
    git_repo.write("vms/0.yaml", VM.format(name="a0", cores=1))
    git_repo.commit()
    again = desired_state(
        source.read_snapshot(git_repo.path),
        "",
        host,
        render.HostCaps.default(),
        held=held_from_live(live),
    )
    assert again.errors == ()
    assert {r.name: cputune.held_cpus(r.xml) for r in again.rendered} == {
        "a0": (6,),
        "a": (2, 3),
        "b": (4, 5),
    }


def test_a_cached_vm_is_placed_again_without_rendering_again(git_repo: GitRepo) -> None:
    git_repo.write("vms/a.yaml", VM.format(name="a", cores=2))
    git_repo.commit()
    host = HostConfig(name="h1", dedicated_cpus=(2, 3, 4, 5))
    snapshot = source.read_snapshot(git_repo.path)
    cache, context = PipelineCache(keep_expanded=False), Context()  # kept as the daemon keeps them
    first = desired_state(snapshot, "", host, render.HostCaps.default(), cache=cache, context=context)
    again = desired_state(snapshot, "", host, render.HostCaps.default(), cache=cache, context=context)
    assert again.rendered[0] is first.rendered[0]  # the same placement: not serialized again
    manual = "<domain><name>m</name><cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/></cputune></domain>"
    held = held_from_live([LiveDomain("m", "", PowerState.SHUTOFF, manual)])
    moved = desired_state(
        snapshot, "", host, render.HostCaps.default(), cache=cache, held=held, context=context
    )
    assert cputune.held_cpus(moved.rendered[0].xml) == (4, 5)
    assert (cache.hits, cache.misses) == (2, 1)  # rendered once, placed three times


def test_removing_the_pins_is_a_restart_class_change() -> None:
    pinned = pin(domain(TWO), (2, 3))
    changes = diff_domains(render.finish(domain(TWO)).xml, pinned.xml)
    assert changes
    assert {c.change_class for c in changes} == {ChangeClass.RESTART}
    assert {c.new for c in changes} == {None}
