"""The shared expansion vectors as a yardstick for the render stage.

Covers, for every vector under tests/data/vectors (a copy of the project's shared
expansion vectors) with an ``expected.yaml``
(KubeVirt's own expansion of the VM): the expanded VM renders, the XML is valid
per libvirt's schema, and it agrees with ``informational-kubevirt-domain.xml``
(what KubeVirt's converter produced) on everything that is not pod- or
hotplug-specific: firmware UUID, guest memory, cores/threads, machine type, EFI
secure boot, disk devices/targets/buses/boot order, interface models, features,
Hyper-V settings and clock timers. The host config maps each containerDisk image
to a file and uses a raw (block) pool
for a VM with a lun, as a real host config would.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.model import ExpandedVM, Manifest
from reconciler.render import HostCaps, render_domain
from reconciler.settings.host import HostConfig, ImageSource
from tests.helpers.domains import validate_xml

VECTORS = Path(__file__).resolve().parents[1] / "data" / "vectors"
CASES = sorted(p for p in VECTORS.glob("*") if (p / "expected.yaml").is_file())


def expanded(case: Path) -> ExpandedVM:
    yaml = YAML(typ="safe")
    docs = list(yaml.load_all((case / "input.yaml").read_text()))
    vm = next(d for d in docs if d and d.get("kind") == "VirtualMachine")
    exp = yaml.load((case / "expected.yaml").read_text())
    obj = {
        "apiVersion": vm["apiVersion"],
        "kind": "VirtualMachine",
        "metadata": vm["metadata"],
        "spec": {
            **{k: v for k, v in vm["spec"].items() if k in ("running", "runStrategy")},
            "template": {"metadata": exp.get("metadata") or {}, "spec": exp["spec"]},
        },
    }
    return ExpandedVM(vm=obj, source=Manifest(obj, "input.yaml", 1))


def host_for(vm: ExpandedVM) -> HostConfig:
    images = {}
    for vol in vm.vm["spec"]["template"]["spec"].get("volumes") or []:
        if "containerDisk" in vol:
            image = vol["containerDisk"]["image"]
            images[image] = ImageSource(f"/var/lib/libvirt/images/{re.sub(r'[^a-z0-9.]+', '-', image)}.qcow2")
    disks = vm.vm["spec"]["template"]["spec"]["domain"].get("devices", {}).get("disks") or []
    # A lun needs a block storage pool, whose volumes are raw.
    pool_format = "raw" if any("lun" in d for d in disks) else "qcow2"
    return HostConfig(images=images, storage_pool_format=pool_format)


def test_vectors_are_present() -> None:
    assert len(CASES) >= 10, f"shared vectors not found under {VECTORS}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_vector_renders_valid_xml(case: Path, tmp_path: Path) -> None:
    vm = expanded(case)
    validate_xml(render_domain(vm, host_for(vm), HostCaps.default()).xml, tmp_path)


def _disks(dom: ET.Element) -> list[tuple[Any, ...]]:
    out = []
    for d in dom.iter("disk"):
        t = d.find("target")
        boot = d.find("boot")
        assert t is not None
        out.append(
            (d.get("device"), t.get("dev"), t.get("bus"), boot.get("order") if boot is not None else None)
        )
    return out


def _timers(dom: ET.Element) -> list[tuple[Any, ...]]:
    return sorted((t.get("name"), t.get("present"), t.get("tickpolicy")) for t in dom.iter("timer"))


def _features(dom: ET.Element) -> set[str]:
    f = dom.find("features")
    return {c.tag for c in f} - {"vmport"} if f is not None else set()


def _hyperv(dom: ET.Element) -> dict[str, dict[str, str]]:
    h = dom.find("features/hyperv")
    return {c.tag: dict(c.attrib.items()) for c in h} if h is not None else {}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_vector_agrees_with_kubevirt_converter(case: Path) -> None:
    vm = expanded(case)
    ours = ET.fromstring(render_domain(vm, host_for(vm), HostCaps.default()).xml)
    text = (case / "informational-kubevirt-domain.xml").read_text()
    theirs = ET.fromstring(re.sub(r"<!--.*?-->", "", text, flags=re.S))

    sysinfo_uuid = theirs.find("sysinfo/system/entry[@name='uuid']")
    assert sysinfo_uuid is not None
    assert ours.findtext("uuid") == sysinfo_uuid.text
    # KubeVirt hot-plugs memory up to <maxMemory>; here the balloon does it: our <memory>
    # is that maximum and <currentMemory> the guest amount KubeVirt boots with.
    # (KubeVirt's own defaults also add a hot-plug maximum the VM did not ask for.)
    assert ours.findtext("currentMemory") == theirs.findtext("memory")
    asked_max = vm.vm["spec"]["template"]["spec"]["domain"].get("memory", {}).get("maxGuest")
    assert ours.findtext("memory") == theirs.findtext("maxMemory" if asked_max else "memory")
    ot, tt = ours.find("cpu/topology"), theirs.find("cpu/topology")
    assert ot is not None
    assert tt is not None
    assert (ot.get("cores"), ot.get("threads")) == (tt.get("cores"), tt.get("threads"))
    assert ours.find("os/type").get("machine") == theirs.find("os/type").get("machine")  # type: ignore[union-attr]
    ol, tl = ours.find("os/loader"), theirs.find("os/loader")
    assert (ol is None) == (tl is None)
    if ol is not None and tl is not None:
        assert ol.get("secure") == tl.get("secure")
    assert _disks(ours) == _disks(theirs)
    assert [m.get("type") for m in ours.iterfind("devices/interface/model")] == [
        m.get("type").replace("virtio-non-transitional", "virtio")  # type: ignore[union-attr]
        for m in theirs.iterfind("devices/interface/model")
    ]
    assert _features(ours) == _features(theirs)
    assert _hyperv(ours) == _hyperv(theirs)
    assert _timers(ours) == _timers(theirs)
    assert [(i.get("type"), i.get("bus")) for i in ours.iterfind("devices/input")] == [
        (i.get("type"), i.get("bus")) for i in theirs.iterfind("devices/input")
    ]
