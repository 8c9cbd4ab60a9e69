"""Hosts are independent, and one rule for a revision with errors (pure, no host).

Covers: a VM that selects another host by ``kubernetes.io/hostname`` and cannot render
here (it needs dedicated CPUs this host has none of, a network only its host maps) is
no error of this host: this host's revision applies, the VM is neither planned nor
pruned here, and the error is kept for the PR diff (``Desired.elsewhere``); it is not
checked against this host's facts either. On its own host the same VM is an error of
the revision, and a revision with errors on a host, a VM it cannot run included, is
planned as its errors alone: nothing of it applies there (``plan``, ``apply``, the PR
diff and the daemon alike), and the plan's summary says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler import render, source
from reconciler.desired import desired_state
from reconciler.hostfacts import HostFacts
from reconciler.model import VMKey
from reconciler.model.changes import Action
from reconciler.plan.revision import plan_host
from reconciler.plan.text import summary_line
from reconciler.settings.host import HostConfig, NetworkTarget
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.problems import words
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from tests.helpers.git import GitRepo

PINNED = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Always
  template:
    spec:
      nodeSelector:
        kubernetes.io/hostname: host1
      domain:
        cpu:
          cores: 2
          dedicatedCpuPlacement: true
        memory:
          guest: 256Mi
        devices:
          interfaces:
            - name: fast
              bridge: {{}}
      networks:
        - name: fast
          multus:
            networkName: fast
"""


def test_a_vm_of_another_host_never_fails_this_one(git_repo: GitRepo) -> None:
    git_repo.write("vms/pinned.yaml", PINNED.format(name="pinned"))
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    git_repo.commit()
    snapshot = source.read_snapshot(git_repo.path)
    host2 = HostConfig(name="host2")  # no dedicated CPUs, no network "fast"
    facts = HostFacts(
        host="host2", caps=render.HostCaps.default(), networks=(("default", True),), interfaces=()
    )
    d = desired_state(snapshot, "", host2, render.HostCaps.default(), facts=facts)
    assert (d.errors, d.host_errors) == ((), ())
    assert [r.name for r in d.rendered] == ["web"]
    assert d.failed == (VMKey("default", "pinned"),)  # in git: never pruned here
    (elsewhere,) = map(words, d.elsewhere)
    assert "vm/pinned" in elsewhere
    assert d.away == (VMKey("default", "pinned"),)
    plan = plan_host(d, [], PlanPolicy(host="host2", prune=True))
    assert [(c.name, c.action) for c in plan.changes] == [("web", Action.CREATE)]
    assert plan.errors == ()
    assert plan.failed == ()  # no row of this host's for another host's VM


def test_on_its_own_host_the_vm_is_an_error_and_nothing_of_the_revision_applies(git_repo: GitRepo) -> None:
    git_repo.write("vms/pinned.yaml", PINNED.format(name="pinned"))
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    git_repo.commit()
    snapshot = source.read_snapshot(git_repo.path)
    host1 = HostConfig(name="host1", networks={"fast": NetworkTarget("bridge", "br-fast")})
    d = desired_state(snapshot, "", host1, render.HostCaps.default())
    assert any("host1 dedicates no CPUs" in words(e) for e in d.errors)
    plan = plan_host(d, [], PlanPolicy(host="host1"))
    assert plan.changes == ()
    assert "nothing will be applied" in summary_line(plan, applied=False)
    # A VM this host cannot run (its facts): the same rule.
    host1 = HostConfig(
        name="host1", dedicated_cpus=(2, 3), networks={"fast": NetworkTarget("bridge", "br-fast")}
    )
    facts = HostFacts(host="host1", caps=render.HostCaps.default(), interfaces=())
    d = desired_state(snapshot, "", host1, render.HostCaps.default(), facts=facts)
    assert d.errors == ()
    assert d.host_errors
    plan = plan_host(d, [], PlanPolicy(host="host1"))
    assert plan.changes == ()
    assert plan.errors == d.host_errors
