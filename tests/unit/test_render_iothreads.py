"""IO threads numbered as KubeVirt numbers them (reconciler/render/disks.py ``_IOThreads``).

Covers: KubeVirt's own table (virt-launcher converter_test.go, "Should use correct
IOThreads policies"): seven virtio disks, the first with a dedicated thread, under
the shared and auto policies with 1-5 requested CPUs, give the same thread count and
the same per-disk thread ids; one disk with a dedicated thread alone gets one thread.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from reconciler.model import ExpandedVM, Manifest
from reconciler.render import HostCaps, render_domain
from reconciler.settings.host import HostConfig

HOST = HostConfig(allowed_dirs=("/var/lib/reconciler",), volume_dir="/var/lib/reconciler/volumes")


def vm(policy: str | None, cpus: int, names: list[str], dedicated: set[str]) -> ExpandedVM:
    domain: dict[str, Any] = {
        "memory": {"guest": "64Mi"},
        "resources": {"requests": {"cpu": str(cpus)}},
        "devices": {
            "disks": [
                {
                    "name": n,
                    "disk": {"bus": "virtio"},
                    **({"dedicatedIOThread": True} if n in dedicated else {}),
                }
                for n in names
            ]
        },
    }
    if policy:
        domain["ioThreadsPolicy"] = policy
    obj = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "io", "namespace": "default"},
        "spec": {
            "runStrategy": "Halted",
            "template": {
                "spec": {
                    "domain": domain,
                    "volumes": [{"name": n, "emptyDisk": {"capacity": "1Gi"}} for n in names],
                }
            },
        },
    }
    return ExpandedVM(vm=obj, source=Manifest(obj, "vms/io.yaml", 1))


def threads(xml: str) -> tuple[int, list[int]]:
    root = ET.fromstring(xml)
    count = root.findtext("iothreads")
    ids = [int(d.find("driver").get("iothread", "0")) for d in root.findall("devices/disk")]  # type: ignore[union-attr]
    return int(count or 0), ids


DISKS = ["dedicated", "shared", "omitted1", "omitted2", "omitted3", "omitted4", "omitted5"]


@pytest.mark.parametrize(
    ("policy", "cpus", "count", "ids"),
    [
        ("shared", 1, 2, [2, 1, 1, 1, 1, 1, 1]),
        ("shared", 2, 2, [2, 1, 1, 1, 1, 1, 1]),
        ("auto", 1, 2, [2, 1, 1, 1, 1, 1, 1]),
        ("auto", 2, 4, [4, 1, 2, 3, 1, 2, 3]),
        ("auto", 3, 6, [6, 1, 2, 3, 4, 5, 1]),
        ("auto", 4, 7, [7, 1, 2, 3, 4, 5, 6]),
        ("auto", 5, 7, [7, 1, 2, 3, 4, 5, 6]),
    ],
)
def test_kubevirts_iothread_table(policy: str, cpus: int, count: int, ids: list[int]) -> None:
    xml = render_domain(vm(policy, cpus, DISKS, {"dedicated"}), HOST, HostCaps.default()).xml
    assert threads(xml) == (count, ids)


def test_one_dedicated_disk_alone_gets_one_thread() -> None:
    xml = render_domain(vm(None, 1, ["root"], {"root"}), HOST, HostCaps.default()).xml
    assert threads(xml) == (1, [1])
