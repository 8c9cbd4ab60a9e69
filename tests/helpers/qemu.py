"""Helpers of the suites on real libvirtd + QEMU (``qemu:///system``).

Input: domain names, prefixes, a hypervisor. Output: domain XML and rendered domains
built by hand, plans of the domains with a prefix, converged domains, a guest powered
off or its QEMU killed, a host target and a snapshot of a work tree. Changes only the
domains it is given (their names start with ``rtest-``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from reconciler.compare.cache import CompareCache
from reconciler.host.apply import apply_plan
from reconciler.model import (
    LiveDomain,
    PowerState,
    RenderedDomain,
    Rollout,
    RunStrategy,
    SourceSnapshot,
    VMKey,
    VolumeSpec,
)
from reconciler.plan.build import build_plan
from reconciler.settings.host import HostConfig, NetworkTarget
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.source import DirView
from tests.helpers.sweep import remove_prefixed

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from reconciler.daemon.service import Daemon
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.model.changes import Plan
    from reconciler.model.results import ApplyResult


URI = "qemu:///system"
T = TypeVar("T")


def sweep_prefix(uri: str, prefix: str) -> None:
    remove_prefixed(uri, prefix)


def domain_xml(
    name: str,
    *,
    memory_mib: int = 64,
    current_mib: int | None = None,
    vcpus: int = 1,
    max_vcpus: int = 2,
    disks: Sequence[tuple[str, str]] = (),
    macs: Sequence[str] = (),
    clock: str = "utc",
    description: str = "",
) -> str:
    uuid = "5a1d" + hashlib.sha256(name.encode()).hexdigest()[:28]
    uuid = f"{uuid[:8]}-{uuid[8:12]}-4{uuid[13:16]}-8{uuid[17:20]}-{uuid[20:32]}"
    cur = current_mib if current_mib is not None else memory_mib
    disk_xml = "".join(
        f"<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='{path}'/>"
        f"<target dev='{dev}' bus='virtio'/></disk>"
        for dev, path in disks
    )
    nic_xml = "".join(
        f"<interface type='user'><mac address='{m}'/><model type='virtio'/></interface>" for m in macs
    )
    desc = f"<description>{description}</description>" if description else ""
    vcpu = (
        f"<vcpu current='{vcpus}'>{max_vcpus}</vcpu>" if vcpus != max_vcpus else f"<vcpu>{max_vcpus}</vcpu>"
    )
    return (
        f"<domain type='qemu'><name>{name}</name><uuid>{uuid}</uuid>{desc}"
        f"<memory unit='MiB'>{memory_mib}</memory><currentMemory unit='MiB'>{cur}</currentMemory>{vcpu}"
        "<os><type arch='x86_64' machine='pc'>hvm</type></os><features><acpi/><apic/></features>"
        f"<clock offset='{clock}'/>"
        f"<devices>{disk_xml}{nic_xml}<memballoon model='virtio'/></devices></domain>"
    )


def rendered(
    name: str,
    xml: str,
    strategy: RunStrategy = RunStrategy.ALWAYS,
    *,
    rollout: Rollout | None = None,
    adopt: bool = False,
    prune: bool = True,
    volumes: tuple[VolumeSpec, ...] = (),
) -> RenderedDomain:
    return RenderedDomain(
        key=VMKey.from_domain(name),
        uuid="",
        xml_data=xml,
        spec_hash=hashlib.sha256(xml.encode()).hexdigest(),
        run_strategy=strategy,
        source_path=f"vms/{name}.yaml",
        rollout=rollout,
        adopt=adopt,
        prune=prune,
        grace_period_s=1,
        volumes=volumes,
    )


def live(hv: Hypervisor, prefix: str) -> list[LiveDomain]:
    return [d for d in hv.list_domains() if d.name.startswith(prefix)]


def plan(
    hv: Hypervisor,
    prefix: str,
    desired: Sequence[RenderedDomain],
    policy: PlanPolicy | None = None,
    now: float | None = None,
    rev: str = "c" * 40,
) -> Plan:
    return build_plan(rev, desired, live(hv, prefix), policy or PlanPolicy(), now=now, cache=CompareCache())


def converge(
    hv: Hypervisor, prefix: str, desired: Sequence[RenderedDomain], policy: PlanPolicy | None = None
) -> tuple[Plan, tuple[ApplyResult, ...]]:
    p = plan(hv, prefix, desired, policy)
    results = apply_plan(p, hv)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    return p, results


def domain_id(hv: Hypervisor, name: str) -> str:
    """The running domain's id: it changes with every (re)start of QEMU."""
    return ET.fromstring(hv.running_xml(name)).get("id", "")


def only(p: Plan, name: str):  # type: ignore[no-untyped-def]
    (c,) = [c for c in p.changes if c.name == name]
    return c


def qemu_pid(name: str) -> int:
    return int(Path(f"/var/run/libvirt/qemu/{name}.pid").read_text().strip())


def guest_power_off(hv: Hypervisor, name: str) -> None:
    """What a guest powering itself off looks like to libvirt (reason "shutdown")."""
    subprocess.run(
        ["virsh", "-c", URI, "qemu-monitor-command", name, "--hmp", "quit"], capture_output=True, check=False
    )
    wait_state(hv, name, PowerState.SHUTOFF)


def kill_qemu(hv: Hypervisor, name: str) -> None:
    os.kill(qemu_pid(name), 9)
    wait_state(hv, name, PowerState.SHUTOFF)


def wait_state(hv: Hypervisor, name: str, state: PowerState, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while hv.state(name) != state:
        assert time.monotonic() < deadline, f"{name} did not reach {state}"
        time.sleep(0.1)


def host(workdir: Path, **kw: object) -> HostTarget:
    config = HostConfig(
        name="h1",
        allowed_dirs=(str(workdir),),
        volume_dir=str(workdir / "volumes"),
        domain_type="qemu",
        graphics="none",
        networks={"lab": NetworkTarget("network", "rtest-no-such-network")},
        **kw,  # type: ignore[arg-type]
    )
    return HostTarget(uri=URI, config=config, policy=PlanPolicy(host="h1"))


def snapshot(repo: Path, commit: str) -> SourceSnapshot:
    return SourceSnapshot(repo=str(repo), ref="HEAD", commit=commit * 40, files=DirView(str(repo)))


def cycle_until(
    daemon: Daemon, done: Callable[[], bool], observe: Callable[[], T], seen: list[T], guard_s: float
) -> None:
    """Reconcile the in-process ``daemon`` (as its replan timer would) until ``done``,
    appending ``observe()`` to ``seen`` after each; fails after ``guard_s`` (a hang
    guard, not a speed check) showing the last observations."""
    end = time.monotonic() + guard_s
    while not done():
        assert time.monotonic() < end, f"no progress: {seen[-3:]}"
        daemon.cycle(fetch=False, force=True)
        seen.append(observe())
        time.sleep(0.5)
