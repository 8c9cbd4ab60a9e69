"""The CLI's conventions, as a new user meets them (test:///default where a host is needed).

Covers: usage errors exit 1 (2 means "changes") with "did you mean"; a bare
``reconciler`` prints help; ``--version`` is the installed distribution's; global
flags after the subcommand; flag values checked like the config's
(``--log-level``, ``--max-prune-percent``); shell completion through argcomplete;
``plan`` names the host, URI, test-driver note and policy first and ends with a
summary; ``--connect`` defaults to ``LIBVIRT_DEFAULT_URI``; ``plan`` and ``diff``
agree on rollout from one host config (no flag); ``plan --config`` reads the
daemon's hosts and policy; ``apply`` plans first, then applies and sums up;
uncommitted edits are named by ``validate``; ``examples/config.yaml`` loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.config.daemon_file import load_config
from reconciler.host.hypervisor import Hypervisor
from tests.helpers.domains import drop_domains

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.helpers.git import GitRepo

PROJECT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).with_name("reconciler")
URI = "test:///default"
VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        machine: {{type: {machine}}}
        cpu: {{cores: 1}}
        memory: {{guest: 64Mi}}
        devices: {{}}
"""
NAMES = ("cliconv-a",)


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN), *argv], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120
    )


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as h:
        yield h
        drop_domains(h, NAMES)


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["diff", "--formt", "markdown", "--base", "HEAD"], "did you mean --format?"),
        (["plna"], "did you mean plan?"),
        (["validate", "--log-level", "verbose"], "invalid choice: 'verbose'"),
        (["plan", "--max-prune-percent", "500"], "'500' is not an integer from 0 to 100"),
    ],
)
def test_usage_errors_exit_1_never_2(argv: list[str], hint: str) -> None:
    proc = run(*argv)
    assert proc.returncode == 1, proc
    assert proc.stdout == ""
    assert hint in proc.stderr, proc.stderr
    assert "usage:" in proc.stderr, proc.stderr


def test_bare_command_helps_and_version_is_the_distributions() -> None:
    proc = run()
    assert proc.returncode == 0
    assert "GitOps-style" in proc.stdout
    assert "exit codes:" in proc.stdout
    assert "plan" in proc.stdout
    proc = run("--version")
    assert proc.returncode == 0
    first, pinned = proc.stdout.strip().split("\n")
    assert first == f"reconciler {version('libvirt-gitops-reconciler')}"
    assert pinned.startswith("KubeVirt v")
    assert "schema and admission rules" in pinned
    sub = run("plan", "--help").stdout
    assert "examples:" in sub
    assert "exit codes: 0 no change, 2 changes, 1 error" in sub
    assert "(default: HEAD)" in sub


def test_shell_completion(tmp_path: Path) -> None:
    out = tmp_path / "completions"
    for line, want in (("reconciler pl", "plan"), ("reconciler diff --fo", "--format")):
        env = {
            "_ARGCOMPLETE": "1",
            "_ARGCOMPLETE_IFS": "\n",
            "COMP_LINE": line,
            "COMP_POINT": str(len(line)),
            "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
        }
        assert run(env=env).returncode == 0
        assert want in out.read_text().split(), out.read_text()


def _repo(git_repo: GitRepo, machine: str = "q35") -> str:
    git_repo.write("vms/cliconv-a.yaml", VM.format(name="cliconv-a", machine=machine))
    return git_repo.commit(f"machine {machine}")


def test_plan_states_target_policy_and_outcome(git_repo: GitRepo, hv: Hypervisor) -> None:
    sha = _repo(git_repo)
    proc = run("plan", "--repo", str(git_repo.path), "--log-level", "error", "--no-color")  # flags after
    assert proc.returncode == 2, proc
    lines = proc.stdout.splitlines()
    assert lines[0] == f"plan: host localhost at {URI}, revision {sha[:12]}, entry ."
    assert "in-memory test driver: nothing persists" in lines[1]
    assert lines[2].startswith("  policy: prune off, selfHeal on, rollout Stage, instancetypeRevisions pin")
    assert lines[-1] == "Plan: 1 to create, 0 to update, 0 to delete, 0 unchanged."


def test_connect_defaults_to_libvirt_default_uri(git_repo: GitRepo, tmp_path: Path) -> None:
    _repo(git_repo)
    missing = tmp_path / "no-such-host.xml"
    proc = run("plan", "--repo", str(git_repo.path), env={"LIBVIRT_DEFAULT_URI": f"test://{missing}"})
    assert proc.returncode == 1
    assert str(missing) in proc.stderr, proc.stderr


def test_plan_and_diff_agree_on_rollout_from_the_host_config(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = tmp_path / "host.yaml"
    host.write_text("name: h1\nrollout: Restart\n")
    base = _repo(git_repo)
    repo = ["--repo", str(git_repo.path)]
    assert cli.main(["apply", *repo, "--host-config", str(host)]) == 0
    head = _repo(git_repo, machine="pc")  # a machine type change: restart class
    capsys.readouterr()
    assert cli.main(["diff", *repo, "--base", base, "--head", head, "--host-config", str(host)]) == 2
    assert "will be restarted (rollout Restart)" in capsys.readouterr().out
    assert cli.main(["plan", *repo, "--host-config", str(host)]) == 2
    out = capsys.readouterr().out
    assert "rollout Restart" in out, out
    assert "vm/cliconv-a: restart" in out, out
    assert cli.main(["plan", *repo, "--host-config", str(host), "--rollout", "Stage"]) == 2
    assert "vm/cliconv-a: update [RestartRequired]" in capsys.readouterr().out


def test_plan_with_the_daemons_config(git_repo: GitRepo, hv: Hypervisor, tmp_path: Path) -> None:
    _repo(git_repo)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"source: {{repo: {git_repo.path}}}\n"
        f"hosts:\n  - connect: {URI}\n    host: {{name: h9, rollout: Restart}}\n"
        "policy: {prune: true, maxPrunePercent: 10, owner: team-a}\n"
    )
    proc = run("plan", "--config", str(config))
    assert proc.returncode == 2, proc
    assert proc.stdout.startswith(f"plan: host h9 at {URI}, revision ")
    assert "policy: prune on (at most 10% of managed domains), selfHeal on, rollout Restart" in proc.stdout
    assert "owner team-a" in proc.stdout


def test_apply_plans_first_then_sums_up(
    git_repo: GitRepo, hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    _repo(git_repo)
    assert cli.main(["apply", "--repo", str(git_repo.path)]) == 0
    out = capsys.readouterr().out
    assert out.index("Plan: 1 to create") < out.index(
        "Applied: 1 created, 0 updated, 0 deleted, 0 unchanged, 0 failed."
    )
    row = next(line for line in out.splitlines() if line.startswith("cliconv-a "))
    assert row.split()[5] == "Synced", row  # what apply did, not the plan's why
    assert row.endswith("  created"), row  # what apply did, not the plan's why
    d = hv.get_domain("cliconv-a")
    assert d is not None
    assert d.mark is not None


def test_validate_names_uncommitted_edits(git_repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    _repo(git_repo)
    git_repo.write("vms/cliconv-a.yaml", VM.format(name="cliconv-a", machine="pc"))
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 0
    err = capsys.readouterr().err
    assert "1 uncommitted change(s) to files the build uses are not read (vms/cliconv-a.yaml)" in err, err


def test_example_config_loads() -> None:
    config = load_config(str(PROJECT / "examples" / "config.yaml"))
    assert [h.config.name for h in config.hosts] == ["host1", "host2"]


def test_errors_say_what_to_do(git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    git_repo.write("base/vm.yaml", VM.format(name="cliconv-a", machine="q35"))
    git_repo.write("base/kustomization.yaml", "resources: [vm.yaml]\n")
    git_repo.write(
        "overlays/prod/kustomization.yaml", "resources: [../../base]\npatches:\n  - path: p.yaml\n"
    )
    git_repo.write(
        "overlays/prod/p.yaml",
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: cliconv-a}\nspec: {runStrategy: Halted}\n",
    )
    git_repo.commit("overlays")
    repo = ["--repo", str(git_repo.path)]
    # A wrong --path lists the entry directories, the closest first.
    assert cli.main(["validate", *repo, "--path", "overlays/prd"]) == 1
    assert "overlays/prd is not a directory; entry directories here: overlays/prod" in capsys.readouterr().out
    # No --path on a repository without a root kustomization: not the patches read as VMs.
    assert cli.main(["validate", *repo]) == 1
    out = capsys.readouterr().out
    assert ". has no kustomization file but directories below it do (base, overlays/prod)" in out, out
    # A tab in YAML says so.
    bad = tmp_path / "tab.yaml"
    bad.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n\tname: x\n")
    assert cli.main(["expand", "-f", str(bad)]) == 1
    assert f"{bad}:4:1: invalid YAML: " in (err := capsys.readouterr().err)
    assert "a tab character" in err
    # A shallow clone names fetch-depth.
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{git_repo.path}", str(shallow)], check=True
    )
    assert cli.main(["diff", "--repo", str(shallow), "--base", "HEAD~1", "--path", "overlays/prod"]) == 1
    assert "shallow clone" in (err := capsys.readouterr().err), err
    assert "fetch-depth: 0" in err, err


TYPED = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata: {{name: cliconv.small}}
spec: {{cpu: {{guest: 1}}, memory: {{guest: {memory}}}}}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {{name: cliconv-a}}
spec:
  runStrategy: Halted
  instancetype: {{name: cliconv.small}}
  template: {{spec: {{domain: {{devices: {{}}}}}}}}
"""


def test_plan_says_a_newer_revision_exists(
    git_repo: GitRepo, hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    git_repo.write("all.yaml", TYPED.format(memory="64Mi"))
    git_repo.commit("typed")
    repo = ["--repo", str(git_repo.path)]
    assert cli.main(["apply", *repo]) == 0
    git_repo.write("all.yaml", TYPED.format(memory="128Mi"))
    git_repo.commit("instancetype edited")
    capsys.readouterr()
    assert cli.main(["plan", *repo]) == 0  # pinned: nothing changes on the host
    out = capsys.readouterr().out
    assert (
        "warning: vm/cliconv-a: instancetype cliconv.small: a newer revision is in the repository" in out
    ), out


def test_output_formats(git_repo: GitRepo, hv: Hypervisor, capsys: pytest.CaptureFixture[str]) -> None:
    sha = _repo(git_repo)
    repo = ["--repo", str(git_repo.path)]
    assert cli.main(["plan", *repo, "-o", "json"]) == 2
    (doc,) = json.loads(capsys.readouterr().out)["plans"]
    assert (doc["host"], doc["uri"], doc["revision"], doc["applied"]) == ("localhost", URI, sha, False)
    assert doc["policy"]["rollout"] == "Stage"
    assert doc["summary"]["create"] == 1
    assert [(c["subject"], c["action"]) for c in doc["changes"]] == [("vm/cliconv-a", "create")]
    assert cli.main(["apply", *repo, "-o", "yaml"]) == 0
    out = capsys.readouterr().out
    assert "applied: true" in out, out
    assert "ok: true" in out, out
    assert cli.main(["validate", *repo, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "schemaVersion": 1,
        "revision": sha,
        "ref": "HEAD",
        "entry": "",
        "valid": True,
        "vms": ["cliconv-a"],
        "errors": [],
        "warnings": [],
    }


def test_a_reader_that_stops_early_is_no_error() -> None:
    """``reconciler build ... | head -1``: no broken-pipe error, exit 0 (the reader here
    closes its input at once, so every write meets a closed pipe)."""
    proc = subprocess.run(
        f"'{BIN}' build '{PROJECT}/tests/data/common-instancetypes' | (exec 0<&-; sleep 0.5); "
        'echo "exit ${PIPESTATUS[0]}"',
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
        executable="/bin/bash",
        env={**os.environ},
    )
    assert proc.stdout == "exit 0\n"
    assert proc.stderr == "", proc.stderr
