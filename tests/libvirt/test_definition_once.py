"""One definition per domain, through a whole reconcile on libvirt's test driver.

Covers: in a reconcile (plan + apply, the daemon's pipeline cache kept between
reconciles) of a host holding unchanged domains (running, shut off, one holding a
mediated device), changed ones (running: a restart-class change staged; shut off) and
a new one, every domain document is parsed at most once: a domain's rendered XML at
most once (never for an unchanged domain, whose comparison is cached), each live
document libvirt reports (persistent definition, running definition, a new domain's
definition read back for the root ports to seal) at most once;
so a domain that is not running is parsed at most twice, and what the domains hold
(dedicated CPUs, mediated devices) is read without parsing a whole domain. The bytes
apply hands to ``defineXML`` are exactly the definitions the plan carried, each with
the ownership mark of the plan's revision.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from reconciler import ownership
from reconciler.desired import PipelineCache
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import SourceSnapshot
from reconciler.model.changes import Action, Plan
from reconciler.reconcile import reconcile_once
from reconciler.settings.host import HostConfig, HostDevice
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.source import DirView
from tests.helpers.domains import drop_domains

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

URI = "test:///default"
P = "rtest-def-"
NAMES = tuple(f"{P}{n}" for n in ("run", "off", "gpu", "run-changed", "off-changed", "new"))
UUIDS = ("9a8c6a4e-2f57-4c3b-9d0c-5d1f3b8e1b01",)
HOST = HostConfig(name="h1", host_devices={"nvidia.com/GRID_T4-1Q": HostDevice("mdev", "nvidia-222", UUIDS)})

VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: {strategy}
  template:
    spec:
      domain:
        cpu: {{cores: {cores}}}
        memory: {{guest: {memory}}}
        devices:
          disks:
            - name: root
              disk: {{bus: virtio}}
{gpus}      volumes:
        - name: root
          emptyDisk: {{capacity: 1Gi}}
"""
GPUS = """          gpus:
            - name: vgpu
              deviceName: nvidia.com/GRID_T4-1Q
"""


def write_vm(
    repo: Path, name: str, strategy: str, cores: int = 1, memory: str = "64Mi", gpu: bool = False
) -> None:
    text = VM.format(
        name=f"{P}{name}", strategy=strategy, cores=cores, memory=memory, gpus=GPUS if gpu else ""
    )
    (repo / "vms" / f"{name}.yaml").write_text(text)


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as h:
        try:
            yield h
        finally:
            drop_domains(h, NAMES)


class Recorder:
    """The reconcile's parses of whole domain documents, and its ``defineXML`` calls."""

    def __init__(self, hv: Hypervisor, monkeypatch: pytest.MonkeyPatch) -> None:
        self.parsed: list[str] = []
        self.defined: dict[str, str] = {}
        parse: Callable[..., ET.Element] = ET.fromstring
        define = hv.define

        def counted(text: str | bytes, *args: Any, **kwargs: Any) -> ET.Element:
            if isinstance(text, str) and text.lstrip().startswith("<domain"):
                self.parsed.append(text)
            return parse(text, *args, **kwargs)

        def recorded(xml: str, name: str) -> None:
            self.defined[name] = xml
            define(xml, name)

        monkeypatch.setattr(ET, "fromstring", counted)
        monkeypatch.setattr(ET, "XML", counted)
        monkeypatch.setattr(hv, "define", recorded)

    def per_domain(self) -> Counter[str]:
        names = (re.search(r"<name>([^<]*)</name>", text) for text in self.parsed)
        return Counter(m.group(1) for m in names if m is not None)


def reconcile(repo: Path, hv: Hypervisor, cache: PipelineCache, commit: str) -> Plan:
    snap = SourceSnapshot(repo=str(repo), ref="HEAD", commit=commit, files=DirView(str(repo)))
    target = HostTarget(URI, HOST, PlanPolicy(host="h1"))
    plan, status = reconcile_once(snap, "vms", target, hv, cache=cache)
    assert not status.message, status.message
    return plan


def test_each_document_parsed_once_and_defined_as_planned(
    hv: Hypervisor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "vms").mkdir()
    write_vm(tmp_path, "run", "Always")
    write_vm(tmp_path, "off", "Halted")
    write_vm(tmp_path, "gpu", "Halted", gpu=True)
    write_vm(tmp_path, "run-changed", "Always")
    write_vm(tmp_path, "off-changed", "Halted")
    cache = PipelineCache(keep_expanded=False)  # as the daemon keeps it per host
    first = reconcile(tmp_path, hv, cache, "1" * 40)
    assert {c.name for c in first.changes if c.action == Action.CREATE} == set(NAMES) - {f"{P}new"}
    assert not reconcile(tmp_path, hv, cache, "1" * 40).has_changes  # the comparisons now cached

    write_vm(tmp_path, "run-changed", "Always", cores=2)  # restart-class: staged, running
    write_vm(tmp_path, "off-changed", "Halted", memory="96Mi")
    write_vm(tmp_path, "new", "Always")
    live = {d.name: d for d in hv.list_domains() if d.name in NAMES}
    rec = Recorder(hv, monkeypatch)
    plan = reconcile(tmp_path, hv, cache, "2" * 40)

    actions = {c.name: c.action for c in plan.changes if c.name in NAMES}
    assert actions == {
        f"{P}run": Action.UNCHANGED,
        f"{P}off": Action.UNCHANGED,
        f"{P}gpu": Action.UNCHANGED,
        f"{P}run-changed": Action.UPDATE,
        f"{P}off-changed": Action.UPDATE,
        f"{P}new": Action.CREATE,
    }
    # Every document at most once; an unchanged domain not at all (its comparison is
    # cached, and what the mediated device's domain holds is read from its <hostdev>).
    assert [text for text, n in Counter(rec.parsed).items() if n > 1] == []
    assert rec.per_domain() == {
        f"{P}run-changed": 3,  # rendered, live persistent, live running
        f"{P}off-changed": 2,  # rendered, live persistent
        f"{P}new": 2,  # rendered, and its definition read back once defined (root ports to seal)
    }
    assert live[f"{P}run-changed"].active
    assert not live[f"{P}off-changed"].active

    # apply defined the very bytes the plan carried, marked with the plan's revision
    planned = {c.name: c.definition for c in plan.changes if c.action.defines}
    assert set(planned) == {f"{P}run-changed", f"{P}off-changed", f"{P}new"}
    assert rec.defined == {name: d.xml for name, d in planned.items() if d is not None}
    for d in planned.values():
        assert d is not None
        assert ownership.read_mark(d.xml) == d.mark
        assert d.mark.commit == "2" * 40
