"""End to end on libvirt's test driver: commit -> apply -> status -> commit -> apply.

Covers: a real git repository read through the source stage; overlays, expansion
(instancetype cpu/memory, preference disk bus / NIC model) and rendering on the way;
first apply creates and starts an Always VM and only defines a Halted one; the
ownership mark records commit, file and spec hash; a second apply of the same commit
is a no-op; a commit changing the instancetype updates the domain; switching the run
strategy to Halted stops it; a broken commit applies nothing and keeps the last good
state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler import source
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from reconciler.model.changes import Action, Plan
from reconciler.model.results import Reason, ReconcileStatus
from reconciler.reconcile import reconcile_once
from reconciler.settings.host import HostConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.status import vm_statuses
from reconciler.status.table import format_table
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.helpers.git import GitRepo

CATALOG = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: e2e.small
spec:
  cpu:
    guest: 1
  memory:
    guest: 1Gi
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: e2e.large
spec:
  cpu:
    guest: 4
  memory:
    guest: 4Gi
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: e2e-linux
spec:
  devices:
    preferredDiskBus: virtio
    preferredInterfaceModel: virtio
"""

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: {strategy}
  instancetype:
    name: {size}
  preference:
    name: e2e-linux
  template:
    spec:
      domain:
        devices: {{}}
      volumes:
        - name: root
          hostDisk:
            path: /var/lib/libvirt/images/{name}.qcow2
            type: Disk
"""

KUSTOMIZATION = """\
resources:
  - catalog.yaml
  - vms/e2e-web.yaml
  - vms/e2e-batch.yaml
"""


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor("test:///default") as h:
        yield h
        for d in h.list_domains():
            if d.name.startswith("e2e-"):
                if d.active:
                    h.destroy(d.name)
                h.undefine(d.name)


def _apply(repo: GitRepo, hv: Hypervisor) -> tuple[Plan, ReconcileStatus]:
    target = HostTarget(uri="test:///default", config=HostConfig(), policy=PlanPolicy(host="test-host"))
    snapshot = source.read_snapshot(repo.path, "HEAD")
    return reconcile_once(snapshot, "", target, hv)


def test_commit_apply_update_noop(git_repo: GitRepo, hv: Hypervisor) -> None:
    git_repo.write("catalog.yaml", CATALOG)
    git_repo.write("vms/e2e-web.yaml", VM.format(name="e2e-web", strategy="Always", size="e2e.small"))
    git_repo.write("vms/e2e-batch.yaml", VM.format(name="e2e-batch", strategy="Halted", size="e2e.small"))
    git_repo.write("kustomization.yaml", KUSTOMIZATION)
    first = git_repo.commit("fleet")

    plan, status = _apply(git_repo, hv)
    assert status.reason == Reason.SUCCEEDED, status.message
    assert status.applied_revision == first
    # test:///default is shared by the whole test process: look at this test's domains only
    actions = {c.name: c.action for c in plan.changes if c.name.startswith("e2e-")}
    assert actions == {"e2e-web": Action.CREATE, "e2e-batch": Action.CREATE}

    web = hv.get_domain("e2e-web")
    batch = hv.get_domain("e2e-batch")
    assert web is not None
    assert batch is not None
    assert web.state == PowerState.RUNNING
    assert batch.state == PowerState.SHUTOFF
    assert web.mark is not None
    assert (web.mark.commit, web.mark.path) == (first, "vms/e2e-web.yaml")
    assert "<target dev='vda' bus='virtio'/>" in web.persistent_xml
    assert "<model type='virtio'/>" in web.persistent_xml
    assert "<memory unit='KiB'>1048576</memory>" in web.persistent_xml

    rows = vm_statuses(plan, status.results, hv.list_domains(), "test-host")
    table = format_table(rows)
    assert "e2e-web" in table
    assert "Synced" in table

    # Same commit again: nothing to do.
    plan, status = _apply(git_repo, hv)
    assert status.reason == Reason.SUCCEEDED
    assert not plan.has_changes, [(c.subject, c.action, said(c)) for c in plan.changes]

    # A bigger instancetype and a Halted web VM.
    git_repo.write("vms/e2e-web.yaml", VM.format(name="e2e-web", strategy="Halted", size="e2e.large"))
    second = git_repo.commit("web: large, halted")
    plan, status = _apply(git_repo, hv)
    assert status.reason == Reason.SUCCEEDED, status.message
    change = next(c for c in plan.changes if c.name == "e2e-web")
    assert change.action == Action.STOP  # powering off is the headline; the new definition comes with it
    assert change.defines
    assert change.stop
    assert any(f.path == "vcpu" or f.path.startswith("cpu") for f in change.fields), change.fields
    web = hv.get_domain("e2e-web")
    assert web is not None
    assert web.mark is not None
    assert web.state == PowerState.SHUTOFF
    assert web.mark.commit == second
    assert "<memory unit='KiB'>4194304</memory>" in web.persistent_xml

    plan, status = _apply(git_repo, hv)
    assert not plan.has_changes, [(c.subject, c.action, said(c)) for c in plan.changes]


def test_broken_commit_applies_nothing(git_repo: GitRepo, hv: Hypervisor) -> None:
    git_repo.write("catalog.yaml", CATALOG)
    git_repo.write("vms/e2e-web.yaml", VM.format(name="e2e-web", strategy="Always", size="e2e.small"))
    git_repo.write("vms/e2e-batch.yaml", VM.format(name="e2e-batch", strategy="Always", size="e2e.small"))
    git_repo.write("kustomization.yaml", KUSTOMIZATION)
    good = git_repo.commit("fleet")
    _, status = _apply(git_repo, hv)
    assert status.reason == Reason.SUCCEEDED

    # One VM grows, the other names an instancetype that does not exist.
    git_repo.write("vms/e2e-web.yaml", VM.format(name="e2e-web", strategy="Always", size="e2e.large"))
    git_repo.write("vms/e2e-batch.yaml", VM.format(name="e2e-batch", strategy="Always", size="e2e.missing"))
    git_repo.commit("broken")
    _plan, status = _apply(git_repo, hv)
    assert status.reason == Reason.EXPANSION_FAILED
    assert status.applied_revision == ""
    assert "vms/e2e-batch.yaml" in status.message
    assert "e2e.missing" in status.message
    web = hv.get_domain("e2e-web")
    assert web is not None
    assert web.mark is not None
    assert web.mark.commit == good  # the good VM was not touched either
    assert "<memory unit='KiB'>1048576</memory>" in web.persistent_xml
