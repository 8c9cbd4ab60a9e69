"""A KubeVirt VM from YAML through the real pipeline onto real QEMU (render_domain + provision).

Covers: build -> expand -> render with this host's capabilities -> plan -> apply
(volumes provisioned) creates and starts the domain; planning again against libvirt's
read-back (q35, host-model CPU, emulator, serial / console, guest-agent channel,
user networking) is empty; then a commit lowering memory, onlining a second socket
and adding an emptyDisk is applied live: same QEMU process, no device moved, the new
disk at the same address live and in the definition, and the plan is empty again.
"""

from __future__ import annotations

import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import render
from reconciler.compare import essence as normalize
from reconciler.compare.cache import CompareCache
from reconciler.desired import Desired, desired_state
from reconciler.desired.pins import pins_from_live
from reconciler.host.apply import HostResources, apply_plan
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState, SourceSnapshot
from reconciler.model.changes import Action, ChangeClass, LiveOpKind
from reconciler.plan.build import build_plan
from reconciler.settings.host import HostConfig, NetworkTarget
from reconciler.settings.policy import PlanPolicy
from reconciler.source import DirView
from reconciler.wording.reasons import said
from tests.helpers.qemu import URI, sweep_prefix

if TYPE_CHECKING:
    from collections.abc import Iterator

NAME = "rtest-apply-rendered"

VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 1
      domain:
        cpu: {{sockets: {sockets}, maxSockets: 2}}
        memory: {{guest: {memory}}}
        devices:
          disks:
{disks}
          interfaces:
            - name: default
              masquerade: {{}}
      networks:
        - name: default
          pod: {{}}
      volumes:
{volumes}
"""


def vm_yaml(memory: str, sockets: int, disks: list[str]) -> str:
    return VM.format(
        name=NAME,
        memory=memory,
        sockets=sockets,
        disks="\n".join(f"            - name: {d}\n              disk: {{bus: virtio}}" for d in disks),
        volumes="\n".join(f"        - name: {d}\n          emptyDisk: {{capacity: 16Mi}}" for d in disks),
    )


@pytest.fixture
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="rtest-apply-", dir="/tmp"))
    d.chmod(0o755)
    sweep_prefix(URI, NAME)
    yield d
    sweep_prefix(URI, NAME)
    shutil.rmtree(d, ignore_errors=True)


def test_rendered_vm_converges_and_changes_live(workdir: Path) -> None:
    repo = workdir / "repo"
    (repo / "vms").mkdir(parents=True)
    host = HostConfig(
        name="h",
        allowed_dirs=(str(workdir),),
        volume_dir=str(workdir / "volumes"),
        pod_network=NetworkTarget("user"),
        domain_type="qemu",
        graphics="none",
    )
    with Hypervisor(URI) as hv:
        caps = render.parse_host_caps(*hv.capabilities_xml())
        cache = CompareCache()

        def mine() -> list:  # type: ignore[type-arg]
            return [d for d in hv.list_domains() if d.name == NAME]

        def desired(commit: str) -> Desired:
            snap = SourceSnapshot(repo=str(repo), ref="HEAD", commit=commit * 40, files=DirView(str(repo)))
            got = desired_state(snap, "", host, caps, pins_from_live(mine()))
            assert got.errors == ()
            return got

        provisioner = HostResources(host)

        def plan(d: Desired):  # type: ignore[no-untyped-def]
            return build_plan(d.revision, d.rendered, mine(), PlanPolicy(), cache=cache)

        (repo / "vms" / "vm.yaml").write_text(vm_yaml("128Mi", 1, ["scratch"]))
        first = desired("a")
        p = plan(first)
        assert [c.action for c in p.changes] == [Action.CREATE]
        results = apply_plan(p, hv, provisioner)
        assert all(r.ok for r in results), results
        assert hv.state(NAME) == PowerState.RUNNING
        settled = plan(first)
        assert not settled.has_changes, [(said(c), c.fields) for c in settled.changes]
        assert not settled.changes[0].restart_required
        domain_id = ET.fromstring(hv.running_xml(NAME)).get("id")
        old = normalize.device_addresses(hv.persistent_xml(NAME))

        (repo / "vms" / "vm.yaml").write_text(vm_yaml("96Mi", 2, ["scratch", "data"]))
        second = desired("b")
        p = plan(second)
        (c,) = p.changes
        assert c.action == Action.UPDATE, said(c)
        assert not c.restart_required, said(c)
        assert {f.change_class for f in c.fields} == {ChangeClass.LIVE}
        assert {op.kind for op in c.live_ops} == {
            LiveOpKind.SET_MEMORY,
            LiveOpKind.SET_VCPUS,
            LiveOpKind.ATTACH,
        }
        results = apply_plan(p, hv, provisioner)
        assert all(r.ok for r in results), results

        assert ET.fromstring(hv.running_xml(NAME)).get("id") == domain_id  # no restart
        assert normalize.essence(hv.running_xml(NAME))["vcpu@current"] == "2"
        new = normalize.device_addresses(hv.persistent_xml(NAME))
        running = normalize.device_addresses(hv.running_xml(NAME))
        for key, address in old.items():
            assert new[key] == address, key
            assert running[key] == address, key
        assert new["disk[vdb]"] == running["disk[vdb]"]
        after = plan(second)
        assert not after.has_changes, said(after.changes[0])
        assert not after.changes[0].restart_required, said(after.changes[0])
