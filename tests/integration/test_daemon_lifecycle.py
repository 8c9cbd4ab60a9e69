"""`reconciler run` against real libvirtd + QEMU: lifecycle events and SIGTERM.

Covers: a guest of runStrategy Always that is destroyed behind the daemon's back is
started again, triggered by libvirt's lifecycle event (the resync interval is an hour
and no commit happens); SIGTERM while a graceful stop is in flight: the stop
finishes (forced after the grace period), the daemon exits 0.

Domains are named ``rtest-daemon-*-<pid>``; this module cleans up only its own domains (the
session sweeper of other modules is not used, so it never touches theirs).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.daemon import Daemon, wait_for

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.helpers.git import GitRepo

ROOT = Path(__file__).resolve().parents[2]
URI = "qemu:///system"
pytestmark = pytest.mark.timeout(180)


def vm(name: str, strategy: str = "Always", grace: int = 3) -> str:
    return f"""\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: {strategy}
  template:
    spec:
      terminationGracePeriodSeconds: {grace}
      domain:
        devices: {{}}
        memory:
          guest: 64Mi
"""


def remove(names: list[str]) -> None:
    for name in names:
        subprocess.run(["virsh", "-c", URI, "destroy", name], capture_output=True, check=False)
        subprocess.run(["virsh", "-c", URI, "undefine", "--nvram", name], capture_output=True, check=False)


@pytest.fixture
def own_domains() -> Iterator[list[str]]:
    subprocess.run([str(ROOT / "scripts" / "libvirtd-up")], check=True)
    names: list[str] = []
    yield names
    remove(names)


def state_of(name: str) -> PowerState | None:
    with Hypervisor(URI) as hv:
        live = hv.get_domain(name)
        return live.state if live else None


def config_file(tmp_path: Path, repo: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"source:\n  repo: {repo}\n"
        f"connect: {URI}\n"
        "host:\n  name: rtest-daemon-host\n  domainType: qemu\n  networks:\n    pod: {user: {}}\n"
        "intervals:\n  resync: 1h\n"
        "listen: 127.0.0.1:0\n"
        "log: {level: debug}\n"
    )
    return path


def test_destroyed_guest_is_started_again_on_the_lifecycle_event(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    name = f"rtest-daemon-life-{os.getpid()}"
    own_domains.append(name)
    remove([name])
    git_repo.write("vms/life.yaml", vm(name))
    sha = git_repo.commit()
    d = start("--config", str(config_file(tmp_path, git_repo.path)))
    d.wait_applied(sha)
    assert state_of(name) == PowerState.RUNNING

    def starts() -> int:
        return len([e for e in d.events("started") + d.events("created") if e.get("subject") == f"vm/{name}"])

    starts_before = starts()
    subprocess.run(["virsh", "-c", URI, "destroy", name], check=True, capture_output=True)
    wait_for("the guest started again", lambda: starts() > starts_before, timeout=60)
    wait_for("the guest running", lambda: state_of(name) == PowerState.RUNNING, timeout=60)
    assert d.state()["applied_revision"] == sha  # no new commit: the event did it


def test_sigterm_lets_a_graceful_stop_finish(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    name = f"rtest-daemon-term-{os.getpid()}"
    own_domains.append(name)
    remove([name])
    git_repo.write("vms/term.yaml", vm(name, grace=6))
    first = git_repo.commit()
    d = start("--config", str(config_file(tmp_path, git_repo.path)))
    d.wait_applied(first)
    assert state_of(name) == PowerState.RUNNING
    git_repo.write("vms/term.yaml", vm(name, strategy="Halted", grace=6))
    halt = git_repo.commit("halt")
    # The guest has no OS to answer ACPI: the stop waits the grace period (6 s), then
    # forces it. SIGTERM lands inside that window, as soon as the stop has started.
    wait_for(
        "the reconcile of the new commit",
        lambda: [e for e in d.events("reconciling") if e["revision"] == halt[:12]],
    )
    wait_for("the graceful stop under way", lambda: d.events("graceful stop started"))
    assert state_of(name) == PowerState.RUNNING  # the stop is in flight
    d.signal(signal.SIGTERM)
    assert d.proc.wait(timeout=60) == 0
    assert state_of(name) == PowerState.SHUTOFF  # the stop finished before the exit
    results = {r["subject"]: r for r in d.state()["last"]["results"]}
    assert results[f"vm/{name}"]["ok"] is True
    assert d.events("stopped")
