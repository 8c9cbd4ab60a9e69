"""A revision with errors is its errors alone, everywhere (test:///default).

Covers: a typo in ``kind:`` (``VirtualMachin``) is an error at file:line with a
suggestion, never a VM silently dropped; on a host where that VM runs, ``plan
--prune`` exits 1 and lists no deletion; the status rows of that plan keep every
domain OutOfSync at its applied revision, none "Orphaned"; ``diff`` against the
good commit shows the error and no deletion in text, markdown and JSON.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from reconciler import cli, source
from reconciler.daemon import events
from reconciler.host.hypervisor import Hypervisor
from reconciler.reconcile import reconcile_once
from reconciler.settings.host import HostConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.status import vm_statuses
from reconciler.wording import problems
from tests.helpers.domains import drop_domains

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.helpers.git import GitRepo

URI = "test:///default"
VM = """\
apiVersion: kubevirt.io/v1
kind: {kind}
metadata:
  name: {name}
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        cpu: {{cores: 1}}
        memory: {{guest: 64Mi}}
        devices: {{}}
"""
NAMES = ("broken-rev-a", "broken-rev-b")


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as h:
        yield h
        drop_domains(h, NAMES)


def test_kind_typo_is_an_error_and_deletes_nothing(
    git_repo: GitRepo, hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in NAMES:
        git_repo.write(f"vms/{name}.yaml", VM.format(kind="VirtualMachine", name=name))
    good = git_repo.commit("two VMs")
    repo = ["--repo", str(git_repo.path)]
    assert cli.main(["apply", *repo, "--connect", URI, "--prune"]) == 0
    assert {d.name for d in hv.list_domains()} >= set(NAMES)
    capsys.readouterr()

    git_repo.write("vms/broken-rev-b.yaml", VM.format(kind="VirtualMachin", name="broken-rev-b"))
    bad = git_repo.commit("kind typo")

    assert cli.main(["validate", *repo]) == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert "vms/broken-rev-b.yaml:2" in text, text
    assert "did you mean VirtualMachine?" in text, text

    assert cli.main(["plan", *repo, "--connect", URI, "--prune"]) == 1
    out = capsys.readouterr()
    assert "did you mean VirtualMachine?" in out.out + out.err
    assert "delete" not in out.out.lower(), out.out
    assert {d.name for d in hv.list_domains()} >= set(NAMES)

    target = HostTarget(uri=URI, config=HostConfig(), policy=PlanPolicy(host="h", prune=True))
    plan, status = reconcile_once(source.read_snapshot(git_repo.path, bad), "", target, hv)
    assert plan.errors
    assert not plan.changes
    # the outcome as fields: the errors as records, the first one whole (its own "; did you
    # mean" is not a second error), as events and commit statuses show it
    assert status.problems == plan.errors
    assert status.first_error == problems.words(plan.errors[0])
    assert status.first_error.endswith("; did you mean VirtualMachine?"), status.first_error
    said = events.detect(events.HostOutcome("h"), events.HostOutcome("h", bad, "", str(status.reason),
                                                                   status.first_error), 0.0)  # fmt: skip
    assert [e.message for e in said] == [f"h: {status.reason}: {status.first_error}"]
    rows = {r.name: r for r in vm_statuses(plan, status.results, hv.list_domains(), "h") if r.name in NAMES}
    assert set(rows) == set(NAMES)
    for row in rows.values():
        assert (row.sync, row.state, row.revision) == ("OutOfSync", "running", good[:12])
        assert row.message == f"revision {bad[:12]} not applied: it has errors"

    for fmt in ("text", "markdown", "json"):
        code = cli.main(["diff", *repo, "--base", good, "--head", bad, "--format", fmt, "--no-color"])
        assert code == 1
        text_out = capsys.readouterr().out
        if fmt == "json":
            report = json.loads(text_out)
            assert report["vms"] == [], report
            assert report["summary"]["deleted"] == 0, report
            assert "did you mean VirtualMachine?" in json.dumps(report["errors"])
        else:
            assert "0 deleted" in text_out, text_out
            assert "did you mean VirtualMachine?" in text_out, text_out
            assert "prune" not in text_out.lower(), text_out
