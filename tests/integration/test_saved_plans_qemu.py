"""Consent on a terminal and saved plans across processes (libvirtd: test+unix and QEMU).

Covers: on a terminal (stdin and stderr a pty), ``apply`` shows the plan and asks
before any change, not only deletions; "n" applies nothing; a domain changed while
the question waits refuses the plan shown (naming the domain) instead of planning
again, and nothing of it is applied; "y" applies the plan shown. On QEMU, a plan saved
by one process and applied by another (``plan --out``, ``apply FILE``) builds the
cloud-init ISO of a Secret generated in the repository, whose value the file never
held, and starts the VM.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from reconciler.host.hypervisor import Hypervisor
from reconciler.host.provision import read_iso
from reconciler.model import PowerState
from tests.helpers.git import GitRepo

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

TEST_URI = "test+unix:///default"
PREFIX = "rtest-saved-"
CLI = [sys.executable, "-m", "reconciler.cli", "--log-level", "error", "--no-color"]
VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 1
      domain:
        cpu: {{cores: 1}}
        memory: {{guest: {memory}}}
        devices: {{autoattachGraphicsDevice: false}}
"""
NAMES = (f"{PREFIX}a", f"{PREFIX}b")

pytestmark = pytest.mark.timeout(300)


def _drop(hv: Hypervisor) -> None:
    for d in hv.list_domains():
        if d.name.startswith(PREFIX):
            if d.active:
                hv.destroy(d.name)
            hv.undefine(d.name)


@pytest.fixture
def test_host(qemu_uri: str) -> Iterator[Hypervisor]:
    """libvirtd's test driver; this connection keeps its state alive between the commands."""
    with Hypervisor(TEST_URI) as hv:
        _drop(hv)
        yield hv
        _drop(hv)


class Terminal:
    """The CLI run with stdin and stderr on a pseudo-terminal, stdout a pipe."""

    def __init__(self, *argv: str) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [*CLI, *argv], stdin=slave, stderr=slave, stdout=subprocess.PIPE, text=True
        )
        os.close(slave)
        self.seen = ""

    def wait_for(self, marker: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while marker not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"no {marker!r} on the terminal: {self.seen!r}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                self.seen += os.read(self.master, 4096).decode(errors="replace")

    def answer(self, text: str) -> tuple[int, str, str]:
        os.write(self.master, f"{text}\n".encode())
        out, _ = self.proc.communicate(timeout=120)
        while True:  # the rest of stderr, until the child closes the terminal
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                break
            if not chunk:
                break
            self.seen += chunk.decode(errors="replace")
        os.close(self.master)
        return self.proc.returncode, out, self.seen


def test_apply_asks_on_a_terminal_and_applies_the_plan_it_showed(
    test_host: Hypervisor, git_repo: GitRepo
) -> None:
    flags = ["--repo", str(git_repo.path), "--connect", TEST_URI, "--owner", "rtest-saved"]
    for name in NAMES:
        git_repo.write(f"vms/{name}.yaml", VM.format(name=name, memory="64Mi"))
    git_repo.commit("two VMs")
    # Creates: asked too, on a terminal.
    term = Terminal("apply", *flags)
    term.wait_for("[y/N]")
    assert "apply 2 changes to host localhost" in term.seen
    code, out, err = term.answer("n")
    assert code == 1, (out, err)
    assert "not applied: not confirmed" in err
    assert "Plan: 2 to create" in out
    assert not [d for d in test_host.list_domains() if d.name.startswith(PREFIX)]

    term = Terminal("apply", *flags)
    term.wait_for("[y/N]")
    code, out, err = term.answer("y")
    assert code == 0, (out, err)
    assert "Applied: 2 created" in out

    for name in NAMES:
        git_repo.write(f"vms/{name}.yaml", VM.format(name=name, memory="128Mi"))
    git_repo.commit("more memory")
    before = {n: test_host.persistent_xml(n) for n in NAMES}
    term = Terminal("apply", *flags)
    term.wait_for("[y/N]")
    test_host.destroy(NAMES[0])  # the host moves while the question waits
    code, out, err = term.answer("y")
    assert code == 1, (out, err)
    assert "the host changed since the plan; nothing applied, plan again" in err, err
    assert f"vm/{NAMES[0]}: was running when planned, now shutoff" in err, err
    assert {n: test_host.persistent_xml(n) for n in NAMES} == before  # not re-planned, not applied
    assert test_host.state(NAMES[0]) == PowerState.SHUTOFF


GEN = f"""apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {PREFIX}gen
spec:
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 1
      domain:
        memory:
          guest: 64Mi
        devices:
          autoattachGraphicsDevice: false
          disks:
            - name: cidata
              disk: {{bus: virtio}}
      volumes:
        - name: cidata
          cloudInitNoCloud:
            secretRef: {{name: gen-userdata}}
"""
KUSTOMIZATION = """resources: [vms/gen.yaml]
configurations: [namerefs.yaml]
secretGenerator:
  - name: gen-userdata
    files: [userdata=userdata.txt]
"""
NAMEREFS = """nameReference:
  - kind: Secret
    fieldSpecs:
      - {path: spec/template/spec/volumes/cloudInitNoCloud/secretRef/name, kind: VirtualMachine}
"""


def test_a_saved_plan_applied_by_another_process_builds_the_secret_iso(
    qemu_uri: str, qemu_workdir: Path
) -> None:
    repo = GitRepo(qemu_workdir)
    value = "#cloud-config\npassword: saved-plan-secret-5e2a\n"
    repo.write("vms/gen.yaml", GEN)
    repo.write("kustomization.yaml", KUSTOMIZATION)
    repo.write("namerefs.yaml", NAMEREFS)
    repo.write("userdata.txt", value)
    repo.commit("a VM with a generated Secret")
    host = qemu_workdir / "host.yaml"
    host.write_text(
        f"name: h1\nallowedDirectories: [{qemu_workdir}]\nvolumeDirectory: {qemu_workdir / 'volumes'}\n"
        "domainType: qemu\ndefaults: {graphics: none}\n"
    )
    saved = qemu_workdir / "plan.json"
    plan = [*CLI, "plan", "--repo", str(qemu_workdir), "--connect", qemu_uri, "--host-config", str(host)]
    proc = subprocess.run([*plan, "--out", str(saved)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc
    assert "saved-plan-secret" not in saved.read_text()
    proc = subprocess.run(
        [*CLI, "apply", str(saved), "--repo", str(qemu_workdir), "--host-config", str(host)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc
    assert "saved-plan-secret" not in proc.stdout + proc.stderr
    with Hypervisor(qemu_uri) as hv:
        assert hv.state(f"{PREFIX}gen") == PowerState.RUNNING
    (iso,) = list((qemu_workdir / "volumes").rglob("*.iso"))
    got = read_iso(str(iso))
    assert got is not None
    assert got[1]["user-data"] == value
