"""Defaults applied before and after preferences (kubevirt-semantics §d.1–§d.4).

Covers: a disk for every volume without a disk or filesystem; the default pod network
and bridge interface only when the VM has neither networks nor interfaces and did not
turn autoattachPodInterface off; the autoattached input device; architecture and machine
type; cpu requests from limits; guest memory from requests / limits / hugepages;
topology from limits / requests (rounded up) only when none is given; container disk
pull policies; eviction strategy; defaults are idempotent.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reconciler.expand.defaults import (
    add_default_network,
    add_input_device,
    add_volume_disks,
    apply_spec_defaults,
)


def test_disks_for_volumes_without_disk_or_filesystem() -> None:
    spec: dict[str, Any] = {
        "domain": {
            "devices": {"disks": [{"name": "b", "cdrom": {}}], "filesystems": [{"name": "c", "virtiofs": {}}]}
        },
        "volumes": [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}],
    }
    add_volume_disks(spec)
    assert spec["domain"]["devices"]["disks"] == [{"name": "b", "cdrom": {}}, {"name": "a"}, {"name": "d"}]


@pytest.mark.parametrize(
    "spec",
    [
        {"domain": {"devices": {"interfaces": [{"name": "x", "bridge": {}}]}}},
        {"domain": {}, "networks": [{"name": "x", "multus": {"networkName": "n"}}]},
        {"domain": {"devices": {"autoattachPodInterface": False}}},
    ],
)
def test_no_default_network_when_the_vm_says_otherwise(spec: dict[str, Any]) -> None:
    before = copy.deepcopy(spec)
    add_default_network(spec)
    assert spec.get("networks") == before.get("networks")
    assert spec["domain"].get("devices", {}).get("interfaces") == before["domain"].get("devices", {}).get(
        "interfaces"
    )


def test_default_network_and_interface() -> None:
    spec: dict[str, Any] = {"domain": {"devices": {"autoattachPodInterface": True}}}
    add_default_network(spec)
    assert spec["networks"] == [{"name": "default", "pod": {}}]
    assert spec["domain"]["devices"]["interfaces"] == [{"name": "default", "bridge": {}}]


@pytest.mark.parametrize(
    ("devices", "inputs"),
    [
        ({"autoattachInputDevice": True}, [{"name": "default-0"}]),
        (
            {"autoattachInputDevice": True, "inputs": [{"name": "t", "type": "tablet"}]},
            [{"name": "t", "type": "tablet"}],
        ),
        ({"autoattachInputDevice": False}, None),
        ({}, None),
    ],
)
def test_autoattach_input_device(devices: dict[str, Any], inputs: Any) -> None:
    spec: dict[str, Any] = {"domain": {"devices": devices}}
    add_input_device(spec)
    assert spec["domain"]["devices"].get("inputs") == inputs


def test_spec_defaults_in_order() -> None:
    spec: dict[str, Any] = {
        "domain": {"resources": {"limits": {"cpu": "1500m", "memory": "2Gi"}}},
        "volumes": [
            {"name": "latest", "containerDisk": {"image": "quay.io/a/b:latest"}},
            {"name": "untagged", "containerDisk": {"image": "quay.io/a/b"}},
            {"name": "port", "containerDisk": {"image": "registry:5000/a/b"}},
            {"name": "digest", "containerDisk": {"image": "quay.io/a/b@sha256:00"}},
            {"name": "tag", "containerDisk": {"image": "quay.io/a/b:1"}},
            {"name": "set", "containerDisk": {"image": "quay.io/a/b", "imagePullPolicy": "Never"}},
        ],
    }
    apply_spec_defaults(spec)
    assert spec["architecture"] == "amd64"
    assert spec["domain"]["machine"] == {"type": "q35"}
    assert spec["domain"]["resources"]["requests"] == {"cpu": "1500m"}  # memory is never copied
    assert spec["domain"]["memory"] == {"guest": "2Gi"}
    assert spec["domain"]["cpu"] == {"sockets": 2, "cores": 1, "threads": 1}
    policies = [v["containerDisk"]["imagePullPolicy"] for v in spec["volumes"]]
    assert policies == ["Always", "Always", "IfNotPresent", "IfNotPresent", "IfNotPresent", "Never"]
    assert spec["evictionStrategy"] == "None"
    assert [d["name"] for d in spec["domain"]["devices"]["disks"]] == [v["name"] for v in spec["volumes"]]
    assert spec["networks"] == [{"name": "default", "pod": {}}]
    again = copy.deepcopy(spec)
    apply_spec_defaults(again)
    assert again == spec


@pytest.mark.parametrize(
    ("domain", "guest"),
    [
        ({"resources": {"requests": {"memory": "64M"}, "limits": {"memory": "128M"}}}, "64M"),
        ({"resources": {"requests": {"memory": "0"}, "limits": {"memory": "128M"}}}, "128M"),
        ({"memory": {"hugepages": {"pageSize": "1Gi"}}}, "1Gi"),
        ({"memory": {"guest": "3Gi"}, "resources": {"requests": {"memory": "1Gi"}}}, "3Gi"),
        ({}, None),
    ],
)
def test_guest_memory_default(domain: dict[str, Any], guest: Any) -> None:
    spec: dict[str, Any] = {"domain": domain}
    apply_spec_defaults(spec)
    assert spec["domain"]["memory"].get("guest") == guest


@pytest.mark.parametrize(
    ("domain", "cpu"),
    [
        ({"resources": {"requests": {"cpu": "3"}}}, {"sockets": 3, "cores": 1, "threads": 1}),
        ({"resources": {"requests": {"cpu": "100m"}}}, {"sockets": 1, "cores": 1, "threads": 1}),
        (
            {"cpu": {"model": "host-passthrough"}},
            {"model": "host-passthrough", "sockets": 1, "cores": 1, "threads": 1},
        ),
        ({"cpu": {"cores": 2, "threads": 2}}, {"cores": 2, "threads": 2}),  # partial topology stays partial
    ],
)
def test_topology_default(domain: dict[str, Any], cpu: dict[str, Any]) -> None:
    spec: dict[str, Any] = {"domain": domain}
    apply_spec_defaults(spec)
    assert spec["domain"]["cpu"] == cpu


def test_user_values_are_kept() -> None:
    spec: dict[str, Any] = {
        "architecture": "s390x",
        "evictionStrategy": "LiveMigrate",
        "domain": {"machine": {"type": "pc"}},
    }
    apply_spec_defaults(spec)
    assert (spec["architecture"], spec["evictionStrategy"], spec["domain"]["machine"]["type"]) == (
        "s390x",
        "LiveMigrate",
        "pc",
    )
    s390: dict[str, Any] = {"architecture": "s390x", "domain": {}}
    apply_spec_defaults(s390)
    assert s390["domain"]["machine"]["type"] == "s390-ccw-virtio"
