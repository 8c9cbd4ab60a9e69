"""``reconciler import`` on libvirt's test driver: the round trip is the proof.

Covers: every domain the render golden cases define (renamed ``imp-*``) read back from
libvirt, imported or left out with named reasons; the repository written (one VM per
domain, kustomization, host config) planned against the same host: every imported
domain is ``adopt`` with no changed field, no start, stop or restart; applying that
plan marks the domains without changing their definition or power state, and the next
plan is empty. The run strategy follows state and autostart; the CLI writes a git
repository that ``plan`` reads, prints a progress line per domain and a JSON summary;
a domain name that is no KubeVirt name is left out with the rename to make; the import
never overwrites a directory; the golden case kept in a pass-through (SPICE, ``<pm>``,
metadata, omissions) is left out without ``keep`` and imported back with it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import cli, source
from reconciler.cli.adopt import write_repository
from reconciler.compare.essence import essence
from reconciler.config.host import load_host_config
from reconciler.host.hypervisor import Hypervisor
from reconciler.importer import import_domains
from reconciler.model import PowerState
from reconciler.model.changes import Action
from reconciler.model.results import Reason
from reconciler.reconcile import apply_planned, plan_revision
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.wording.reasons import said
from tests.helpers.domains import drop_domains

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from reconciler.hostfacts import HostFacts
    from reconciler.importer import ImportResult

RENDER = Path(__file__).parents[1] / "data" / "render"
URI = "test:///default"

# Golden cases whose domains import (the others use generated files of the volume
# directory, a second pool, networks the test driver lacks, a vGPU display, or a domain
# type most of the others do not have).
IMPORTED = {
    "imp-web-1",
    "imp-legacy",
    "imp-netboot",
    "imp-legacy-xp",
    "imp-rerun-1",
}


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as h:
        yield h
        drop_domains(h, [d.name for d in h.list_domains() if d.name.startswith("imp-")])


def _define_golden(hv: Hypervisor) -> list[str]:
    """Every render golden case's domain, named ``imp-<name>``; the names defined."""
    names = []
    for case in sorted(RENDER.glob("*/domain.xml")):
        dom = ET.fromstring(case.read_text())
        name_el = dom.find("name")
        assert name_el is not None
        assert name_el.text
        old = name_el.text
        new = "imp-" + old.replace("_", "-")
        name_el.text = new
        nvram = dom.find("os/nvram")
        if nvram is not None and nvram.text:
            nvram.text = nvram.text.replace(f"{old}_VARS", f"{new}_VARS")
        if dom.find("devices/interface/backend[@type='passt']") is not None:
            continue  # the test driver refuses passt
        hv.define(ET.tostring(dom, encoding="unicode"), new)
        names.append(new)
    return names


def _import(hv: Hypervisor, names: list[str], keep: bool = False) -> ImportResult:
    def facts_of(images: Sequence[str], dirs: Sequence[str]) -> HostFacts:
        return hv.host_facts(images, tuple(dirs), devices=True)

    return import_domains(hv.list_domains(), names, hv.autostarted(), facts_of, "host-a", keep=keep)


def _target(out: Path, result: ImportResult) -> HostTarget:
    config = load_host_config((out / result.host_config_path).read_bytes(), result.host_config_path)
    return HostTarget(uri=URI, config=config, policy=PlanPolicy(host="host-a", owner="import-test"))


def test_golden_domains_import_to_a_plan_without_changes(hv: Hypervisor, tmp_path: Path) -> None:
    names = _define_golden(hv)
    hv.start("imp-web-1")
    result = _import(hv, names)
    imported = {o.source for o in result.imported}
    assert imported == IMPORTED, {o.source: o.reasons for o in result.left_out}
    for o in result.left_out:
        assert o.reasons, o.source  # never left out in silence
    out = tmp_path / "repo"
    write_repository(out, result.files, git=True, message="import")
    before = {d.name: d for d in hv.list_domains() if d.name in imported}

    target = _target(out, result)
    planned = plan_revision(source.read_snapshot(out, "HEAD"), "", target, hv)
    assert not planned.errors
    changes = {c.name: c for c in planned.plan.changes}
    assert set(changes) == imported
    for name, c in changes.items():
        assert c.action == Action.ADOPT, (name, said(c))
        assert (c.fields, c.start, c.stop, c.restart_required, c.live_ops) == ((), False, False, False, ())

    status = apply_planned(planned, hv)
    assert status.reason == Reason.SUCCEEDED, status.message
    after = {d.name: d for d in hv.list_domains() if d.name in imported}
    for name, d in after.items():
        assert d.mark is not None
        assert d.mark.owner == "import-test"
        assert d.state == before[name].state  # nothing started, stopped or restarted
        assert essence(d.persistent_xml) == essence(before[name].persistent_xml)
    again = plan_revision(source.read_snapshot(out, "HEAD"), "", target, hv)
    assert {c.name: c.action for c in again.plan.changes} == dict.fromkeys(imported, Action.UNCHANGED)


def test_a_golden_passthrough_is_imported_back_with_keep(hv: Hypervisor) -> None:
    """The golden case whose VM keeps SPICE, <pm>, metadata and omissions in a pass-through:
    left out without one, imported with one, the same elements kept."""
    names = _define_golden(hv)
    without = {o.source: " ".join(o.reasons) for o in _import(hv, names).left_out}
    assert "<graphics type='spice'>: graphics are VNC here" in without["imp-desk"]
    result = _import(hv, names, keep=True)
    imported = {o.source: o for o in result.imported}
    assert IMPORTED | {"imp-desk"} <= set(imported)
    (note,) = imported["imp-desk"].notes
    for kept in ("<graphics type='spice'>", "<redirdev type='spicevmc'>", "<libosinfo>", "<pm>", "<vmport>"):
        assert kept in note
    assert "no <channel target name='org.qemu.guest_agent.0'>" in note
    assert "<driver name='qemu'> on <disk target dev='vda'>" in note


def test_left_out_domains_name_their_reasons(hv: Hypervisor) -> None:
    names = _define_golden(hv)
    reasons = {o.source: " ".join(o.reasons) for o in _import(hv, names).left_out}
    assert "inside the volume directory" in reasons["imp-win11"]
    assert "storagePool" in reasons["imp-data-db-cluster"]
    assert "host config domainType: this domain has 'qemu'" in reasons["imp-infra-router"]
    assert "libvirt network 'mgmt' does not exist" in reasons["imp-infra-vault"]
    assert "devices/hostdev[0]@display=on" in reasons["imp-cad-workstation"]  # would be dropped


def test_run_strategy_follows_state_and_autostart(hv: Hypervisor, tmp_path: Path) -> None:
    xml = (RENDER / "minimal-bios" / "domain.xml").read_text()
    strategies: dict[str, None] = {}
    for name, running, autostart in (
        ("imp-a", True, True),
        ("imp-b", True, False),
        ("imp-c", False, True),
        ("imp-d", False, False),
    ):
        dom = ET.fromstring(xml)
        for tag in ("name", "uuid"):
            el = dom.find(tag)
            assert el is not None
            dom.remove(el)
        ET.SubElement(dom, "name").text = name
        iface = dom.find("devices/interface/mac")
        assert iface is not None
        iface.set("address", f"02:00:00:00:00:{len(strategies) + 1:02x}")
        hv.define(ET.tostring(dom, encoding="unicode"), name)
        if running:
            hv.start(name)
        hv._lookup(name).setAutostart(1 if autostart else 0)
        strategies[name] = None
    result = _import(hv, list(strategies))
    got = {}
    for o in result.imported:
        text = result.files[o.path]
        got[o.source] = next(
            line.split(":")[1].strip() for line in text.splitlines() if "runStrategy" in line
        )
    assert got == {"imp-a": "Always", "imp-b": "RerunOnFailure", "imp-c": "Manual", "imp-d": "Halted"}
    out = tmp_path / "repo"
    write_repository(out, result.files, git=True, message="import")
    planned = plan_revision(source.read_snapshot(out, "HEAD"), "", _target(out, result), hv)
    for c in planned.plan.changes:
        assert (c.action, c.fields, c.start, c.stop) == (Action.ADOPT, (), False, False), said(c)
    assert hv.get_domain("imp-a") is not None
    assert hv.state("imp-c") == PowerState.SHUTOFF


def test_cli_import_then_plan(hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    xml = (RENDER / "minimal-bios" / "domain.xml").read_text().replace("web-1", "imp-cli")
    xml = xml.replace("c6d9770f-afd4-5f89-9d1a-28d1dc62c4b9", "c6d9770f-afd4-5f89-9d1a-28d1dc62c4ba")
    xml = xml.replace("02:55:24:97:21:a3", "02:55:24:97:21:a4")
    hv.define(xml, "imp-cli")
    hv.define(xml.replace("imp-cli", "imp-Bad_Name").replace("c4ba<", "c4bb<").replace("21:a4", "21:a5"), "x")
    out = tmp_path / "fleet"
    code = cli.main(["import", "--connect", URI, "--match", "imp-*", "--output-dir", str(out), "-o", "json"])
    captured = capsys.readouterr()
    assert code == 2  # one left out
    summary = json.loads(captured.out)
    assert (summary["imported"], summary["leftOut"]) == (1, 1)
    bad = next(o for o in summary["objects"] if o["source"] == "imp-Bad_Name")
    assert "virsh domrename 'imp-Bad_Name' imp-bad-name" in bad["reasons"][0]
    assert "[1/2] reading imp-Bad_Name" in captured.err
    assert (out / "vms" / "imp-cli.yaml").is_file()
    assert (out / "kustomization.yaml").read_text().endswith("resources:\n- vms/imp-cli.yaml\n")

    host_config = out / summary["hostConfig"]
    assert cli.main(["plan", "--repo", str(out), "--connect", URI, "--host-config", str(host_config)]) == 2
    text = capsys.readouterr().out
    assert "vm/imp-cli: adopt - adopting an existing domain (reconciler.kubevirt.io/adopt)" in text
    assert "Plan: 0 to create, 0 to update, 0 to delete, 1 to adopt, 0 unchanged." in text

    assert cli.main(["import", "--connect", URI, "imp-cli", "--output-dir", str(out)]) == 1
    assert "never overwrites" in capsys.readouterr().err
    assert cli.main(["import", "--connect", URI, "imp-none", "--output-dir", str(tmp_path / "x")]) == 1
    assert "no domain named 'imp-none'" in capsys.readouterr().err


def test_the_test_drivers_own_domain_imports_and_is_adopted_unchanged(
    hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    # The domain test:///default ships (type "test", i686, no machine, emulator or
    # NIC model): a newcomer's first `reconciler import` on the default host.
    live = hv.get_domain("test")
    assert live is not None
    shipped = live.persistent_xml
    before = essence(shipped)
    request.addfinalizer(lambda: hv.define(shipped, "test"))  # unmarked again for the others
    out = tmp_path / "fleet"
    assert cli.main(["import", "--connect", URI, "test", "--output-dir", str(out), "-o", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["imported"], summary["leftOut"]) == (1, 0)
    host_config = out / summary["hostConfig"]
    assert "domainType: test\n" in host_config.read_text()
    assert "architecture" not in (out / "vms" / "test.yaml").read_text()
    plan = ["--repo", str(out), "--connect", URI, "--host-config", str(host_config)]
    assert cli.main(["plan", *plan]) == 2
    text = capsys.readouterr().out
    assert "vm/test: adopt - adopting an existing domain" in text
    assert "Plan: 0 to create, 0 to update, 0 to delete, 1 to adopt, 0 unchanged." in text
    assert cli.main(["apply", *plan, "--yes"]) == 0
    capsys.readouterr()
    after = hv.get_domain("test")
    assert after is not None
    assert after.state == PowerState.RUNNING
    kept = essence(after.persistent_xml)
    # Everything the domain said is unchanged; what adoption wrote on top is only
    # what it meant already (QEMU's default CPU model spelled out).
    assert {k: kept.get(k) for k in before} == before
    assert {k for k in kept if k not in before} <= {k for k in kept if k.startswith("cpu")}
    assert cli.main(["plan", *plan]) == 0
    assert "Plan: 0 to create, 0 to update, 0 to delete, 1 unchanged." in capsys.readouterr().out
