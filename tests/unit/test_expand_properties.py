"""Properties of expansion over generated VMs, instancetypes, preferences and presets.

Covers: expansion never mutates its input (VM and catalog objects); expanding an
expanded VM changes nothing (idempotence); the expanded VM always carries the defaults
every later stage relies on (architecture, machine type, memory object, a disk for
each volume) and never the matchers.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.catalog import build_catalog
from reconciler.errors import ManifestError
from reconciler.expand import expand_vm
from reconciler.model import Manifest

BUSES = st.sampled_from(["virtio", "sata", "scsi", ""])


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


def prune(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


instancetypes = st.builds(
    lambda guest, mem, model, pct, ann, max_sockets: {
        "cpu": prune({"guest": guest, "model": model, "maxSockets": max_sockets}),
        "memory": prune({"guest": mem, "overcommitPercent": pct}),
        **({"annotations": ann} if ann else {}),
    },
    st.integers(1, 8),
    st.sampled_from(["512Mi", "1Gi", "3Gi", "1G"]),
    maybe(st.sampled_from(["host-passthrough", "Haswell"])),
    maybe(st.integers(0, 100)),
    st.dictionaries(st.sampled_from(["a/x", "b/y"]), st.sampled_from(["1", "2"]), max_size=2),
    maybe(st.integers(8, 16)),
)

preferences = st.builds(
    lambda topology, spread, devices, features, firmware, clock, machine, ann: prune(
        {
            "cpu": prune({"preferredCPUTopology": topology, "spreadOptions": spread}) or None,
            "devices": devices or None,
            "features": features or None,
            "firmware": firmware,
            "clock": clock,
            "machine": machine,
            "annotations": ann or None,
        }
    ),
    maybe(st.sampled_from(["sockets", "cores", "threads", "any", "preferSpread", "spread"])),
    maybe(
        st.sampled_from(
            [{"ratio": 1}, {"across": "SocketsCoresThreads", "ratio": 1}, {"across": "CoresThreads"}]
        )
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "preferredDiskBus": st.sampled_from(["virtio", "sata", "scsi"]),
            "preferredCdromBus": st.sampled_from(["sata", "scsi"]),
            "preferredInterfaceModel": st.sampled_from(["virtio", "e1000e"]),
            "preferredInterfaceMasquerade": st.just({}),
            "preferredAutoattachPodInterface": st.booleans(),
            "preferredAutoattachInputDevice": st.booleans(),
            "preferredInputBus": st.sampled_from(["usb", "virtio"]),
            "preferredDiskDedicatedIoThread": st.booleans(),
            "preferredRng": st.just({}),
            "preferredDisableHotplug": st.booleans(),
            "preferredPanicDeviceModel": st.sampled_from(["hyperv", "isa"]),
        },
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "preferredAcpi": st.just({}),
            "preferredSmm": st.just({}),
            "preferredHyperv": st.just({"relaxed": {}, "vapic": {}}),
        },
    ),
    maybe(
        st.sampled_from(
            [
                {"preferredUseBios": True},
                {"preferredEfi": {"secureBoot": False}},
                {"preferredUseEfi": True, "preferredUseSecureBoot": True},
            ]
        )
    ),
    maybe(
        st.sampled_from(
            [{"preferredClockOffset": {"utc": {}}}, {"preferredTimer": {"rtc": {"tickPolicy": "catchup"}}}]
        )
    ),
    maybe(st.just({"preferredMachineType": "pc-q35-9.0"})),
    st.dictionaries(st.sampled_from(["a/x", "c/z"]), st.sampled_from(["1", "3"]), max_size=2),
)

volume_kinds = st.sampled_from(["containerDisk", "persistentVolumeClaim", "emptyDisk"])


def _volume(i: int, kind: str) -> dict[str, Any]:
    name = f"vol{i}"
    if kind == "containerDisk":
        return {"name": name, "containerDisk": {"image": f"quay.io/img{i}" + ("" if i % 2 else ":1")}}
    if kind == "persistentVolumeClaim":
        return {"name": name, "persistentVolumeClaim": {"claimName": name}}
    return {"name": name, "emptyDisk": {"capacity": "1Gi"}}


@st.composite
def templates(draw: st.DrawFn, with_instancetype: bool) -> dict[str, Any]:
    kinds = draw(st.lists(volume_kinds, max_size=3))
    volumes = [_volume(i, k) for i, k in enumerate(kinds)]
    disks = []
    for v in volumes:
        if draw(st.booleans()):
            target = draw(st.sampled_from(["disk", "cdrom", "lun", None]))
            disk: dict[str, Any] = {"name": v["name"]}
            if target:
                bus = draw(BUSES)
                disk[target] = {"bus": bus} if bus else {}
            disks.append(disk)
    devices: dict[str, Any] = {}
    if disks:
        devices["disks"] = disks
    if draw(st.booleans()):
        devices["interfaces"] = [
            {"name": "default", **draw(st.sampled_from([{}, {"bridge": {}}, {"masquerade": {}}]))}
        ]
    autoattach = draw(maybe(st.booleans()))
    if autoattach is not None:
        devices["autoattachInputDevice"] = autoattach
    domain: dict[str, Any] = {"devices": devices}
    if not with_instancetype:
        domain["memory"] = {"guest": draw(st.sampled_from(["256Mi", "1Gi"]))}
        cpu = draw(
            st.fixed_dictionaries({}, optional={"cores": st.integers(1, 4), "sockets": st.integers(1, 2)})
        )
        if cpu:
            domain["cpu"] = cpu
    if draw(st.booleans()):
        domain["features"] = {"acpi": {"enabled": draw(st.booleans())}}
    spec: dict[str, Any] = {"domain": domain, "volumes": volumes}
    if "interfaces" in devices:
        spec["networks"] = [{"name": "default", "pod": {}}]
    labels = draw(
        st.dictionaries(st.sampled_from(["app", "os"]), st.sampled_from(["web", "linux"]), max_size=2)
    )
    annotations = draw(
        st.dictionaries(st.sampled_from(["a/x", "team"]), st.sampled_from(["1", "blue"]), max_size=2)
    )
    meta = prune({"labels": labels or None, "annotations": annotations or None})
    return {"metadata": meta, "spec": spec} if meta else {"spec": spec}


presets = st.lists(
    st.builds(
        lambda selector, domain: {"selector": selector, "domain": domain},
        st.sampled_from(
            [{}, {"matchLabels": {"app": "web"}}, {"matchExpressions": [{"key": "os", "operator": "Exists"}]}]
        ),
        st.fixed_dictionaries(
            {},
            optional={
                "cpu": st.sampled_from([{"cores": 2}, {"model": "host-model"}]),
                "features": st.just({"smm": {}}),
                "clock": st.sampled_from(
                    [{"utc": {}}, {"timezone": "UTC", "timer": {"hpet": {"present": False}}}]
                ),
                "resources": st.just({"requests": {"memory": "1Gi"}}),
            },
        ),
    ),
    max_size=2,
)


@st.composite
def scenarios(draw: st.DrawFn) -> list[Manifest]:
    it = draw(maybe(instancetypes))
    pref = draw(maybe(preferences))
    docs: list[Manifest] = []
    vm_spec: dict[str, Any] = {"runStrategy": "Always", "template": draw(templates(it is not None))}
    if it is not None:
        docs.append(
            Manifest(
                {
                    "apiVersion": "instancetype.kubevirt.io/v1beta1",
                    "kind": "VirtualMachineClusterInstancetype",
                    "metadata": {"name": "it"},
                    "spec": it,
                },
                "it.yaml",
                1,
            )
        )
        vm_spec["instancetype"] = {"name": "it"}
    if pref is not None:
        docs.append(
            Manifest(
                {
                    "apiVersion": "instancetype.kubevirt.io/v1beta1",
                    "kind": "VirtualMachinePreference",
                    "metadata": {"name": "pref"},
                    "spec": pref,
                },
                "pref.yaml",
                1,
            )
        )
        vm_spec["preference"] = {"name": "pref", "kind": "VirtualMachinePreference"}
    for i, p in enumerate(draw(presets)):
        docs.append(
            Manifest(
                {
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "VirtualMachineInstancePreset",
                    "metadata": {"name": f"p{i}"},
                    "spec": p,
                },
                "p.yaml",
                1,
            )
        )
    docs.append(
        Manifest(
            {
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachine",
                "metadata": {"name": "vm"},
                "spec": vm_spec,
            },
            "vm.yaml",
            1,
        )
    )
    return docs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_expansion_is_pure_and_idempotent(docs: list[Manifest]) -> None:
    before = copy.deepcopy([d.obj for d in docs])
    catalog = build_catalog(docs)
    vm = docs[-1]
    try:
        once = expand_vm(vm, catalog)
    except ManifestError:
        assert [d.obj for d in docs] == before
        return
    assert [d.obj for d in docs] == before, "expansion mutated its input"
    spec = once.vm["spec"]
    assert "instancetype" not in spec
    assert "preference" not in spec
    tspec = spec["template"]["spec"]
    assert tspec["architecture"]
    assert tspec["domain"]["machine"]["type"]
    assert isinstance(tspec["domain"]["memory"], dict)
    disk_names = {d["name"] for d in tspec["domain"].get("devices", {}).get("disks", [])}
    assert {v["name"] for v in tspec.get("volumes", [])} <= disk_names
    snapshot = copy.deepcopy(once.vm)
    again_docs = [*docs[:-1], Manifest(once.vm, vm.path, vm.line)]
    twice = expand_vm(again_docs[-1], build_catalog(again_docs))
    assert twice.vm == once.vm
    assert once.vm == snapshot, "re-expansion mutated the expanded VM"
