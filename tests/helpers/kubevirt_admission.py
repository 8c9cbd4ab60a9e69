"""KubeVirt admission cases run through our pipeline (shared by tests and bench/admission).

Input: tests/data/kubevirt-admission/cases.yaml (cases taken from KubeVirt's admitter
tests). Output: per case, our verdict (``accept``, ``warn`` or ``refuse``) from the
catalog, expansion and rendering of the case's documents on a fixed demo host, and
whether it agrees with KubeVirt's answer and with what reconciler.catalog.admission's
table says we do. Pure: no libvirt, no files but the case data.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from reconciler import manifests
from reconciler.catalog import admission, build_catalog
from reconciler.catalog.rules import Ours
from reconciler.errors import ReconcilerError
from reconciler.expand import expand_all
from reconciler.render import HostCaps, render_domain
from reconciler.settings.host import HostConfig, ImageSource, NetworkTarget
from reconciler.wording.problems import words

CASES_FILE = Path(__file__).resolve().parents[1] / "data" / "kubevirt-admission" / "cases.yaml"

BASE: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachine",
    "metadata": {"name": "adm", "labels": {"app": "adm"}},
    "spec": {
        "runStrategy": "Halted",
        "template": {
            "metadata": {"labels": {"app": "adm"}},
            "spec": {
                "domain": {
                    "memory": {"guest": "128Mi"},
                    "devices": {
                        "disks": [{"name": "root", "disk": {"bus": "virtio"}}],
                        "interfaces": [{"name": "default", "masquerade": {}}],
                    },
                },
                "networks": [{"name": "default", "pod": {}}],
                "volumes": [{"name": "root", "containerDisk": {"image": "quay.io/containerdisks/fedora:40"}}],
            },
        },
    },
}

HOST = HostConfig(
    allowed_dirs=("/var/lib/reconciler",),
    images={
        "quay.io/containerdisks/fedora:40": ImageSource("/var/lib/reconciler/images/fedora.qcow2"),
        "quay.io/kernel:1": ImageSource("/var/lib/reconciler/images/kernel"),
    },
    networks={
        "lan": NetworkTarget("bridge", "br0"),
        "uplink": NetworkTarget("direct", "eth0"),
        "fast": NetworkTarget("network", "sriov-pool"),
    },
    domain_type="qemu",
    storage_pool_format="raw",  # a block pool: lun disks need one
    dedicated_cpus=(2, 3, 4, 5),
)


@dataclass(frozen=True)
class Case:
    test: str
    rule: str
    kubevirt: str  # "accept" | "refuse"
    raw: dict[str, Any]


@dataclass(frozen=True)
class Outcome:
    case: Case
    ours: str  # "accept" | "warn" | "refuse"
    messages: tuple[str, ...]

    @property
    def agrees(self) -> bool:
        """Our accept/refuse equals KubeVirt's (a warning is an acceptance)."""
        return (self.ours == "refuse") == (self.case.kubevirt == "refuse")

    @property
    def as_tabled(self) -> bool:
        """What we do is what the admission table says we do for the case's rule."""
        rule = admission.RULE_BY_ID[self.case.rule]
        if rule.ours == Ours.NA:
            return True  # whatever a libvirt host makes of it
        if rule.ours == Ours.UNSUPPORTED:
            return self.ours == "refuse"
        if self.case.kubevirt == "accept" or rule.ours == Ours.SAME:
            return self.agrees
        return self.ours == "warn"


def load_cases() -> list[Case]:
    raw = YAML(typ="safe").load(CASES_FILE.read_text())
    return [Case(str(c["test"]), str(c["rule"]), str(c["kubevirt"]), c) for c in raw]


_INDEX = re.compile(r"^(.*)\[(\d+)\]$")


def _walk(node: Any, path: str, create: bool) -> tuple[Any, Any]:
    """(parent, key) of ``path`` (dotted, ``name[i]`` for list items) below ``node``."""
    parts = path.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        m = _INDEX.match(part)
        keys: list[Any] = [m.group(1), int(m.group(2))] if m else [part]
        for j, key in enumerate(keys):
            if last and j == len(keys) - 1:
                return node, key
            nxt: Any = [] if j + 1 < len(keys) else {}
            if isinstance(node, list):
                while create and len(node) <= key:
                    node.append(nxt)
                node = node[key]
            else:
                if create and node.get(key) is None:
                    node[key] = nxt
                node = node[key]
    raise AssertionError(path)


def _root(obj: dict[str, Any], path: str) -> tuple[Any, str]:
    if path.startswith("/"):
        return obj, path[1:]
    return obj["spec"]["template"]["spec"], path


def documents(case: Case) -> list[dict[str, Any]]:
    vm = copy.deepcopy(BASE)
    for path, value in (case.raw.get("set") or {}).items():
        node, rel = _root(vm, path)
        parent, key = _walk(node, rel, create=True)
        if isinstance(parent, list):
            while len(parent) <= key:
                parent.append(None)
        parent[key] = copy.deepcopy(value)
    for path in case.raw.get("unset") or ():
        node, rel = _root(vm, path)
        parent, key = _walk(node, rel, create=False)
        del parent[key]
    docs: list[dict[str, Any]] = []
    group = "instancetype.kubevirt.io/v1beta1"
    if case.raw.get("instancetype") is not None:
        docs.append(
            {
                "apiVersion": group,
                "kind": "VirtualMachineInstancetype",
                "metadata": {"name": "it"},
                "spec": case.raw["instancetype"],
            }
        )
        vm["spec"]["instancetype"] = {"name": "it", "kind": "VirtualMachineInstancetype"}
    if case.raw.get("preference") is not None:
        docs.append(
            {
                "apiVersion": group,
                "kind": "VirtualMachinePreference",
                "metadata": {"name": "pref"},
                "spec": case.raw["preference"],
            }
        )
        vm["spec"]["preference"] = {"name": "pref", "kind": "VirtualMachinePreference"}
    if "pool" in case.raw:
        spec: dict[str, Any] = {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "adm"}},
            "virtualMachineTemplate": {"metadata": {"labels": {"app": "adm"}}, "spec": vm["spec"]},
        }
        for key, value in (case.raw["pool"] or {}).items():
            if value is None:
                spec.pop(key, None)
            else:
                spec[key] = value
        docs.append(
            {
                "apiVersion": "pool.kubevirt.io/v1beta1",
                "kind": "VirtualMachinePool",
                "metadata": {"name": "adm"},
                "spec": spec,
            }
        )
    else:
        docs.append(vm)
    return docs


def run(case: Case) -> Outcome:
    """Our verdict on the case: its documents through catalog, expansion and rendering."""
    text = manifests.dump_documents(documents(case))
    try:
        parsed = manifests.parse_documents(text.encode(), "vms/adm.yaml")
        catalog = build_catalog(parsed)
        expanded, errors = expand_all(catalog)
        if errors:
            return Outcome(case, "refuse", tuple(str(e) for e in errors))
        warnings = list(catalog.warnings)
        for vm in expanded:
            warnings += vm.warnings
            warnings += render_domain(vm, HOST, HostCaps.default()).warnings
    except ReconcilerError as err:
        return Outcome(case, "refuse", (str(err),))
    return Outcome(case, "warn" if warnings else "accept", tuple(map(words, warnings)))


def run_all() -> list[Outcome]:
    return [run(c) for c in load_cases()]
