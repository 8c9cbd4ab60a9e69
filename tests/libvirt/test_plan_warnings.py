"""``plan`` says what ``validate`` says (test:///default).

Covers: the warnings ``validate`` prints for a revision (here a deprecated preference
field every VM uses) are the plan's warnings too, one line per cause, in text and in
JSON; a VM outside namespace ``default`` pinned to an older instancetype revision gets
the plan's newer-revision note.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.host.hypervisor import Hypervisor
from tests.helpers.domains import drop_domains

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.helpers.git import GitRepo

URI = "test:///default"
PREFERENCE = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata: {name: planwarn-old}
spec: {cpu: {preferredCPUTopology: preferSockets}}
---
"""
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


def warnings_of(text: str, prefix: str) -> list[str]:
    return [line.removeprefix(prefix) for line in text.splitlines() if line.startswith(prefix)]


def test_plan_shows_the_warnings_validate_shows(
    git_repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    vms = "".join(
        VM.format(
            name=f"planwarn-{i}",
            namespace="default",
            matcher="preference: {name: planwarn-old}",
            memory=", memory: {guest: 64Mi}",
        )
        for i in range(4)
    )
    git_repo.write("all.yaml", PREFERENCE + vms)
    git_repo.commit("a deprecated preference field, used by every VM")
    repo = ["--repo", str(git_repo.path)]
    assert cli.main(["validate", *repo]) == 0
    said = warnings_of(capsys.readouterr().err, "reconciler: warning: ")
    assert len(said) == 1, said
    assert "preferSockets is deprecated" in said[0]
    assert said[0].endswith("(4 VMs: vm/planwarn-0, vm/planwarn-1, vm/planwarn-2, ...)")
    assert cli.main(["plan", *repo, "--connect", URI]) == 2
    assert warnings_of(capsys.readouterr().out, "  warning: ") == said
    assert cli.main(["plan", *repo, "--connect", URI, "-o", "json"]) == 2
    (doc,) = json.loads(capsys.readouterr().out)["plans"]
    assert doc["warnings"] == said


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
        "  warning: vm/team_planwarn-pinned: instancetype planwarn.small: a newer revision is in the "
        "repository" in out
    ), out
