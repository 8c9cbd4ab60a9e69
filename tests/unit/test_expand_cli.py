"""``reconciler expand``: the command line around the expansion stage.

Covers: ``-f`` files (several, multi-document) print every VirtualMachine expanded as
YAML or JSON; a VM that fails goes to stderr with file:line and is absent from stdout
while the others print; exit status 1 on any error, 0 otherwise; warnings on stderr;
``--repo``/``--ref``/``--path`` read a commit through the git source, and a
``revisionName: git:<commit>`` matcher is served from that commit.
"""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

import yaml

from reconciler.cli import main

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

IT = """apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: small
spec:
  cpu: {guest: GUEST}
  memory: {guest: 1Gi}
  schedulerName: special
"""

GOOD = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: good
spec:
  runStrategy: Always
  instancetype: {name: small}
  template:
    spec:
      domain: {}
"""

BAD = """---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: bad
spec:
  runStrategy: Always
  instancetype:
    name: absent
  template:
    spec:
      domain: {}
"""


def test_files_print_expanded_vms_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "it.yaml").write_text(IT.replace("GUEST", "2"))
    (tmp_path / "vms.yaml").write_text(GOOD + BAD)
    code = main(["expand", "-f", str(tmp_path / "it.yaml"), "-f", str(tmp_path / "vms.yaml")])
    out, err = capsys.readouterr()
    assert code == 1
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [d["metadata"]["name"] for d in docs] == ["good"]
    assert docs[0]["spec"]["template"]["spec"]["domain"]["cpu"] == {"sockets": 2, "cores": 1, "threads": 1}
    assert f"{tmp_path / 'vms.yaml'}:19:5: vm/bad: " in err
    assert '"absent" not found' in err
    assert "warning: vm/good: instancetype small: schedulerName is accepted but has no effect" in err


def test_json_output_and_success(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "all.yaml").write_text(IT.replace("GUEST", "1") + "---\n" + GOOD)
    code = main(["expand", "-f", str(tmp_path / "all.yaml"), "--output", "json"])
    out, _ = capsys.readouterr()
    assert code == 0
    vm = json.loads(out)
    assert vm["kind"] == "VirtualMachine"
    assert vm["spec"]["template"]["spec"]["domain"]["memory"] == {"guest": "1Gi"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_repo_mode_and_git_revision_pins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    (repo / "vms").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.org")
    _git(repo, "config", "user.name", "t")
    (repo / "vms" / "it.yaml").write_text(IT.replace("GUEST", "1"))
    (repo / "vms" / "vm.yaml").write_text(GOOD)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one vCPU")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "vms" / "it.yaml").write_text(IT.replace("GUEST", "4"))
    (repo / "vms" / "vm.yaml").write_text(
        GOOD.replace("{name: small}", f"{{name: small, revisionName: 'git:{first[:10]}'}}")
    )
    (repo / "vms" / "plain.yaml").write_text(GOOD.replace("name: good", "name: plain"))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "four vCPUs")
    code = main(["expand", "--repo", str(repo), "--ref", "main", "--path", "vms"])
    out, err = capsys.readouterr()
    assert code == 0, err
    vms = {d["metadata"]["name"]: d for d in yaml.safe_load_all(out) if d}
    assert vms["good"]["spec"]["template"]["spec"]["domain"]["cpu"]["sockets"] == 1  # as at the first commit
    assert vms["plain"]["spec"]["template"]["spec"]["domain"]["cpu"]["sockets"] == 4
