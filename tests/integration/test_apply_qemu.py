"""Plan + apply against a real libvirtd + QEMU (TCG, diskless or tiny qcow2 guests).

Covers:
- a live memory / vCPU change applied without a restart (setMemoryFlags, setVcpusFlags);
- a disk + NIC hotplug without a restart; the hotplugged devices land in the
  persistent definition at the address they got live; no other device moves;
- PCI addresses unchanged when a device is added ahead of the others in the spec;
- a restart-class change under rollout Stage (RestartRequired, no restart) and
  under rollout Restart (graceful stop, forced after the grace period, then start);
- prune: the maxPrunePercent guard refusing, then pruning (ephemeral artefacts
  removed, disks kept, the prune: false opt-out kept);
- drift: an out-of-band edit reverted with selfHeal, reported only without it;
- an unmanaged domain of the same name left alone (error), then adopted.

Domain names start with ``rtest-apply-``; a module fixture sweeps leftovers before and
after. Only this module's domains are planned (``live()`` filters by prefix), so
other suites' domains on the same host are never touched.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import ownership
from reconciler.compare import essence as normalize
from reconciler.host.apply import HostResources, apply_plan
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import OwnershipMark, PowerState, Rollout, RunStrategy, VolumeSpec
from reconciler.model.changes import Action, ChangeClass, LiveOpKind
from reconciler.settings.host import HostConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.problems import words
from reconciler.wording.reasons import said
from tests.helpers.qemu import URI, converge, domain_id, domain_xml, live, only, plan, rendered, sweep_prefix

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "rtest-apply-"


@pytest.fixture(scope="module")
def hv() -> Iterator[Hypervisor]:
    subprocess.run([str(ROOT / "scripts" / "libvirtd-up")], check=True)
    sweep_prefix(URI, PREFIX)
    with Hypervisor(URI) as h:
        yield h
    sweep_prefix(URI, PREFIX)


@pytest.fixture
def images() -> Iterator[Path]:
    """A directory QEMU (running as its own user) can read, for tiny qcow2 disks."""
    d = Path(tempfile.mkdtemp(prefix="rtest-apply-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    for p in d.iterdir():
        p.unlink()
    d.rmdir()


def qcow2(directory: Path, name: str) -> str:
    path = directory / f"{name}.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), "1M"], check=True)
    path.chmod(0o666)
    return str(path)


# -- live changes ---------------------------------------------------------------------


def test_live_memory_and_vcpu_change_without_restart(hv: Hypervisor) -> None:
    name = f"{PREFIX}live-mem"
    before = rendered(name, domain_xml(name, memory_mib=64, vcpus=1, max_vcpus=2))
    converge(hv, name, [before])
    assert hv.state(name) == PowerState.RUNNING
    first_id = domain_id(hv, name)

    after = rendered(name, domain_xml(name, memory_mib=64, current_mib=48, vcpus=2, max_vcpus=2))
    p = plan(hv, name, [after])
    c = only(p, name)
    assert c.action == Action.UPDATE
    assert {f.path: f.change_class for f in c.fields} == {
        "currentMemory": ChangeClass.LIVE,
        "vcpu@current": ChangeClass.LIVE,
    }
    assert {op.kind for op in c.live_ops} == {LiveOpKind.SET_MEMORY, LiveOpKind.SET_VCPUS}
    assert not c.restart_required
    results = apply_plan(p, hv)
    assert all(r.ok for r in results), results

    assert domain_id(hv, name) == first_id  # not restarted
    running = normalize.essence(hv.running_xml(name))
    assert running["vcpu@current"] == "2"  # both vCPUs online in the running guest
    persistent = normalize.essence(hv.persistent_xml(name))
    assert persistent["currentMemory"] == str(48 * 1024)
    assert persistent["vcpu@current"] == "2"
    again = only(plan(hv, name, [after]), name)
    assert again.action == Action.UNCHANGED
    assert not again.restart_required
    assert not again.drift


def test_disk_and_nic_hotplug_without_restart_keep_addresses(hv: Hypervisor, images: Path) -> None:
    name = f"{PREFIX}hotplug"
    vda = qcow2(images, "vda")
    vdb = qcow2(images, "vdb")
    mac1, mac2 = "52:54:00:5a:01:01", "52:54:00:5a:01:02"
    before = rendered(name, domain_xml(name, disks=[("vda", vda)], macs=[mac1]))
    converge(hv, name, [before])
    first_id = domain_id(hv, name)
    old_addresses = normalize.device_addresses(hv.persistent_xml(name))
    assert {"disk[vda]", f"interface[{mac1}]", "memballoon"} <= set(old_addresses)

    after = rendered(name, domain_xml(name, disks=[("vda", vda), ("vdb", vdb)], macs=[mac1, mac2]))
    p = plan(hv, name, [after])
    c = only(p, name)
    assert c.action == Action.UPDATE
    assert {f.path: f.change_class for f in c.fields} == {
        "devices/disk[vdb]": ChangeClass.LIVE,
        f"devices/interface[{mac2}]": ChangeClass.LIVE,
    }
    assert sorted((op.kind, op.target) for op in c.live_ops) == [
        (LiveOpKind.ATTACH, "disk[vdb]"),
        (LiveOpKind.ATTACH, f"interface[{mac2}]"),
    ]
    results = apply_plan(p, hv)
    assert all(r.ok for r in results), results

    assert domain_id(hv, name) == first_id  # hotplugged, not restarted
    persistent = normalize.device_addresses(hv.persistent_xml(name))
    running = normalize.device_addresses(hv.running_xml(name))
    for key, address in old_addresses.items():
        assert persistent[key] == address, f"{key} moved in the definition"
        assert running[key] == address, f"{key} moved in the running domain"
    for key in ("disk[vdb]", f"interface[{mac2}]"):
        assert running[key] == persistent[key], f"{key} is not at its live address in the definition"
    again = only(plan(hv, name, [after]), name)
    assert again.action == Action.UNCHANGED
    assert not again.live_ops

    # Unplug: asked once; a guest without an OS never releases the disk, so it stays
    # RestartRequired (gone from the definition, leaves at the next cold boot).
    c = only(plan(hv, name, [before]), name)
    assert (LiveOpKind.DETACH, "disk[vdb]") in [(op.kind, op.target) for op in c.live_ops]
    assert all(r.ok for r in apply_plan(plan(hv, name, [before]), hv))
    assert "disk[vdb]" not in normalize.device_addresses(hv.persistent_xml(name))
    mark = ownership.read_mark(hv.persistent_xml(name))
    assert mark is not None
    assert "disk[vdb]" in mark.unplugs
    held = only(plan(hv, name, [before]), name)
    assert not any(op.kind == LiveOpKind.DETACH for op in held.live_ops)
    assert "disk[vdb]" in normalize.device_addresses(hv.running_xml(name))  # still held by the guest
    assert held.restart_required
    assert "devices/disk[vdb]" in {f.path for f in held.fields}
    assert domain_id(hv, name) == first_id


def test_adding_a_device_ahead_of_others_moves_none(hv: Hypervisor, images: Path) -> None:
    name = f"{PREFIX}stable"
    mac1 = "52:54:00:5a:02:01"
    before = rendered(name, domain_xml(name, macs=[mac1]), RunStrategy.HALTED)
    converge(hv, name, [before])
    old = normalize.device_addresses(hv.persistent_xml(name))

    # The new disk comes first in the spec: without carried addresses libvirt would
    # give it the NIC's slot and move the NIC and the balloon.
    disk = qcow2(images, "stable")
    after = rendered(name, domain_xml(name, disks=[("vda", disk)], macs=[mac1]), RunStrategy.HALTED)
    p, _ = converge(hv, name, [after])
    assert only(p, name).action == Action.UPDATE
    new = normalize.device_addresses(hv.persistent_xml(name))
    for key, address in old.items():
        assert new[key] == address, f"{key} moved"
    assert new["disk[vda]"] not in old.values()


# -- restart-class changes ------------------------------------------------------------


def test_restart_class_change_is_staged_under_stage(hv: Hypervisor) -> None:
    name = f"{PREFIX}stage"
    converge(hv, name, [rendered(name, domain_xml(name))])
    first_id = domain_id(hv, name)

    after = rendered(name, domain_xml(name, clock="localtime"), rollout=Rollout.STAGE)
    p = plan(hv, name, [after])
    c = only(p, name)
    assert c.action == Action.UPDATE
    assert c.restart_required
    assert [(f.path, f.change_class) for f in c.fields] == [("clock@offset", ChangeClass.RESTART)]
    assert all(r.ok for r in apply_plan(p, hv))

    assert domain_id(hv, name) == first_id  # not restarted
    assert normalize.essence(hv.persistent_xml(name))["clock@offset"] == "localtime"
    assert normalize.essence(hv.running_xml(name))["clock@offset"] == "utc"
    staged = only(plan(hv, name, [after]), name)
    assert staged.action == Action.UNCHANGED
    assert staged.restart_required
    assert "until the next cold boot" in said(staged)


def test_restart_class_change_restarts_under_restart(hv: Hypervisor) -> None:
    name = f"{PREFIX}restart"
    converge(hv, name, [rendered(name, domain_xml(name))])
    first_id = domain_id(hv, name)

    after = rendered(name, domain_xml(name, clock="localtime"), rollout=Rollout.RESTART)
    p = plan(hv, name, [after])
    c = only(p, name)
    assert c.action == Action.RESTART
    assert not c.restart_required
    t0 = time.monotonic()
    assert all(r.ok for r in apply_plan(p, hv))
    assert time.monotonic() - t0 >= 1.0  # no guest OS answers ACPI: forced after the 1 s grace period

    assert hv.state(name) == PowerState.RUNNING
    assert domain_id(hv, name) != first_id  # a new QEMU process: cold boot
    assert normalize.essence(hv.running_xml(name))["clock@offset"] == "localtime"
    again = only(plan(hv, name, [after]), name)
    assert again.action == Action.UNCHANGED
    assert not again.restart_required


def test_manual_vm_is_never_restarted(hv: Hypervisor) -> None:
    name = f"{PREFIX}manual-rollout"
    converge(hv, name, [rendered(name, domain_xml(name), RunStrategy.MANUAL)])
    hv.start(name)
    first_id = domain_id(hv, name)
    after = rendered(name, domain_xml(name, clock="localtime"), RunStrategy.MANUAL, rollout=Rollout.RESTART)
    p, _ = converge(hv, name, [after])
    c = only(p, name)
    assert c.action == Action.UPDATE
    assert c.restart_required
    assert "never restarted" in said(c)
    assert domain_id(hv, name) == first_id


# -- prune ----------------------------------------------------------------------------


def test_prune_guard_then_prune(hv: Hypervisor, images: Path) -> None:
    prefix = f"{PREFIX}prune-"
    names = [f"{prefix}{i}" for i in range(4)]
    kept_disk = qcow2(images, "kept")
    scratch = images / "scratch.iso"
    scratch.write_bytes(b"cloud-init")
    vols = (VolumeSpec(kind="cloudinit-iso", path=str(scratch), ephemeral=True),)
    desired = [
        rendered(names[0], domain_xml(names[0]), RunStrategy.HALTED),
        rendered(
            names[1], domain_xml(names[1], disks=[("vda", kept_disk)]), RunStrategy.HALTED, volumes=vols
        ),
        rendered(names[2], domain_xml(names[2]), RunStrategy.HALTED),
        rendered(names[3], domain_xml(names[3]), RunStrategy.HALTED, prune=False),
    ]
    converge(hv, prefix, desired)
    assert ownership.read_mark(hv.persistent_xml(names[1])).ephemeral == (str(scratch),)  # type: ignore[union-attr]

    # Three of four leave git: 2 prunable of 4 managed = 50% > 30%: refused.
    keep_only = desired[:1]
    p = plan(hv, prefix, keep_only, PlanPolicy(prune=True), rev="d" * 40)  # a later commit
    assert any("prune refused: 2 of 4 managed domains" in w for w in map(words, p.warnings))
    assert all(c.action != Action.DELETE for c in p.changes)
    apply_plan(p, hv)
    assert {d.name for d in live(hv, prefix)} == set(names)

    p = plan(hv, prefix, keep_only, PlanPolicy(prune=True, max_prune_percent=60), rev="d" * 40)
    resources = HostResources(HostConfig(allowed_dirs=(str(images),)))
    assert all(r.ok for r in apply_plan(p, hv, resources))
    assert {c.name for c in p.changes if c.action == Action.DELETE} == {names[1], names[2]}
    assert only(p, names[3]).action == Action.SKIPPED  # prune: false remembered in the mark
    assert {d.name for d in live(hv, prefix)} == {names[0], names[3]}
    assert Path(kept_disk).exists()  # disks are kept
    assert not scratch.exists()  # the cloud-init artefact is removed


# -- drift ----------------------------------------------------------------------------


def _edit_out_of_band(hv: Hypervisor, name: str, memory_kib: int) -> None:
    dom = ET.fromstring(hv.persistent_xml(name))
    for tag in ("memory", "currentMemory"):
        el = dom.find(tag)
        assert el is not None
        el.text, el.attrib["unit"] = str(memory_kib), "KiB"
    hv.define(ET.tostring(dom, encoding="unicode"), name)  # the mark stays: only the spec drifted


@pytest.mark.parametrize("self_heal", [True, False])
def test_config_drift(hv: Hypervisor, self_heal: bool) -> None:
    name = f"{PREFIX}drift-{'heal' if self_heal else 'report'}"
    d = rendered(name, domain_xml(name), RunStrategy.HALTED)
    converge(hv, name, [d])
    _edit_out_of_band(hv, name, 32 * 1024)

    policy = PlanPolicy(self_heal=self_heal)
    p, _ = converge(hv, name, [d], policy)
    c = only(p, name)
    assert c.drift
    assert "memory" in {f.path for f in c.fields}
    memory = normalize.essence(hv.persistent_xml(name))["memory"]
    if self_heal:
        assert c.action == Action.UPDATE
        assert "reverting" in said(c)
        assert memory == str(64 * 1024)
    else:
        assert c.action == Action.UNCHANGED
        assert "reporting only" in said(c)
        assert memory == str(32 * 1024)


def test_power_drift_reported_without_self_heal(hv: Hypervisor) -> None:
    name = f"{PREFIX}power-drift"
    d = rendered(name, domain_xml(name))
    converge(hv, name, [d])
    hv.destroy(name)  # out of band
    c = only(plan(hv, name, [d], PlanPolicy(self_heal=False)), name)
    assert c.drift
    assert not c.start
    assert "reporting only" in said(c)
    p, _ = converge(hv, name, [d])
    assert only(p, name).action == Action.START
    assert hv.state(name) == PowerState.RUNNING


# -- ownership ------------------------------------------------------------------------


def test_unmanaged_domain_left_alone_until_adopted(hv: Hypervisor) -> None:
    name = f"{PREFIX}unmanaged"
    theirs = domain_xml(name, memory_mib=32)
    hv.define(theirs, name)
    before = hv.persistent_xml(name)
    ours = rendered(name, domain_xml(name), RunStrategy.HALTED)

    p = plan(hv, name, [ours])
    assert only(p, name).action == Action.SKIPPED
    assert any("not managed by the reconciler" in e for e in map(words, p.errors))
    apply_plan(p, hv)
    assert hv.persistent_xml(name) == before  # untouched
    assert ownership.read_mark(before) is None

    p, _ = converge(hv, name, [replace(ours, adopt=True)])
    assert only(p, name).action == Action.ADOPT
    mark = ownership.read_mark(hv.persistent_xml(name))
    assert isinstance(mark, OwnershipMark)
    assert mark.spec_hash == ours.spec_hash
    assert normalize.essence(hv.persistent_xml(name))["memory"] == str(64 * 1024)
