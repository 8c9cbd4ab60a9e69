"""Plan + apply through libvirt's test driver (test:///default): no daemon needed.

Covers:
- define the rendered XML, read it back, plan again: empty (the test driver's
  read-back defaults are normalised away) — the level-based loop converges; also
  for a size in bytes that is no whole KiB (libvirt rounds it up);
- a live change (balloon, vCPUs, title) applied through the live calls, then in sync;
- failure isolation: one VM whose definition libvirt rejects fails alone, is not
  defined at all, and the others are applied;
- prune removes the domain and its ephemeral artefact, keeps other files;
- the ownership mark's run bookkeeping is written after a start (Once remembered);
- a hot-unplug runs as its VM's work in flight (pending), not in the loop;
- a running managed domain made transient (``virsh undefine``) is drift: reported,
  and defined again with ``selfHeal``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler import ownership
from reconciler.compare import essence as normalize
from reconciler.host.apply import HostResources, InFlight, apply_plan
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState, RunStrategy, VolumeSpec
from reconciler.model.changes import Action, LiveOpKind
from reconciler.settings.host import HostConfig
from reconciler.wording.reasons import said
from tests.helpers.testdriver import PREFIX, plan_for, rendered, xml

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor("test:///default") as h:
        yield h
        for d in h.list_domains():
            if d.name.startswith(PREFIX):
                if d.active:
                    h.destroy(d.name)
                if d.persistent:  # a transient one is gone once destroyed
                    h.undefine(d.name)


def test_define_read_back_plan_is_empty(hv: Hypervisor) -> None:
    prefix = f"{PREFIX}sync-"
    desired = [rendered(f"{prefix}{i}", xml(f"{prefix}{i}")) for i in range(3)]
    p = plan_for(hv, prefix, desired)
    assert [c.action for c in p.changes] == [Action.CREATE] * 3
    assert all(r.ok for r in apply_plan(p, hv))
    again = plan_for(hv, prefix, desired)
    assert not again.has_changes, [said(c) for c in again.changes]
    assert all(hv.state(d.name) == PowerState.RUNNING for d in desired)


def test_a_size_in_bytes_reads_back_as_libvirt_rounds_it(hv: Hypervisor) -> None:
    """``memory.guest: 1G`` renders 10^9 bytes, which libvirt keeps as 976563 KiB."""
    name = f"{PREFIX}bytes"
    text = xml(name).replace(
        "<memory unit='MiB'>128</memory><currentMemory unit='MiB'>128</currentMemory>",
        "<memory unit='b'>1000000000</memory><currentMemory unit='b'>1000000000</currentMemory>",
    )
    desired = [rendered(name, text)]
    assert all(r.ok for r in apply_plan(plan_for(hv, name, desired), hv))
    again = plan_for(hv, name, desired)
    assert not again.has_changes, [(said(c), c.fields) for c in again.changes]


def test_live_change_then_in_sync(hv: Hypervisor) -> None:
    name = f"{PREFIX}live"
    apply_plan(plan_for(hv, name, [rendered(name, xml(name))]), hv)
    changed = rendered(name, xml(name, current=96, vcpus=2, title="web"))
    p = plan_for(hv, name, [changed])
    (c,) = p.changes
    assert c.action == Action.UPDATE
    assert not c.restart_required
    assert {op.kind for op in c.live_ops} == {
        LiveOpKind.SET_MEMORY,
        LiveOpKind.SET_VCPUS,
        LiveOpKind.SET_METADATA,
    }
    results = apply_plan(p, hv)
    assert all(r.ok for r in results), results
    running = normalize.essence(hv.running_xml(name))
    assert running["vcpu@current"] == "2"
    assert running["title"] == "web"
    assert running["currentMemory"] == str(96 * 1024)
    assert not plan_for(hv, name, [changed]).has_changes


def test_one_failure_does_not_stop_the_others(hv: Hypervisor) -> None:
    prefix = f"{PREFIX}iso-"
    good = [rendered(f"{prefix}a", xml(f"{prefix}a")), rendered(f"{prefix}c", xml(f"{prefix}c"))]
    bad = rendered(f"{prefix}b", xml(f"{prefix}b").replace("bus='virtio'", "bus='bogus'"))
    results = apply_plan(plan_for(hv, prefix, [*good, bad]), hv)
    by = {r.subject: r for r in results}
    assert by[f"vm/{prefix}a"].ok
    assert by[f"vm/{prefix}c"].ok
    assert not by[f"vm/{prefix}b"].ok
    assert "create failed" in by[f"vm/{prefix}b"].message
    assert hv.get_domain(f"{prefix}b") is None  # nothing half-defined
    assert hv.get_domain(f"{prefix}a") is not None
    assert hv.get_domain(f"{prefix}c") is not None


def test_prune_removes_ephemeral_artefacts_only(hv: Hypervisor, tmp_path: Path) -> None:
    prefix = f"{PREFIX}prune-"
    ci = tmp_path / "ci.iso"
    disk = tmp_path / "disk.qcow2"
    ci.write_bytes(b"x")
    disk.write_bytes(b"y")
    vols = (VolumeSpec("cloudinit-iso", str(ci), ephemeral=True), VolumeSpec("file", str(disk)))
    desired = [
        rendered(f"{prefix}{i}", xml(f"{prefix}{i}"), volumes=vols if i == 0 else ()) for i in range(4)
    ]
    apply_plan(plan_for(hv, prefix, desired), hv)
    p = plan_for(hv, prefix, desired[1:], "d" * 40, prune=True)  # a later commit removes one VM
    assert [c.name for c in p.changes if c.action == Action.DELETE] == [f"{prefix}0"]
    resources = HostResources(HostConfig(allowed_dirs=(str(tmp_path),)))
    assert all(r.ok for r in apply_plan(p, hv, resources))
    assert hv.get_domain(f"{prefix}0") is None
    assert not ci.exists()
    assert disk.exists()


def test_once_is_remembered_in_the_mark(hv: Hypervisor) -> None:
    name = f"{PREFIX}once"
    d = rendered(name, xml(name), RunStrategy.ONCE)
    apply_plan(plan_for(hv, name, [d]), hv)
    mark = ownership.read_mark(hv.persistent_xml(name))
    assert mark is not None
    assert mark.started
    assert mark.last_start > 0
    hv.shutdown(name)
    assert hv.state(name) == PowerState.SHUTOFF
    (c,) = plan_for(hv, name, [d]).changes
    assert c.action == Action.UNCHANGED
    assert not c.start


def test_the_apply_log_names_the_changes_in_kubevirt_fields(
    hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    from reconciler.log import setup_logging

    setup_logging("json", "info")
    name = f"{PREFIX}words"
    apply_plan(plan_for(hv, name, [rendered(name, xml(name))]), hv)
    capsys.readouterr()
    apply_plan(plan_for(hv, name, [rendered(name, xml(name, current=96))]), hv)
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if '"updated"' in ln]
    assert '"changes": ["live    memory.guest: 128Mi \u2192 96Mi"]' in line.replace("\\u2192", "\u2192"), line


def test_a_running_domain_made_transient_is_drift_and_defined_again(hv: Hypervisor) -> None:
    """``virsh undefine`` of a running managed domain leaves it transient: its
    definition is gone, so the next stop loses it. The plan says so and, with
    ``selfHeal``, defines it again; reporting only without it."""
    name = f"{PREFIX}transient"
    desired = [rendered(name, xml(name))]
    assert all(r.ok for r in apply_plan(plan_for(hv, name, desired), hv))
    hv.undefine(name)  # the running domain stays, as a transient one
    (live,) = [d for d in hv.list_domains() if d.name == name]
    assert live.active
    assert not live.persistent
    reported = plan_for(hv, name, desired, self_heal=False)
    (c,) = reported.changes
    assert c.drift
    assert c.action == Action.UNCHANGED
    assert "transient" in said(c)
    p = plan_for(hv, name, desired)
    (c,) = p.changes
    assert (c.drift, c.action, c.definition is not None) == (True, Action.UPDATE, True), said(c)
    assert "transient" in said(c)
    assert all(r.ok for r in apply_plan(p, hv))
    (live,) = [d for d in hv.list_domains() if d.name == name]
    assert live.persistent
    assert live.active
    assert not plan_for(hv, name, desired).has_changes


def test_a_hot_unplug_runs_beside_the_loop(hv: Hypervisor) -> None:
    """A hot-unplug waits for the guest to acknowledge it (libvirt: seconds): with the
    daemon's ``InFlight`` it is work in flight of its VM (pending), never the loop's. The
    test driver refuses the unplug: the refusal is recorded when that work ends."""
    name = f"{PREFIX}unplug"
    assert all(r.ok for r in apply_plan(plan_for(hv, name, [rendered(name, xml(name))]), hv))
    disk = "<disk type='file' device='disk'><source file='/guest/disk.img'/><target dev='vda' bus='virtio'/></disk>"
    p = plan_for(hv, name, [rendered(name, xml(name).replace(disk, ""))])
    (c,) = p.changes
    assert [op.kind for op in c.live_ops] == [LiveOpKind.DETACH]
    inflight = InFlight()
    (result,) = apply_plan(p, hv, inflight=inflight)
    assert result.pending
    inflight.wait()
    inflight.close()
    live = hv.get_domain(name)
    assert live is not None
    assert live.mark is not None
    assert live.mark.refused  # the test driver cannot unplug: staged, recorded once
