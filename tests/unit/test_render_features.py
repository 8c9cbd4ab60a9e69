"""KubeVirt defaults the render stage applies to ``features`` (beyond the golden cases).

Covers: ACPI is on when ``features`` is absent and off only with ``enabled: false``;
Hyper-V dependencies are filled in (synictimer -> synic -> vpindex, evmcs -> vapic
and CPU feature vmx) but never override an explicit setting; SMM disabled is
rendered as ``state="off"``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from reconciler.model import ExpandedVM, Manifest
from reconciler.render import HostCaps, render_domain
from reconciler.settings.host import HostConfig


def features_of(features: dict[str, Any] | None) -> ET.Element:
    domain: dict[str, Any] = {"memory": {"guest": "1Gi"}}
    if features is not None:
        domain["features"] = features
    vm = {"metadata": {"name": "f"}, "spec": {"template": {"spec": {"domain": domain}}}}
    xml = render_domain(
        ExpandedVM(vm=vm, source=Manifest(vm, "vms/f.yaml", 1)), HostConfig(), HostCaps.default()
    ).xml
    return ET.fromstring(xml)


def test_acpi_default_on() -> None:
    assert features_of(None).find("features/acpi") is not None
    assert features_of({}).find("features/acpi") is not None
    assert features_of({"acpi": {"enabled": False}}).find("features/acpi") is None


def test_hyperv_dependencies_are_filled() -> None:
    dom = features_of({"hyperv": {"synictimer": {}, "evmcs": {}}})
    hv = {c.tag: c.get("state") for c in dom.find("features/hyperv")}  # type: ignore[union-attr]
    assert hv == {"vapic": "on", "vpindex": "on", "synic": "on", "stimer": "on", "evmcs": "on"}
    assert [(f.get("name"), f.get("policy")) for f in dom.iterfind("cpu/feature")] == [("vmx", "require")]


def test_explicit_settings_win_over_dependencies() -> None:
    dom = features_of({"hyperv": {"relaxed": {"enabled": False}, "vapic": {}}})
    hv = {c.tag: c.get("state") for c in dom.find("features/hyperv")}  # type: ignore[union-attr]
    assert hv == {"relaxed": "off", "vapic": "on"}


def test_smm_disabled() -> None:
    smm = features_of({"smm": {"enabled": False}}).find("features/smm")
    assert smm is not None
    assert smm.get("state") == "off"
