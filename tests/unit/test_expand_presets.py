"""VirtualMachineInstancePresets (kubevirt-semantics §e).

Covers: label selectors (matchLabels, In, NotIn, Exists, DoesNotExist, empty selector)
and invalid selectors; the exclude annotation; presets of other namespaces ignored;
merge of requests (only without a requests map), cpu, firmware, features, watchdog,
ioThreadsPolicy and clock; the VM wins with a warning naming preset, field and both
values; the per-preset annotation only when a section applied; conflicts between
presets reject the VM; presets apply after the instancetype.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

import pytest

from reconciler.catalog import build_catalog
from reconciler.errors import ExpansionError
from reconciler.expand import expand_vm
from reconciler.expand.presets import selector_matches
from reconciler.expand.tree import RuleError
from reconciler.manifests import parse_documents
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from reconciler.model import ExpandedVM


def preset(name: str, selector: str, domain: str, namespace: str = "default") -> str:
    return f"""
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstancePreset
metadata:
  name: {name}
  namespace: {namespace}
spec:
  selector: {selector}
  domain:
{textwrap.indent(textwrap.dedent(domain).strip(), "    ")}
---
"""


def expand_with(presets: str, template: str, extra: str = "", matcher: str = "") -> ExpandedVM:
    text = f"""{presets}{extra}
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: vm1
spec:
  runStrategy: Always
{matcher}  template:
{textwrap.indent(textwrap.dedent(template).strip(), "    ")}
"""
    docs = parse_documents(text.encode(), "vms/presets.yaml")
    vm = next(d for d in docs if d.kind == "VirtualMachine")
    return expand_vm(vm, build_catalog(docs))


def parts(result: ExpandedVM) -> tuple[dict[str, Any], dict[str, Any]]:
    t = result.vm["spec"]["template"]
    return t.get("metadata") or {}, t["spec"]["domain"]


LABELS = {"os": "win10", "size": "large"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ({}, True),
        ({"matchLabels": {"os": "win10"}}, True),
        ({"matchLabels": {"os": "win10", "size": "small"}}, False),
        ({"matchExpressions": [{"key": "os", "operator": "In", "values": ["win10", "win11"]}]}, True),
        ({"matchExpressions": [{"key": "os", "operator": "NotIn", "values": ["win10"]}]}, False),
        ({"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["yes"]}]}, True),
        ({"matchExpressions": [{"key": "size", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "os", "operator": "DoesNotExist"}]}, False),
        ({"matchLabels": {"os": "win10"}, "matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, False),
    ],
)
def test_label_selectors(selector: dict[str, Any], matches: bool) -> None:
    assert selector_matches(selector, LABELS, "p") is matches


@pytest.mark.parametrize(
    "selector",
    [
        {"matchExpressions": [{"key": "os", "operator": "In", "values": []}]},
        {"matchExpressions": [{"key": "os", "operator": "Exists", "values": ["x"]}]},
        {"matchExpressions": [{"key": "os", "operator": "Like", "values": ["x"]}]},
    ],
)
def test_invalid_selectors_are_errors(selector: dict[str, Any]) -> None:
    with pytest.raises(RuleError):
        selector_matches(selector, LABELS, "p")


TEMPLATE = """
metadata:
  labels: {os: win10}
spec:
  domain:
    resources:
      requests: {memory: 1Gi}
"""


def test_every_section_merges_and_is_annotated() -> None:
    p = preset(
        "full",
        "{matchLabels: {os: win10}}",
        """
        resources:
          requests: {memory: 4Gi, cpu: 500m}
        cpu: {cores: 2}
        firmware: {bootloader: {efi: {}}}
        features: {smm: {}}
        devices:
          watchdog: {name: w, i6300esb: {action: poweroff}}
          disks: [{name: ignored}]
        ioThreadsPolicy: auto
        clock: {timezone: UTC, timer: {hpet: {present: false}}}
        memory: {guest: 8Gi}
        machine: {type: pc}
        """,
    )
    result = expand_with(p, "metadata:\n  labels: {os: win10}\nspec:\n  domain: {}\n")
    meta, domain = parts(result)
    assert meta["annotations"] == {"virtualmachinepreset.kubevirt.io/full": "kubevirt.io/v1"}
    assert domain["resources"]["requests"] == {"memory": "4Gi", "cpu": "500m"}
    assert domain["cpu"] == {"cores": 2}
    assert domain["firmware"] == {"bootloader": {"efi": {}}}
    assert domain["features"] == {"smm": {}}
    assert domain["devices"]["watchdog"] == {"name": "w", "i6300esb": {"action": "poweroff"}}
    assert domain["ioThreadsPolicy"] == "auto"
    assert domain["clock"] == {"timezone": "UTC", "timer": {"hpet": {"present": False}}}
    assert domain["memory"] == {"guest": "4Gi"}  # from the merged requests, not the preset's memory
    assert domain["machine"] == {"type": "q35"}
    assert "disks" not in domain["devices"]
    assert result.presets == ("full",)


def test_the_vm_wins_and_a_fully_conflicting_preset_is_not_annotated() -> None:
    p = preset("cpu4", "{}", "cpu: {cores: 4}\nresources:\n  requests: {memory: 2Gi}")
    result = expand_with(p, TEMPLATE.replace("domain:", "domain:\n    cpu: {cores: 2}"))
    meta, domain = parts(result)
    assert domain["cpu"] == {"cores": 2}
    assert domain["resources"]["requests"] == {"memory": "1Gi"}
    assert "annotations" not in meta
    assert result.presets == ()
    warnings = "\n".join(map(words, result.warnings))
    assert (
        'preset cpu4: spec.cpu not applied: the VM\'s {"cores":2} is kept over the preset\'s {"cores":4}'
        in warnings
    )
    assert (
        "preset cpu4: spec.resources.requests[memory] not applied: the VM's 1Gi is kept over the preset's 2Gi"
        in warnings
    )


def test_requests_are_copied_only_without_a_requests_map() -> None:
    p = preset("req", "{}", "resources:\n  requests: {cpu: '1'}\nfeatures: {apic: {}}")
    result = expand_with(p, TEMPLATE)
    meta, domain = parts(result)
    assert domain["resources"]["requests"] == {"memory": "1Gi"}
    assert domain["features"] == {"apic": {}}
    assert meta["annotations"] == {"virtualmachinepreset.kubevirt.io/req": "kubevirt.io/v1"}


def test_equal_values_are_not_conflicts() -> None:
    p = preset("same", "{}", "resources:\n  requests: {memory: 1024Mi}")
    result = expand_with(p, TEMPLATE)
    assert result.presets == ("same",)
    assert not result.warnings


def test_exclude_annotation_skips_presets() -> None:
    p = preset("any", "{}", "features: {smm: {}}")
    template = "metadata:\n  annotations:\n    virtualmachineinstancepresets.admission.kubevirt.io/exclude: 'true'\nspec:\n  domain:\n    memory: {guest: 1Gi}\n"
    meta, domain = parts(expand_with(p, template))
    assert "features" not in domain
    assert list(meta["annotations"]) == ["virtualmachineinstancepresets.admission.kubevirt.io/exclude"]


def test_presets_of_other_namespaces_are_ignored() -> None:
    p = preset("far", "{}", "features: {smm: {}}", namespace="other")
    _, domain = parts(expand_with(p, TEMPLATE))
    assert "features" not in domain


def test_conflicting_presets_reject_the_vm() -> None:
    presets = preset("a", "{}", "clock: {utc: {}}") + preset(
        "b", "{matchLabels: {os: win10}}", "clock: {timezone: UTC}"
    )
    with pytest.raises(ExpansionError) as info:
        expand_with(presets, TEMPLATE)
    assert (
        "VirtualMachinePresets cannot be applied due to conflicts: presets 'b' and 'a' conflict: spec.clock.clockoffset"
        in str(info.value)
    )


def test_presets_apply_after_the_instancetype() -> None:
    it = """
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata: {name: it}
spec:
  cpu: {guest: 2}
  memory: {guest: 1Gi}
---
"""
    p = preset("cpu", "{}", "cpu: {model: host-passthrough}\nfeatures: {smm: {}}")
    result = expand_with(p, "spec:\n  domain: {}\n", extra=it, matcher="  instancetype:\n    name: it\n")
    _, domain = parts(result)
    assert domain["cpu"] == {"sockets": 2, "cores": 1, "threads": 1}
    assert domain["features"] == {"smm": {}}
    assert any("preset cpu: spec.cpu not applied" in w for w in map(words, result.warnings))
    assert result.presets == ("cpu",)


def test_sections_compare_like_go_structs() -> None:
    pref = """
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata: {name: acpi}
spec:
  features: {preferredAcpi: {}, preferredSmm: {}}
---
"""
    p = preset("smm", "{}", "features: {smm: {}}\ncpu: {cores: 2, model: ''}")
    result = expand_with(
        p,
        "spec:\n  domain:\n    memory: {guest: 1Gi}\n    cpu: {cores: 2}\n",
        extra=pref,
        matcher="  preference:\n    name: acpi\n",
    )
    # acpi: {} is Go's zero FeatureState and model "" its zero string: both sections equal
    assert result.presets == ("smm",)
    assert not result.warnings
