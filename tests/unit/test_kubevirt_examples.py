"""The VirtualMachine examples of kubevirt/kubevirt, as written (pinned in tests/data).

Covers: each example, with the instancetype and preference examples beside it and a
host config mapping its container disks, renders to a domain libvirt's schema accepts,
or is refused for a reason KubeVirt itself refuses it (a VM setting memory its
instancetype provides) or that a libvirt host cannot honour (hook sidecars), named in
the table below with the field at file:line.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler import manifests
from reconciler.catalog import build_catalog
from reconciler.config.host import load_host_config
from reconciler.desired import desired_from_catalog
from reconciler.manifests import limits
from reconciler.render import HostCaps
from reconciler.wording.problems import words

DATA = Path(__file__).resolve().parents[1] / "data" / "kubevirt-examples"
CATALOG = ("clarge.yaml", "csmall.yaml", "cluster-csmall.yaml", "virtio.yaml", "windows.yaml")
EXAMPLES = sorted(p.name for p in DATA.glob("vm-*.yaml"))
INSTANCETYPE_CONFLICT = "spec.template.spec.domain.memory.guest conflicts with selected instance type"
REFUSED = {
    "vm-cirros-clarge-virtio.yaml": INSTANCETYPE_CONFLICT,
    "vm-cirros-clarge-windows.yaml": INSTANCETYPE_CONFLICT,
    "vm-cirros-clarge.yaml": INSTANCETYPE_CONFLICT,
    "vm-cirros-cluster-csmall.yaml": INSTANCETYPE_CONFLICT,
    "vm-cirros-csmall.yaml": INSTANCETYPE_CONFLICT,
    "vm-windows-clarge-windows.yaml": INSTANCETYPE_CONFLICT,
    "vm-cirros-with-sidecar-hook-configmap.yaml": "hook sidecars are containers beside KubeVirt's virt-launcher",
}


def test_the_examples_are_the_pinned_ones() -> None:
    assert len(EXAMPLES) == 13
    assert set(REFUSED) <= set(EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES)
def test_each_example_renders_or_is_refused_as_kubevirt_refuses_it(example: str, tmp_path: Path) -> None:
    files = {name: limits.read_regular_file(str(DATA / name)) for name in (*CATALOG, example)}
    docs = [m for name, data in files.items() for m in manifests.parse_documents(data, name)]
    cat = build_catalog(docs, files.__getitem__)
    host = load_host_config((DATA / "host.yaml").read_bytes(), "host.yaml")
    desired = desired_from_catalog(cat, "", files.__getitem__, host, HostCaps.default())
    if example in REFUSED:
        (error,) = set(map(words, desired.all_errors))
        assert error.startswith(f"{example}:")
        assert REFUSED[example] in error
        return
    assert desired.all_errors == ()
    assert desired.rendered
    tool = shutil.which("virt-xml-validate")
    assert tool, "virt-xml-validate (libvirt-clients) is required by the render tests"
    for d in desired.rendered:
        path = tmp_path / f"{d.name}.xml"
        path.write_text(d.xml)
        proc = subprocess.run([tool, str(path), "domain"], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
