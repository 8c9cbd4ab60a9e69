"""The plan's warnings (test:///default).

Covers: a VM outside namespace ``default`` pinned to an older instancetype revision gets
the plan's newer-revision note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.host.hypervisor import Hypervisor
from tests.conftest import GitRepo, drop_domains

if TYPE_CHECKING:
    from collections.abc import Iterator

URI = "test:///default"
INSTANCETYPE = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata: {{name: planwarn.small}}
spec: {{cpu: {{guest: 1}}, memory: {{guest: {memory}}}}}
---
"""
VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  runStrategy: Halted
  {matcher}
  template: {{spec: {{domain: {{devices: {{}}{memory}}}}}}}
---
"""
DOMAINS = ("team_planwarn-pinned",)


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as h:
        yield h
        drop_domains(h, DOMAINS)


def test_a_namespaced_vm_gets_the_newer_revision_note(
    git_repo: GitRepo, hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    vm = VM.format(
        name="planwarn-pinned", namespace="team", matcher="instancetype: {name: planwarn.small}", memory=""
    )
    git_repo.write("all.yaml", INSTANCETYPE.format(memory="64Mi") + vm)
    git_repo.commit("typed")
    repo = ["--repo", str(git_repo.path), "--connect", URI]
    assert cli.main(["apply", *repo]) == 0
    git_repo.write("all.yaml", INSTANCETYPE.format(memory="128Mi") + vm)
    git_repo.commit("instancetype edited")
    capsys.readouterr()
    assert cli.main(["plan", *repo]) == 0  # pinned: nothing changes on the host
    out = capsys.readouterr().out
    assert (
        "  warning: vm/team_planwarn-pinned: the repository holds a newer revision of "
        "VirtualMachineClusterInstancetype planwarn.small than the one captured for it" in out
    ), out
