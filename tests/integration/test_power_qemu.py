"""Powering VMs off and on, and restarting what is staged, through the CLI on QEMU; the
demo's status command (libvirtd: QEMU and the test driver).

Covers: a VM whose run strategy becomes Halted is planned as ``stop`` (counted as a
stop) and ``apply`` powers the guest off (gracefully, forced after its grace period:
no guest OS answers ACPI) with the new definition; back to Always it is ``start`` and
runs again; a restart-class change staged by one apply (RestartRequired) is restarted
by ``apply --restart-now`` with no restart window, and the running guest then boots the
new machine type. ``scripts/demo`` run once on libvirtd's test driver prints a status
command that, run as printed, shows the demo's VMs running and Synced.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.git import GitRepo

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "rtest-power-"
NAME = f"{PREFIX}a"
CLI = [sys.executable, "-m", "reconciler.cli", "--log-level", "error", "--no-color"]
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
        devices: {{autoattachGraphicsDevice: false}}
"""

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def repo(qemu_workdir: Path, tmp_path: Path) -> tuple[GitRepo, list[str]]:
    repo = GitRepo(qemu_workdir)
    host = tmp_path / "host.yaml"
    host.write_text("name: h1\ndomainType: qemu\nnetworks:\n  pod: {user: {}}\ndefaults: {graphics: none}\n")
    flags = ["--repo", str(qemu_workdir), "--connect", "qemu:///system", "--host-config", str(host)]
    return repo, [*flags, "--owner", "rtest-power"]


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *argv], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )


def write(repo: GitRepo, strategy: str = "Always", machine: str = "q35") -> None:
    repo.write(f"vms/{NAME}.yaml", VM.format(name=NAME, strategy=strategy, machine=machine))
    repo.commit(f"{strategy} {machine}")


def action(flags: list[str], *more: str) -> dict[str, object]:
    proc = run("plan", *flags, *more, "-o", "json")
    assert proc.returncode in (0, 2), proc
    (doc,) = json.loads(proc.stdout)["plans"]
    (c,) = [c for c in doc["changes"] if c["name"] == NAME]
    assert isinstance(c, dict)
    return {"action": c["action"], "restartRequired": c["restartRequired"], "summary": doc["summary"]}


def test_stop_start_and_restart_now_on_qemu(repo: tuple[GitRepo, list[str]], qemu_uri: str) -> None:
    git, flags = repo
    write(git)
    proc = run("apply", *flags, "--yes")
    assert proc.returncode == 0, proc
    with Hypervisor(qemu_uri) as hv:
        assert hv.state(NAME) == PowerState.RUNNING

        write(git, strategy="Halted")
        got = action(flags)
        assert got["action"] == "stop"
        assert got["summary"]["stop"] == 1  # type: ignore[index]
        proc = run("apply", *flags)  # no terminal: a stop needs --yes
        assert proc.returncode == 1
        assert "needs --yes" in proc.stderr
        assert hv.state(NAME) == PowerState.RUNNING
        proc = run("apply", *flags, "--yes")
        assert proc.returncode == 0, proc
        assert "1 stopped" in proc.stdout
        assert hv.state(NAME) == PowerState.SHUTOFF
        assert run("plan", *flags).returncode == 0  # the Halted mark came with the stop

        write(git, strategy="Always")
        assert action(flags)["action"] == "start"
        proc = run("apply", *flags, "--yes")
        assert proc.returncode == 0, proc
        assert "1 started" in proc.stdout
        assert hv.state(NAME) == PowerState.RUNNING

        write(git, machine="pc")  # restart-class: staged under the default rollout
        proc = run("apply", *flags, "--yes")
        assert proc.returncode == 0, proc
        staged = action(flags)
        assert (staged["action"], staged["restartRequired"]) == ("unchanged", True)
        assert action(flags, "--restart-now")["action"] == "restart"
        proc = run("apply", *flags, "--restart-now", "--yes")
        assert proc.returncode == 0, proc
        assert "1 restarted" in proc.stdout
        assert hv.state(NAME) == PowerState.RUNNING
        assert re.search(r"machine=['\"]pc-i440fx", hv.running_xml(NAME)), (
            "the running guest booted the new machine"
        )
        assert action(flags)["restartRequired"] is False


def test_the_demo_prints_a_status_command_that_works(tmp_path: Path, qemu_uri: str) -> None:
    demo = tmp_path / "demo"
    env = {
        **os.environ,
        "DEMO_DIR": str(demo),
        "DEMO_URI": "test+unix:///default",
        "DEMO_LISTEN": "127.0.0.1:0",
        "RECONCILER": str(Path(sys.executable).parent / "reconciler"),
        "PYTHONPATH": str(ROOT),
    }
    names = ("web", "db", "build-agent", "legacy-app")
    with Hypervisor("test+unix:///default") as hv:
        try:
            proc = subprocess.run(
                [str(ROOT / "scripts" / "demo"), "--once"],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert proc.returncode == 0, proc
            (line,) = [line for line in proc.stdout.splitlines() if line.startswith("Status at any time: ")]
            command = shlex.split(line.removeprefix("Status at any time: "))
            status = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
            assert status.returncode == 0, status
            rows = {
                r.split()[0]: r.split()
                for r in status.stdout.splitlines()[2:]
                if r.strip() and r.split()[0] in names
            }
            assert set(rows) == set(names), status.stdout
            assert all(row[3] in ("running", "shutoff") and row[5] == "Synced" for row in rows.values()), (
                status.stdout
            )
        finally:
            for d in hv.list_domains():
                if d.name in names and d.mark is not None:
                    if d.active:
                        hv.destroy(d.name)
                    hv.undefine(d.name)
