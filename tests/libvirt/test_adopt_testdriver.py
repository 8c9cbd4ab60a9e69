"""Adopting a domain defined by hand (reconciler.kubevirt.io/adopt) on test:///default.

Covers: a VM that names no ``firmware.uuid`` adopts a domain of its name whose UUID is
not the one derived from the name: the domain keeps its live UUID (libvirt refuses
another under the same name), the apply counts it once (adopted, not failed), and the
next plan is empty; a failed change is counted as failed only. VM names are unique to this module.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from reconciler.daemon.scheduler import RESYNC
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import VMKey
from reconciler.model.changes import Action, Change, Plan
from reconciler.model.results import ApplyResult
from reconciler.plan.text import summary_line
from reconciler.wording.reasons import said
from tests.helpers.loop import Daemons
from tests.helpers.plans import because

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test

URI = "test:///default"
NAME = "adopt-hand-web"
LIVE_UUID = str(uuid.uuid4())
VM = f"""\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {NAME}
  annotations:
    reconciler.kubevirt.io/adopt: "true"
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        devices: {{}}
        memory:
          guest: 64Mi
"""


DAEMONS = Daemons(NAME)


@pytest.fixture(autouse=True)
def _teardown() -> Iterator[None]:
    yield
    DAEMONS.close()
    with Hypervisor(URI) as hv:
        for d in hv.list_domains():
            if d.name == NAME:
                if d.active:
                    hv.destroy(d.name)
                hv.undefine(d.name)


def test_adoption_keeps_the_live_uuid(git_repo: GitRepo, tmp_path: Path) -> None:
    hv = Hypervisor(URI)  # open throughout: the shared test driver lives while a connection does
    hv.define(
        f"<domain type='test'><name>{NAME}</name><uuid>{LIVE_UUID}</uuid>"
        "<memory unit='MiB'>64</memory><os><type>hvm</type></os></domain>",
        NAME,
    )
    git_repo.write("vms/web.yaml", VM)
    git_repo.commit()
    d = DAEMONS.make(git_repo, tmp_path / "s")
    d.keep_plans = True
    d.step({RESYNC})
    (h,) = d.hosts
    assert h.plan is not None
    assert [c.action for c in h.plan.changes] == [Action.ADOPT]
    assert d.reason == "Succeeded", d.message
    assert h.status is not None
    assert [(r.action, r.ok) for r in h.status.results] == [(Action.ADOPT, True)]
    line = summary_line(h.plan, True, h.status.results)
    assert "1 adopted" in line
    assert "0 failed" in line
    web = hv.get_domain(NAME)
    assert web is not None
    assert web.uuid == LIVE_UUID
    assert web.mark is not None
    d.step({RESYNC})
    assert h.plan is not None
    assert not h.plan.has_changes, [said(c) for c in h.plan.changes]
    hv.close()


def test_a_failed_change_is_counted_once() -> None:
    """A change that failed is counted as failed, not also as what it meant to do."""
    key = VMKey.from_domain(NAME)
    plan = Plan("c" * 40, (Change(key, Action.ADOPT, because("adopting")),))
    line = summary_line(plan, True, (ApplyResult(key, Action.ADOPT, False, "define failed"),))
    assert "adopted" not in line
    assert "1 failed" in line
