"""A pool's autohealing on real libvirtd + QEMU: the replica's disks made again from their
sources. Domain names ``rtest-heal-*``; a ``dir`` storage pool of the test's own.

Covers: a replica with a DataVolume template (a blank volume of the pool) and a
``DiskOrCreate`` hostDisk, created and started through the plan, then destroyed with
data written to both disks; planned as a failure past its pool's
``startUpFailureThreshold`` (its domain as listed, read as crashed with its restarts in
the mark), it is a reprovision, and applied: the template's volume is deleted and made
again blank (the data gone), the hostDisk keeps its data (never the VM's to remake), the
domain runs again with its restart count at 0, and the result says what was made again.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from reconciler.host.apply import HostResources, apply_change
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import ExpandedVM, Manifest, PowerState
from reconciler.model.changes import Action
from reconciler.model.rollout import Autohealing, PaceGroup
from reconciler.plan.build import build_plan
from reconciler.render import parse_host_caps, render_domain
from reconciler.settings.host import HostConfig, NetworkTarget
from reconciler.settings.policy import PlanPolicy

if TYPE_CHECKING:
    from collections.abc import Iterator

PREFIX = "rtest-heal-"
NAME = f"{PREFIX}web-0"
BASE = Path("/var/lib/reconciler-rtest")
REV = "a" * 40
POLICY = PlanPolicy(host="h1", owner="rtest-heal")
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def workdir(qemu_uri: str) -> Iterator[Path]:
    from tests.helpers.qemu import sweep_prefix

    sweep_prefix(qemu_uri, PREFIX)
    d = BASE / f"heal-{uuid.uuid4().hex[:8]}"
    d.mkdir(parents=True)
    d.chmod(0o755)
    yield d
    sweep_prefix(qemu_uri, PREFIX)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def pool(workdir: Path) -> Iterator[str]:
    import libvirt

    (workdir / "pool").mkdir()
    name = f"{PREFIX}pool-{workdir.name}"
    conn = libvirt.open("qemu:///system")
    p = conn.storagePoolCreateXML(
        f"<pool type='dir'><name>{name}</name><target><path>{workdir / 'pool'}</path></target></pool>", 0
    )
    try:
        yield name
    finally:
        for vol in p.listAllVolumes():
            vol.delete(0)
        p.destroy()
        conn.close()


def replica(workdir: Path, host: HostConfig, hv: Hypervisor) -> Any:
    spec = {
        "domain": {
            "memory": {"guest": "64Mi"},
            "devices": {
                "autoattachGraphicsDevice": False,
                "autoattachPodInterface": False,
                "disks": [
                    {"name": "data", "disk": {"bus": "virtio"}},
                    {"name": "host", "disk": {"bus": "virtio"}},
                ],
            },
        },
        "volumes": [
            {"name": "data", "dataVolume": {"name": "data"}},
            {
                "name": "host",
                "hostDisk": {"path": str(workdir / "host.img"), "type": "DiskOrCreate", "capacity": "16Mi"},
            },
        ],
    }
    templates = [
        {
            "metadata": {"name": "data"},
            "spec": {"source": {"blank": {}}, "storage": {"resources": {"requests": {"storage": "16Mi"}}}},
        }
    ]
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": NAME},
        "spec": {"runStrategy": "Always", "dataVolumeTemplates": templates, "template": {"spec": spec}},
    }
    d = render_domain(
        ExpandedVM(vm=vm, source=Manifest(vm, "pools/web.yaml", 1)),
        host,
        parse_host_caps(*hv.capabilities_xml()),
    )
    return replace(d, pace=PaceGroup("pool/rtest-heal-web", "1", 1, autohealing=Autohealing(threshold=2)))


def qemu_io(path: Path, fmt: str, command: str) -> int:
    return subprocess.run(
        ["qemu-io", "-f", fmt, "-c", command, str(path)], capture_output=True, check=False
    ).returncode


def written(path: Path, fmt: str) -> bool:
    """Whether the disk holds the test's data (0xab at its start)."""
    out = subprocess.run(
        ["qemu-io", "-f", fmt, "-c", "read -P 0xab 0 64k", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    return "Pattern verification failed" not in out.stdout and out.returncode == 0


def test_a_reprovisioned_replica_gets_its_template_disks_made_again(workdir: Path, pool: str) -> None:
    host = HostConfig(
        allowed_dirs=(str(workdir),),
        volume_dir=str(workdir / "volumes"),
        nvram_dir=str(workdir / "nvram"),
        domain_type="qemu",
        pod_network=NetworkTarget("user"),
        graphics="none",
        storage_pool=pool,
    )
    resources = HostResources(host)
    with Hypervisor("qemu:///system") as hv:
        d = replica(workdir, host, hv)
        (create,) = build_plan(REV, [d], [], POLICY, now=time.time()).changes
        assert apply_change(create, hv, resources).ok
        assert hv.state(NAME) == PowerState.RUNNING
        hv.destroy(NAME)  # the guest failed
        volume = workdir / "pool" / "data"
        for path in (volume, workdir / "host.img"):
            assert qemu_io(path, "qcow2" if path == volume else "raw", "write -P 0xab 0 64k") == 0
            assert written(path, "qcow2" if path == volume else "raw")

        live = hv.get_domain(NAME)
        assert live is not None
        assert live.mark is not None
        now = time.time()
        failed = replace(
            live, state_reason="crashed", mark=replace(live.mark, restarts=1, last_start=now - 30)
        )
        (c,) = build_plan(REV, [d], [failed], POLICY, now=now).changes
        assert (c.action, c.reprovision) == (Action.START, True)
        result = apply_change(c, hv, resources)
        assert result.ok, result.message
        assert f"reprovisioned: 1 disk(s) removed and made again ({pool}/data)" in result.message
        assert hv.state(NAME) == PowerState.RUNNING
        after = hv.get_domain(NAME)
        assert after is not None
        assert after.mark is not None
        assert after.mark.restarts == 0
        hv.destroy(NAME)
    assert not written(volume, "qcow2")  # made again from its source: blank
    assert qemu_io(volume, "qcow2", "read -P 0 0 64k") == 0
    assert written(workdir / "host.img", "raw")  # a hostDisk is the host's: kept
