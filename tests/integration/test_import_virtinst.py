"""``reconciler import --keep-unsupported`` of running virt-install domains on QEMU (TCG).

Covers: domains ``virt-install --print-xml`` writes for a spread of OS variants and device
mixes (SPICE with QXL, virtio or VGA video, USB redirection and companion controllers,
Windows 11's firmware auto-selection, TPM and clock in local time, an interface ROM
without a BAR and no guest agent channel, ``<pm>`` and no balloon, a CPU topology), defined on ``qemu:///system`` as
``rtest-vi-*`` and booted; each is imported with what KubeVirt's fields cannot say kept
in its pass-through, and the repository written is planned against the host as
``adopt`` with no change and nothing to do to the running guests; the plan is applied:
every domain is marked, still running in the same QEMU process, nothing of its
definition lost; the next plan is empty. ``bench/import-virtinst`` runs all 24 variants.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import source
from reconciler.cli.adopt import write_repository
from reconciler.config.host import load_host_config
from reconciler.host.hypervisor import Hypervisor
from reconciler.importer import import_domains
from reconciler.importer.verify import dropped
from reconciler.model import PowerState
from reconciler.model.changes import Action
from reconciler.model.results import Reason
from reconciler.reconcile import apply_planned, plan_revision
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.wording.reasons import said
from tests.helpers.domains import diff_domains
from tests.helpers.qemu import sweep_prefix
from tests.helpers.virtinst import VARIANTS, print_xml

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from reconciler.hostfacts import HostFacts

PREFIX = "rtest-vi-"
IMAGES = Path("/var/lib/libvirt/images")
# Variants of tests/helpers/virtinst.py booted here (by index): a spread of the mixes
# (22, with the empty CD-ROM drive, asks for host-passthrough, which TCG cannot run).
BOOTED = (0, 3, 15, 17, 19, 20, 21)


@pytest.fixture
def hv(qemu_uri: str) -> Iterator[Hypervisor]:
    sweep_prefix(qemu_uri, PREFIX)
    with Hypervisor(qemu_uri) as h:
        yield h
    sweep_prefix(qemu_uri, PREFIX)
    for i in BOOTED:
        (IMAGES / f"{PREFIX}{i:02d}.qcow2").unlink(missing_ok=True)


def _boot(hv: Hypervisor, uri: str) -> list[str]:
    names = []
    for i in BOOTED:
        name = f"{PREFIX}{i:02d}"
        variant, extra = VARIANTS[i]
        xml = print_xml(uri, name, variant, extra)
        if "/var/lib/libvirt/images/" in xml:  # --print-xml creates no disk: a blank one
            image = IMAGES / f"{name}.qcow2"
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(image), "10M"], check=True)
        hv.define(xml, name)
        hv.start(name)
        names.append(name)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(hv.state(n) != PowerState.RUNNING for n in names):
        time.sleep(0.5)
    assert {n: hv.state(n) for n in names} == dict.fromkeys(names, PowerState.RUNNING)
    return names


def test_running_virtinst_domains_are_adopted_without_a_change(
    hv: Hypervisor, qemu_uri: str, tmp_path: Path
) -> None:
    names = _boot(hv, qemu_uri)
    ids = {n: hv._lookup(n).ID() for n in names}

    def facts_of(images: Sequence[str], dirs: Sequence[str]) -> HostFacts:
        return hv.host_facts(images, tuple(dirs), devices=True)

    result = import_domains(hv.list_domains(), names, hv.autostarted(), facts_of, "host-a", keep=True)
    assert {o.source for o in result.imported} == set(names), {o.source: o.reasons for o in result.left_out}
    out = tmp_path / "repo"
    write_repository(out, result.files, git=True, message="import")
    config = load_host_config((out / result.host_config_path).read_bytes(), result.host_config_path)
    target = HostTarget(qemu_uri, config, PlanPolicy(host="host-a", owner="import-test"))
    before = {d.name: d for d in hv.list_domains() if d.name in names}

    planned = plan_revision(source.read_snapshot(out, "HEAD"), "", target, hv)
    assert not planned.errors
    for c in planned.plan.changes:
        assert c.action == Action.ADOPT, (c.name, said(c))
        assert (c.fields, c.start, c.stop, c.restart_required, c.live_ops) == ((), False, False, False, ())
    status = apply_planned(planned, hv)
    assert status.reason == Reason.SUCCEEDED, status.message

    for d in hv.list_domains():
        if d.name not in names:
            continue
        assert d.mark is not None
        assert d.state == PowerState.RUNNING
        assert hv._lookup(d.name).ID() == ids[d.name]  # the same QEMU process: nothing restarted
        assert dropped(d.persistent_xml, before[d.name].persistent_xml) == (), d.name
        assert diff_domains(d.persistent_xml, before[d.name].persistent_xml) == (), d.name
    again = plan_revision(source.read_snapshot(out, "HEAD"), "", target, hv)
    assert {c.name: c.action for c in again.plan.changes} == dict.fromkeys(names, Action.UNCHANGED)
