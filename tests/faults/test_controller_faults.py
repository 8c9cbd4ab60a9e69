"""Issue 32's faults, told truthfully, on real libvirtd + QEMU.

- libvirtd hung (SIGSTOP): in ``test_hung_host.py`` (one freeze for issues 32 and 42).
- virtlogd killed: the start it breaks fails that VM alone (a system error is no
  "host unreachable"): the define-only VM of the same commit is defined, the host is
  reachable; virtlogd back (its socket answers), the VM is started at once by a
  "reconnect" trigger, not by the retry scheduled 5 min away after a long outage.
- a full volume directory: the VM whose disk cannot be created fails with the real
  cause; nothing is half-applied (no domain defined for it).
- a read-only state directory: ``/healthz`` 503 says why, ``reconciler_state_file_ok``
  is 0; writable again, the state is written and health is back.
- the wall clock stepped back two hours (an injected clock): a crashed ``Always`` VM
  in crash-loop back-off starts at once, its back-off not stretched by the step.
- two daemons on one state directory: the second refuses to start, naming the first.

Guests have no OS. Domain names are ``rtest-fault-*-<pid>``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler.config.daemon import DaemonConfig, HostEntry, Policy
from reconciler.daemon.notify import Notifier
from reconciler.daemon.scheduler import LIFECYCLE, RESYNC
from reconciler.daemon.service import Daemon as InProcess
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from reconciler.settings.host import HostConfig, NetworkTarget
from reconciler.source.settings import SourceConfig
from tests.helpers.clock import FakeClock
from tests.helpers.daemon import BIN, Daemon, vm_rows, wait_for
from tests.helpers.faults import HOST, URI, config, libvirtd_up, metric, name, state_of, vm
from tests.helpers.qemu import kill_qemu, wait_state

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def virtlogd() -> Iterator[None]:
    yield
    libvirtd_up()  # starts virtlogd again if a test killed it


def test_virtlogd_killed_fails_one_start_not_the_host(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str], virtlogd: None
) -> None:
    running, defined = name("logd-a"), name("logd-b")
    own_domains += [running, defined]
    git_repo.write("vms/keep.yaml", vm(name("logd-keep"), strategy="Halted"))
    own_domains.append(name("logd-keep"))
    first = git_repo.commit()
    d = start("--config", str(config(tmp_path, str(git_repo.path))))
    d.wait_applied(first)
    subprocess.run(["pkill", "-KILL", "-x", "virtlogd"], check=False)
    wait_for(
        "virtlogd gone", lambda: subprocess.run(["pgrep", "-x", "virtlogd"], capture_output=True).returncode
    )
    git_repo.write("vms/a.yaml", vm(running))
    git_repo.write("vms/b.yaml", vm(defined, strategy="Halted"))
    second = git_repo.commit("a started, b defined")
    state = d.wait_attempted(second)
    rows = vm_rows(state)
    assert rows[running]["sync"] == "Failed", rows[running]
    assert state_of(defined) == PowerState.SHUTOFF  # the define-only change of the same plan
    assert not d.events("apply stopped: host unreachable")
    _, body = d.get("/healthz")
    assert json.loads(body)["hosts"][HOST]["reachable"] is True
    # A long outage: the back-off grown to its longest (kept in state.json across a restart)
    assert d.stop() == 0
    kept = json.loads((d.state_dir / "state.json").read_text())
    (d.state_dir / "state.json").write_text(json.dumps({**kept, "retry": {"failures": 6, "source": False}}))
    d = start("--config", str(config(tmp_path, str(git_repo.path), extra="intervals: {resync: 1h}\n")))
    retry = wait_for("the start failed again", lambda: d.events("retry scheduled"))
    assert float(retry[0]["in_s"]) == 300.0  # the next scheduled retry: 5 min away
    libvirtd_up()  # virtlogd back: its socket answering triggers the reconcile, not the retry
    d.wait_applied(second)
    assert state_of(running) == PowerState.RUNNING
    assert d.events("host's log service answers again")
    _, text = d.get("/metrics")
    assert metric(text, "reconciler_triggers_total", kind="reconnect") == [1.0]
    assert not metric(text, "reconciler_triggers_total", kind="retry")


@pytest.fixture
def small_dir(tmp_path: Path) -> Iterator[Path]:
    where = Path("/var/lib/reconciler-rtest") / f"full-{os.getpid()}"
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(where)], check=True)
    try:
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={where}/filler", "bs=4k"], capture_output=True, check=False
        )
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)
        where.rmdir()


def test_a_full_volume_directory_fails_that_vm_with_the_real_cause(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str], small_dir: Path
) -> None:
    disk, plain = name("full-disk"), name("full-plain")
    own_domains += [disk, plain]
    git_repo.write(
        "vms/disk.yaml",
        vm(disk, strategy="Halted").replace(
            "        devices: {}\n",
            "        devices:\n          disks: [{name: scratch, disk: {bus: virtio}}]\n",
        )
        + "      volumes:\n        - name: scratch\n          emptyDisk: {capacity: 64Mi}\n",
    )
    git_repo.write("vms/plain.yaml", vm(plain, strategy="Halted"))
    sha = git_repo.commit()
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        f"source: {{repo: {git_repo.path}}}\nconnect: {URI}\nlisten: 127.0.0.1:0\n"
        f"host: {{name: {HOST}, domainType: qemu, networks: {{pod: {{user: {{}}}}}}, "
        f"allowedDirectories: [{small_dir}], volumeDirectory: {small_dir}}}\n"
    )
    d = start("--config", str(cfg))
    state = d.wait_attempted(sha)
    rows = vm_rows(state)
    assert rows[disk]["sync"] == "Failed"
    assert "No space left on device" in rows[disk]["message"], rows[disk]
    assert state_of(disk) is None  # nothing half-applied
    assert state_of(plain) == PowerState.SHUTOFF


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Callable[[bool], None]]:
    """Make ``tmp_path/state`` read-only (a bind mount remounted ro: root writes anyway
    through permissions) and writable again."""
    where = tmp_path / "state"
    where.mkdir()
    mounted: list[bool] = []

    def set_ro(ro: bool) -> None:
        if ro:
            subprocess.run(["mount", "--bind", str(where), str(where)], check=True)
            subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], check=True)
            mounted.append(True)
        elif mounted:
            subprocess.run(["umount", str(where)], check=True)
            mounted.clear()

    yield set_ro
    set_ro(False)


def test_a_read_only_state_directory_is_said_and_written_again(
    tmp_path: Path,
    git_repo: GitRepo,
    start: Callable[..., Daemon],
    own_domains: list[str],
    read_only: Callable[[bool], None],
) -> None:
    dom = name("ro-state")
    own_domains.append(dom)
    git_repo.write("vms/a.yaml", vm(dom, strategy="Halted"))
    first = git_repo.commit()
    d = start("--config", str(config(tmp_path, str(git_repo.path))))
    d.wait_applied(first)
    read_only(True)
    git_repo.write("vms/a.yaml", vm(dom, strategy="Halted", memory="96Mi"))
    second = git_repo.commit()
    _, body = wait_for("healthz 503", lambda: (r := d.get("/healthz"))[0] == 503 and r, timeout=60)
    assert any("state file: cannot write" in p for p in json.loads(body)["problems"])
    _, text = d.get("/metrics")
    assert "reconciler_state_file_ok 0.0" in text
    assert d.state()["applied_revision"] == first  # the file could not move
    read_only(False)
    d.wait_applied(second)
    wait_for("healthz 200", lambda: d.get("/healthz")[0] == 200, timeout=60)


def test_a_clock_stepped_back_does_not_stretch_a_crash_loop_back_off(
    tmp_path: Path, git_repo: GitRepo, own_domains: list[str]
) -> None:
    dom = name("clock")
    own_domains.append(dom)
    git_repo.write("vms/a.yaml", vm(dom))
    git_repo.commit()
    clock = FakeClock()
    host = HostConfig(name=HOST, domain_type="qemu", pod_network=NetworkTarget("user"))
    d = InProcess(
        DaemonConfig(
            source=SourceConfig(str(git_repo.path)),
            hosts=(HostEntry(URI, host),),
            state_dir=str(tmp_path / "s"),
            listen="",
            policy=Policy(),
        ),
        notifier=Notifier({}),
        clock=clock,
    )
    try:
        d.step({RESYNC})
        with Hypervisor(URI) as hv:
            kill_qemu(hv, dom)  # the first crash restarts at once
            d.step({LIFECYCLE})
            wait_state(hv, dom, PowerState.RUNNING)
            kill_qemu(hv, dom)  # the second waits 10 s (CrashLoopBackOff)
            d.step({LIFECYCLE})
            assert hv.state(dom) == PowerState.SHUTOFF
            assert {r.name: r.sync for r in d.hosts[0].rows}[dom] == "CrashLoopBackOff"
            clock.wall -= 7200  # the wall clock steps two hours back
            d.step({LIFECYCLE})
            assert hv.state(dom) == PowerState.RUNNING  # not held down for the size of the step
    finally:
        for h in d.hosts:
            h.shutdown()


def test_two_daemons_on_one_state_directory(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    dom = name("two-daemons")
    own_domains.append(dom)
    git_repo.write("vms/a.yaml", vm(dom, strategy="Halted"))
    sha = git_repo.commit()
    cfg = config(tmp_path, str(git_repo.path))
    first = start("--config", str(cfg))
    first.wait_applied(sha)
    second = subprocess.run(
        [str(BIN), "run", "--config", str(cfg), "--state-dir", str(first.state_dir)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert second.returncode == 1
    assert f"in use by another reconciler (pid {first.proc.pid} on" in second.stderr, second.stderr
    assert first.proc.poll() is None
