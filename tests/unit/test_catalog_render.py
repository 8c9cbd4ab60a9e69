"""The whole common-instancetypes catalog renders, as KubeVirt would run it.

Covers: every cluster instancetype of the pinned kubevirt/common-instancetypes tree with
a Linux preference, and every x86 cluster preference with a large instancetype, expand
and render on a host config with dedicated CPUs to a domain libvirt's schema accepts
(``virt-xml-validate``), or are refused as KubeVirt itself refuses them (a preference
asking for more than the instancetype gives). The dedicated-CPU instancetypes (cx1,
d1, n1, rt1) are among them.
"""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import expand, overlays
from reconciler.catalog import Catalog, build_catalog
from reconciler.errors import ReconcilerError
from reconciler.manifests import parse_documents
from reconciler.overlays.cache import OverlayCache
from reconciler.render import HostCaps, Placed, cputune, finish, render_draft
from reconciler.settings.host import HostConfig
from reconciler.source.files import DirView

if TYPE_CHECKING:
    from reconciler.model import Manifest

TREE = Path(__file__).resolve().parents[1] / "data" / "common-instancetypes"
HOST = HostConfig(dedicated_cpus=tuple(range(128)))
KUBEVIRT_REFUSES = ("failure checking preference requirements",)
VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: catalog
spec:
  runStrategy: Halted
  instancetype: {{kind: VirtualMachineClusterInstancetype, name: {it}}}
  preference: {{kind: VirtualMachineClusterPreference, name: {pref}}}
  template:
    spec:
      domain:
        devices: {{}}
"""


@cache
def catalog_objects() -> tuple[tuple[Manifest, ...], tuple[Manifest, ...]]:
    view = DirView(TREE)
    return (
        overlays.build(view, "VirtualMachineClusterInstancetypes", cache=OverlayCache()),
        overlays.build(view, "VirtualMachineClusterPreferences", cache=OverlayCache()),
    )


def names(objs: tuple[Manifest, ...]) -> list[str]:
    return sorted(str(m.obj["metadata"]["name"]) for m in objs)


INSTANCETYPES = names(catalog_objects()[0])
X86_PREFERENCES = [
    p for p in names(catalog_objects()[1]) if not p.endswith(("arm64", "s390x", "s390x.secex"))
]
PAIRS = [(it, "fedora") for it in INSTANCETYPES] + [("u1.2xlarge", p) for p in X86_PREFERENCES]


def catalog_with(text: str) -> Catalog:
    its, prefs = catalog_objects()
    vm = parse_documents(text.encode(), "vms/catalog.yaml")
    return build_catalog([*its, *prefs, *vm], lambda _path: text.encode())


def test_the_catalog_is_the_pinned_one() -> None:
    assert len(INSTANCETYPES) == 65
    assert {"cx1.2xlarge", "d1.large", "n1.medium", "rt1.large"} <= set(INSTANCETYPES)
    assert len(X86_PREFERENCES) > 40


@pytest.mark.parametrize(("instancetype", "preference"), PAIRS, ids=[f"{i}+{p}" for i, p in PAIRS])
def test_renders_a_valid_domain_or_is_refused_as_kubevirt_refuses(
    instancetype: str, preference: str, tmp_path: Path
) -> None:
    cat = catalog_with(VM.format(it=instancetype, pref=preference))
    try:
        vm = expand.expand_vm(cat.vms[0], cat, {}, False)
        draft = render_draft(vm, HOST, HostCaps.default())
    except ReconcilerError as err:
        refused = str(err)
    else:
        refused = ""
    if refused:
        assert any(reason in refused for reason in KUBEVIRT_REFUSES), refused
        return
    d = finish(draft)
    if d.cpu_need is not None:
        cpus = cputune.place([(d.name, d.cpu_need)], HOST.dedicated_cpus, {}).cpus[d.name]
        d = finish(draft, Placed(cpus=cpus))
        assert "<vcpupin " in d.xml
    tool = shutil.which("virt-xml-validate")
    assert tool, "virt-xml-validate (libvirt-clients) is required by the render tests"
    path = tmp_path / "domain.xml"
    path.write_text(d.xml)
    proc = subprocess.run([tool, str(path), "domain"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
