"""The CI examples in examples/ci run as a CI runner would run their shell steps.

Covers, for the GitHub Actions workflow and the GitLab job: with the package
installer "succeeding" but no ``reconciler`` command (the unrelated project of the
same name on the package index has none), the job fails, and the gate fails on exit
127; with the tool installed, a pull request that changes a VM passes (exit 2 is
"changes", not a failure) and a broken one fails (exit 1). Package managers are
replaced by stubs that do nothing (no network here); every other line runs as written.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ruamel.yaml import YAML

if TYPE_CHECKING:
    from tests.helpers.git import GitRepo

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "examples" / "ci"

VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory: {{guest: {memory}}}
"""


def stub_bin(tmp: Path, with_tool: bool) -> dict[str, str]:
    """An environment whose PATH has no-op package managers, and the tool or not."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name in ("pip", "apt-get"):
        stub = bin_dir / name
        stub.write_text("#!/bin/sh\nexit 0\n")
        stub.chmod(0o755)
    if with_tool:
        (bin_dir / "reconciler").symlink_to(Path(sys.executable).parent / "reconciler")
    path = os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])
    assert (shutil.which("reconciler", path=path) is not None) == with_tool
    return {"PATH": path, "HOME": str(tmp), "LANG": "C.UTF-8"}


def pull_request(git: GitRepo, memory: str) -> None:
    git.write("overlays/prod/kustomization.yaml", "resources: [../../vms]\n")
    git.write("vms/kustomization.yaml", "resources: [web.yaml]\n")
    git.write("vms/web.yaml", VM.format(memory="1Gi"))
    git.commit("base")
    git.write("vms/web.yaml", VM.format(memory=memory))
    git.commit("head")


def run_github(repo: Path, env: dict[str, str], tmp: Path) -> list[tuple[str, int]]:
    """Run the workflow's `run` steps in order like the runner: a failed step fails the
    job and skips later steps unless they say ``if: always()``. Returns (step, exit)."""
    wf: Any = YAML(typ="safe").load((CI / "github-actions.yaml").read_text())
    job = wf["jobs"]["diff"]
    outputs = tmp / "github_output"
    step_env = {
        **env,
        **{k: str(v) for k, v in wf["env"].items()},
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary"),
    }
    outputs.write_text("")
    results: list[tuple[str, int]] = []
    failed = False
    for step in job["steps"]:
        if "run" not in step or step.get("continue-on-error"):
            continue  # actions (checkout, artifacts) and the best-effort PR comment
        if failed and "always()" not in str(step.get("if", "")):
            continue
        values = dict(line.split("=", 1) for line in outputs.read_text().splitlines() if "=" in line)
        script = re.sub(r"\$\{\{ steps\.diff\.outputs\.code \}\}", values.get("code", ""), step["run"])
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=repo,
            env=step_env,
            capture_output=True,
            text=True,
            check=False,
        )
        results.append((step.get("name", step["run"].split()[0]), proc.returncode))
        failed = failed or proc.returncode != 0
    return results


def run_gitlab(repo: Path, env: dict[str, str], base: str) -> int:
    """Run the job's before_script and script lines like the runner (stop at the first failure)."""
    job: Any = YAML(typ="safe").load((CI / "gitlab-ci.yaml").read_text())["reconciler-diff"]
    job_env = {
        **env,
        **{k: str(v) for k, v in job["variables"].items()},
        "CI_MERGE_REQUEST_DIFF_BASE_SHA": base,
        "CI_COMMIT_SHA": "HEAD",
    }
    for line in [*job["before_script"], *job["script"]]:
        proc = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", line],
            cwd=repo,
            env=job_env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            return proc.returncode
    return 0


def test_github_job_fails_without_the_tool(git_repo: GitRepo, tmp_path: Path) -> None:
    pull_request(git_repo, "2Gi")
    results = dict(run_github(git_repo.path, stub_bin(tmp_path, with_tool=False), tmp_path))
    assert results["install reconciler"] == 127
    assert results["gate"] == 1  # the diff never ran: no exit code is not a pass
    assert "reconciler diff" not in results  # skipped after the failed install


def test_github_gate_fails_on_a_missing_command(git_repo: GitRepo, tmp_path: Path) -> None:
    pull_request(git_repo, "2Gi")
    env = stub_bin(tmp_path, with_tool=False)
    wf: Any = YAML(typ="safe").load((CI / "github-actions.yaml").read_text())
    gate = next(s for s in wf["jobs"]["diff"]["steps"] if s.get("name") == "gate")
    script = gate["run"].replace("${{ steps.diff.outputs.code }}", "127")
    proc = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script], env=env, capture_output=True, check=False
    )
    assert proc.returncode == 1


@pytest.mark.parametrize(("memory", "job_ok"), [("2Gi", True), ("lots", False)])
def test_github_job_with_the_tool(git_repo: GitRepo, tmp_path: Path, memory: str, job_ok: bool) -> None:
    pull_request(git_repo, memory)
    results = run_github(git_repo.path, stub_bin(tmp_path, with_tool=True), tmp_path)
    assert all(code == 0 for _, code in results) == job_ok, results
    summary = (tmp_path / "summary").read_text()
    assert ("vm/web" in summary) if job_ok else ("error" in summary.lower())


def test_gitlab_job_fails_without_the_tool(git_repo: GitRepo, tmp_path: Path) -> None:
    pull_request(git_repo, "2Gi")
    base = git_repo.git("rev-parse", "HEAD~1")
    assert run_gitlab(git_repo.path, stub_bin(tmp_path, with_tool=False), base) == 127


@pytest.mark.parametrize(("memory", "code"), [("2Gi", 0), ("lots", 1)])
def test_gitlab_job_with_the_tool(git_repo: GitRepo, tmp_path: Path, memory: str, code: int) -> None:
    pull_request(git_repo, memory)
    base = git_repo.git("rev-parse", "HEAD~1")
    assert run_gitlab(git_repo.path, stub_bin(tmp_path, with_tool=True), base) == code
