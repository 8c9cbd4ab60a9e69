"""The plan says everything that happens, through the CLI as a user runs it (test:///default).

Covers: powering a VM off is its own action and count (``stop``: text ``1 to stop``,
JSON ``action: stop`` and ``summary.stop``), powering it on again is ``start``, and
both define the new run strategy on the way; ``--restart-now`` and ``--rollout
Restart`` restart what an earlier apply staged (RestartRequired), without any restart
window, while a plain plan leaves it staged; ``run --once`` exits 1 and records the
revision as not applied when a VM of it is left out (a domain of another owner holds
its name), as ``plan`` does.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.domains import drop_domains

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

URI = "test:///default"
NAMES = ("silent-a", "silent-b")
VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: {strategy}
  template:
    spec:
      terminationGracePeriodSeconds: 1
      domain:
        machine: {{type: {machine}}}
        cpu: {{cores: 1}}
        memory: {{guest: 64Mi}}
        devices: {{}}
"""


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as h:
        drop_domains(h, NAMES)
        yield h
        drop_domains(h, NAMES)


def write(git_repo: GitRepo, name: str, strategy: str = "Always", machine: str = "q35") -> str:
    git_repo.write(f"vms/{name}.yaml", VM.format(name=name, strategy=strategy, machine=machine))
    return git_repo.commit(f"{name}: {strategy} {machine}")


def args(git_repo: GitRepo, *more: str) -> list[str]:
    return ["--repo", str(git_repo.path), "--connect", URI, "--owner", "silent-test", *more]


def plan_json(git_repo: GitRepo, capsys: pytest.CaptureFixture[str], *more: str) -> dict[str, object]:
    capsys.readouterr()
    cli.main(["plan", *args(git_repo, "-o", "json", *more)])
    (doc,) = json.loads(capsys.readouterr().out)["plans"]
    assert isinstance(doc, dict)
    return doc


def change(doc: dict[str, object], name: str) -> dict[str, object]:
    changes = doc["changes"]
    assert isinstance(changes, list)
    (c,) = [c for c in changes if c["name"] == name]
    assert isinstance(c, dict)
    return c


def test_powering_off_and_on_are_stop_and_start(
    git_repo: GitRepo, hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    write(git_repo, "silent-a")
    assert cli.main(["apply", *args(git_repo, "--yes")]) == 0
    assert hv.state("silent-a") == PowerState.RUNNING

    write(git_repo, "silent-a", strategy="Halted")
    doc = plan_json(git_repo, capsys)
    assert change(doc, "silent-a")["action"] == "stop"
    summary = doc["summary"]
    assert isinstance(summary, dict)
    assert (summary["stop"], summary["update"]) == (1, 0)
    capsys.readouterr()
    assert cli.main(["plan", *args(git_repo)]) == 2
    out = capsys.readouterr().out
    assert "vm/silent-a: stop - " in out
    assert "Plan: 0 to create, 0 to update, 1 to stop, 0 to delete, 0 unchanged." in out

    assert cli.main(["apply", *args(git_repo, "--yes")]) == 0
    assert hv.state("silent-a") == PowerState.SHUTOFF
    assert "Applied: 0 created, 0 updated, 1 stopped, 0 deleted" in capsys.readouterr().out
    assert cli.main(["plan", *args(git_repo)]) == 0  # the new run strategy was defined with the stop

    write(git_repo, "silent-a", strategy="Always")
    doc = plan_json(git_repo, capsys)
    assert change(doc, "silent-a")["action"] == "start"
    summary = doc["summary"]
    assert isinstance(summary, dict)
    assert summary["start"] == 1
    assert cli.main(["apply", *args(git_repo, "--yes")]) == 0
    assert hv.state("silent-a") == PowerState.RUNNING
    assert cli.main(["plan", *args(git_repo)]) == 0


def test_restart_now_and_rollout_restart_restart_what_is_staged(
    git_repo: GitRepo, hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    write(git_repo, "silent-a")
    assert cli.main(["apply", *args(git_repo, "--yes")]) == 0
    write(git_repo, "silent-a", machine="pc")  # restart-class: staged under the default rollout
    assert cli.main(["apply", *args(git_repo, "--yes")]) == 0
    staged = change(plan_json(git_repo, capsys), "silent-a")
    assert (staged["action"], staged["restartRequired"]) == ("unchanged", True)

    for flags in (["--restart-now"], ["--rollout", "Restart"]):
        c = change(plan_json(git_repo, capsys, *flags), "silent-a")
        assert c["action"] == "restart", (flags, c)
    c = change(plan_json(git_repo, capsys, "--restart-now"), "silent-a")
    assert "restart now requested" in str(c["reason"])

    assert cli.main(["apply", *args(git_repo, "--restart-now", "--yes")]) == 0
    assert "1 restarted" in capsys.readouterr().out
    after = change(plan_json(git_repo, capsys), "silent-a")
    assert (after["action"], after["restartRequired"]) == ("unchanged", False)


def test_run_once_fails_when_a_vm_of_the_revision_is_left_out(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(git_repo, "silent-a")
    write(git_repo, "silent-b")
    # Another owner's domain holds silent-b's name: that VM is skipped with an error.
    assert (
        cli.main(
            ["apply", "--repo", str(git_repo.path), "--connect", URI, "--owner", "someone-else", "--yes"]
        )
        == 0
    )
    drop_domains(hv, ["silent-a"])
    state = tmp_path / "state"
    run = ["run", "--once", "--repo", str(git_repo.path), "--connect", URI, "--owner", "silent-test"]
    code = cli.main([*run, "--state-dir", str(state), "--listen", ""])
    assert code == 1
    doc = json.loads((state / "state.json").read_text())
    assert doc["reason"] == "ApplyFailed"
    assert doc["applied_revision"] == ""
    assert "belongs to another owner (someone-else)" in doc["message"]
    assert hv.state("silent-a") == PowerState.RUNNING  # the rest of the revision was applied
    capsys.readouterr()
    assert cli.main(["plan", *args(git_repo)]) == 1  # plan says the same
