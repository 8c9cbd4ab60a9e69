"""The plan says everything that happens, through the CLI as a user runs it (test:///default).

Covers: powering a VM off is its own action and count (``stop``: text ``1 to stop``,
JSON ``action: stop`` and ``summary.stop``), powering it on again is ``start``, and
both define the new run strategy on the way; ``--restart-now`` and ``--rollout
Restart`` restart what an earlier apply staged (RestartRequired), without any restart
window, while a plain plan leaves it staged; ``run --once`` exits 1 and records the
revision as not applied, and applies none of it, when a VM of it is left out (a domain
of another owner holds its name: an error of the revision on that host), as ``plan`` does.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from reconciler import cli
from reconciler.config.daemon import Policy
from reconciler.daemon.scheduler import RESYNC
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.domains import drop_domains
from tests.helpers.loop import Daemons

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


def plan_json(git_repo: GitRepo, capsys: pytest.CaptureFixture[str], *more: str) -> dict[str, Any]:
    capsys.readouterr()
    cli.main(["plan", *args(git_repo, "-o", "json", *more)])
    (doc,) = json.loads(capsys.readouterr().out)["plans"]
    assert isinstance(doc, dict)
    return doc


def change(doc: dict[str, Any], name: str) -> dict[str, Any]:
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
    # One rule for a revision with errors: a VM the plan leaves out is an error of the
    # revision on this host, which applies as a whole or not at all.
    assert doc["reason"] == "RenderFailed"
    assert doc["applied_revision"] == ""
    assert "belongs to another owner (someone-else)" in doc["message"]
    assert hv.get_domain("silent-a") is None  # nothing of the revision was applied
    capsys.readouterr()
    assert cli.main(["plan", *args(git_repo)]) == 1  # plan says the same


TYPED = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata: {{name: silent.small}}
spec: {{cpu: {{guest: 1}}, memory: {{guest: {memory}}}}}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: silent-a
{annotations}spec:
  runStrategy: Halted
  instancetype: {{name: silent.small}}
  template:
    spec:
      domain: {{devices: {{}}}}
      volumes:
        - name: root
          hostDisk: {{path: /var/lib/libvirt/images/silent-a.qcow2, type: DiskOrCreate, capacity: {disk}}}
"""


def typed(git_repo: GitRepo, memory: str = "64Mi", disk: str = "1Gi", annotations: str = "") -> None:
    git_repo.write("all.yaml", TYPED.format(memory=memory, disk=disk, annotations=annotations))
    git_repo.commit(f"memory {memory}, disk {disk}")


def memory_of(hv: Hypervisor, name: str) -> str:
    (d,) = [d for d in hv.list_domains() if d.name == name]
    return d.persistent_xml.split("<currentMemory", 1)[1].split("</currentMemory>", 1)[0]


def test_a_pinned_vm_is_said_everywhere_and_rolls_forward(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typed(git_repo)
    assert cli.main(["apply", *args(git_repo, "--yes")]) == 0
    before = memory_of(hv, "silent-a")
    typed(git_repo, memory="128Mi")
    capsys.readouterr()
    assert cli.main(["plan", *args(git_repo)]) == 0  # nothing changes on the host, and it says why
    out = capsys.readouterr().out
    (line,) = [w for w in out.splitlines() if "newer revision" in w]
    assert "vm/silent-a: instancetype silent.small: a newer revision is in the repository" in line
    assert "`reconciler apply --roll-forward vm/NAME`" in line
    assert 'reconciler.kubevirt.io/roll-forward: "true"' in line
    # status (through the daemon's state) names it per VM
    state = tmp_path / "state"
    run = ["run", "--once", *args(git_repo), "--state-dir", str(state), "--listen", ""]
    assert cli.main(run) == 0
    capsys.readouterr()
    assert cli.main(["status", "--state-dir", str(state), "--connect", URI, "-o", "json"]) == 0
    (row,) = [v for v in json.loads(capsys.readouterr().out)["vms"] if v["name"] == "silent-a"]
    assert [n["notice"] for n in row["notes"]] == ["pinned-revision"]
    assert cli.main(["status", "--state-dir", str(state), "--connect", URI]) == 0
    assert "pinned: git holds a newer instancetype/preference" in capsys.readouterr().out
    # /api/status and the page name it too
    daemon = Daemons("silent-").make(git_repo, tmp_path / "page-state", policy=Policy(owner="silent-test"))
    daemon.step({RESYNC})
    (page_row,) = [v for v in daemon.publish.document["hosts"][0]["vms"] if v["name"] == "silent-a"]
    assert [n["notice"] for n in page_row["notes"]] == ["pinned-revision"]
    for h in daemon.hosts:
        h.close()
    # --roll-forward: this VM takes the repository's revision, this once
    doc = plan_json(git_repo, capsys, "--roll-forward", "vm/silent-a")
    c = change(doc, "silent-a")
    assert c["action"] == "update"
    assert [(f["field"], f["before"], f["after"]) for f in c["changes"]] == [
        ("memory.guest", "64Mi", "128Mi")
    ]
    assert not [w for w in doc["warnings"] if "newer revision" in w]
    assert cli.main(["plan", *args(git_repo, "--roll-forward", "vm/nosuch")]) == 1
    assert "vm/nosuch: --roll-forward: no such VM" in capsys.readouterr().err
    assert cli.main(["apply", *args(git_repo, "--roll-forward", "vm/silent-a", "--yes")]) == 0
    assert memory_of(hv, "silent-a") != before
    assert cli.main(["plan", *args(git_repo)]) == 0
    assert "newer revision" not in capsys.readouterr().out
    # in git: the annotation rolls it forward at every apply while it is set
    typed(
        git_repo, memory="256Mi", annotations='  annotations: {reconciler.kubevirt.io/roll-forward: "true"}\n'
    )
    c = change(plan_json(git_repo, capsys), "silent-a")
    assert [(f["field"], f["after"]) for f in c["changes"]] == [("memory.guest", "256Mi")]


def test_a_disk_size_git_asks_of_an_existing_disk_is_said(
    git_repo: GitRepo, hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    typed(git_repo, disk="1Gi")
    assert cli.main(["apply", *args(git_repo, "--yes")]) == 0
    typed(git_repo, disk="2Gi")
    capsys.readouterr()
    assert cli.main(["plan", *args(git_repo)]) == 0  # the disk stays as it is: no change, said so
    out = capsys.readouterr().out
    assert (
        "warning: vm/silent-a: disk /var/lib/libvirt/images/silent-a.qcow2: capacity 2Gi in git, "
        "created with 1Gi: not applied, an existing disk is never resized; grow it by hand" in out
    ), out
    doc = plan_json(git_repo, capsys)
    assert any("created with 1Gi" in w for w in doc["warnings"])
    # Applied again (a definition made for another reason), the size it was created with stays.
    typed(git_repo, disk="2Gi", memory="96Mi")
    assert cli.main(["apply", *args(git_repo, "--roll-forward", "vm/silent-a", "--yes")]) == 0
    capsys.readouterr()
    assert cli.main(["plan", *args(git_repo)]) == 0
    assert "capacity 2Gi in git, created with 1Gi" in capsys.readouterr().out


def test_vms_of_other_hosts_are_listed_and_counted(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(git_repo, "silent-a")
    far = VM.format(name="silent-b", strategy="Always", machine="q35").replace(
        "    spec:\n", "    spec:\n      nodeSelector: {kubernetes.io/hostname: h2}\n", 1
    )
    git_repo.write("vms/silent-b.yaml", far)
    git_repo.commit("b on h2")
    capsys.readouterr()
    assert cli.main(["plan", *args(git_repo)]) == 2
    out = capsys.readouterr().out
    assert "  1 VM(s) of the revision run on other hosts: vm/silent-b (on h2)" in out
    assert "Plan: 1 to create, 0 to update, 0 to delete, 0 unchanged, 1 on other hosts." in out
    config = tmp_path / "config.yaml"
    config.write_text(f"source: {{repo: {git_repo.path}}}\nconnect: {URI}\nhost: {{name: h1}}\n")
    assert cli.main(["validate", "--repo", str(git_repo.path), "--config", str(config)]) == 0
    err = capsys.readouterr().err
    assert (
        f"warning: vms/silent-b.yaml: vm/silent-b: spec.template.spec.nodeSelector: kubernetes.io/hostname "
        f"'h2' names no host of {config} (hosts: h1): no daemon of it runs this VM" in err
    ), err
    assert "silent-a" not in err
    # The daemon: status lists them under its host, and counts them (JSON: hosts.<name>.otherHosts).
    state = tmp_path / "state"
    assert cli.main(["run", "--once", *args(git_repo), "--state-dir", str(state), "--listen", ""]) == 0
    capsys.readouterr()
    assert cli.main(["status", "--state-dir", str(state), "--connect", URI]) == 0
    assert (
        "host localhost: 1 VM(s) of the revision run on other hosts: vm/silent-b (on h2)"
        in capsys.readouterr().out
    )
    assert cli.main(["status", "--state-dir", str(state), "--connect", URI, "-o", "json"]) == 0
    hosts = json.loads(capsys.readouterr().out)["hosts"]
    assert hosts["localhost"]["otherHosts"] == [{"subject": "vm/silent-b", "host": "h2"}]


@pytest.mark.parametrize(
    ("annotation", "words"),
    [
        (
            "reconciler.kubevirt.io/adopt: true",
            "metadata.annotations[reconciler.kubevirt.io/adopt]: True is not a string; values are strings "
            'on a cluster too: quote it (reconciler.kubevirt.io/adopt: "true")',
        ),
        (
            "reconciler.kubevirt.io/rolout: Restart",
            "metadata.annotations: unknown annotation reconciler.kubevirt.io/rolout: did you mean "
            "reconciler.kubevirt.io/rollout?",
        ),
    ],
)
def test_annotations_are_checked_at_their_line(
    git_repo: GitRepo, capsys: pytest.CaptureFixture[str], annotation: str, words: str
) -> None:
    text = VM.format(name="silent-a", strategy="Always", machine="q35").replace(
        "  name: silent-a\n", f"  name: silent-a\n  annotations:\n    {annotation}\n"
    )
    git_repo.write("vms/silent-a.yaml", text)
    git_repo.commit("annotated")
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 1
    out = capsys.readouterr().out
    assert f"vms/silent-a.yaml:6:5: VirtualMachine silent-a: {words}" in out, out


def test_metrics_count_the_notices_and_the_vms_of_other_hosts() -> None:
    from reconciler.daemon.metrics import Metrics
    from reconciler.model import VMKey
    from reconciler.model.results import Sync, VMStatus

    m = Metrics()
    rows = [
        VMStatus(
            VMKey.from_domain("a"),
            "h1",
            "Always",
            "running",
            Sync.SYNCED,
            "abc",
            notes=(("pinned-revision", "x"),),
        ),
        VMStatus(VMKey.from_domain("b"), "h1", "Always", "running", Sync.SYNCED, "abc"),
    ]
    m.observe("h1", "Succeeded", 0.1, rows)
    m.observe_plan("h1", 3)
    text = m.render().decode()
    assert 'reconciler_vm_notices{host="h1",notice="pinned-revision"} 1.0' in text
    assert 'reconciler_vm_notices{host="h1",notice="disk-not-resized"} 0.0' in text
    assert 'reconciler_vms_other_hosts{host="h1"} 3.0' in text


def test_the_pr_diff_of_a_roll_forward_shows_what_the_daemon_stages(
    git_repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """The VM was applied with silent.small at 64Mi; a later commit grew the instancetype
    to 128Mi (the host keeps its pinned 64Mi); a commit that only adds the roll-forward
    annotation makes the daemon stage memory.guest 64Mi → 128Mi: the PR diff says so."""
    typed(git_repo)
    typed(git_repo, memory="128Mi")
    base = git_repo.git("rev-parse", "HEAD")
    typed(
        git_repo, memory="128Mi", annotations='  annotations: {reconciler.kubevirt.io/roll-forward: "true"}\n'
    )
    capsys.readouterr()
    argv = ["diff", "--repo", str(git_repo.path), "--base", base, "--head", "HEAD", "--format", "json"]
    assert cli.main(argv) == 2, capsys.readouterr()
    doc = json.loads(capsys.readouterr().out)
    (vm,) = [v for v in doc["vms"] if v["name"] == "silent-a"]
    assert [(f["field"], f["before"], f["after"]) for f in vm["changes"]] == [
        ("memory.guest", "64Mi", "128Mi")
    ]
