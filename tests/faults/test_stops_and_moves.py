"""Issue 42: a stop or a host move decided is never lost to a crash of the daemon (real
libvirtd + QEMU, and ``test+unix:///default`` as the second host).

Guests with no OS ignore ACPI, so each graceful stop waits out its grace period; the
daemon is killed (SIGKILL) while it waits, and started again on the same state:

- a stop (``runStrategy`` turned ``Halted``): the guest is stopped all the same, and
  while it still runs its row is never ``Synced``;
- a move (``kubernetes.io/hostname`` from the QEMU host to the test host) killed in its
  first phase (the old copy's stop): the old copy is stopped and undefined, then the
  new host defines and starts its copy; the VM never runs on both hosts at once.

No intent needs recording for either: what is left to do is read again from what the
hosts show (a running domain of a ``Halted`` VM; a copy on a host the VM left), as
``plan/intents.py`` says.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import pytest

from reconciler.errors import DomainNotFound
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.daemon import Daemon, vm_rows, wait_for
from tests.helpers.faults import URI, config, name, state_of, vm

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(240)
GRACE_S = 5  # the kill lands as soon as the stop has started: well inside it
TEST_URI = "test+unix:///default"


def _killed_in_flight(d: Daemon) -> None:
    wait_for("the graceful stop waiting", lambda: d.events("graceful stop started"), timeout=60)
    d.signal(signal.SIGKILL)
    d.proc.wait(timeout=30)


def test_sigkill_during_a_graceful_stop_loses_no_stop(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    dom = name("intent-stop")
    own_domains.append(dom)
    git_repo.write("vms/a.yaml", vm(dom, grace=GRACE_S))
    first = git_repo.commit("running")
    cfg = config(tmp_path, str(git_repo.path))
    d = start("--config", str(cfg))
    d.wait_applied(first)
    git_repo.write("vms/a.yaml", vm(dom, strategy="Halted", grace=GRACE_S))
    second = git_repo.commit("halted")
    _killed_in_flight(d)
    assert state_of(dom) == PowerState.RUNNING  # the stop never came

    again = start("--config", str(cfg))
    row = vm_rows(again.wait_attempted(second))[dom]
    assert state_of(dom) != PowerState.RUNNING or row["sync"] != "Synced", row
    wait_for("the guest stopped", lambda: state_of(dom) == PowerState.SHUTOFF, timeout=GRACE_S + 60)
    assert again.events("graceful stop started")  # decided again, not forgotten
    wait_for("Synced", lambda: vm_rows(again.state())[dom]["sync"] == "Synced")


def _on(uri: str, dom: str) -> PowerState | None:
    with Hypervisor(uri) as hv:
        try:
            live = hv.get_domain(dom)
        except DomainNotFound:  # undefined between its lookup and its read (the move's phase one)
            return None
        return live.state if live else None


def _placed(dom: str, host: str) -> str:
    return vm(dom, grace=GRACE_S).replace(
        "      domain:\n", f"      nodeSelector:\n        kubernetes.io/hostname: {host}\n      domain:\n", 1
    )


@pytest.fixture
def test_host_domain() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    with Hypervisor(TEST_URI) as hv:
        for dom in names:
            live = hv.get_domain(dom)
            if live is not None and live.active:
                hv.destroy(dom)
            if live is not None:
                hv.undefine(dom)


def test_sigkill_during_a_host_move_finishes_the_move(
    tmp_path: Path,
    git_repo: GitRepo,
    start: Callable[..., Daemon],
    own_domains: list[str],
    test_host_domain: list[str],
) -> None:
    dom = name("intent-move")
    own_domains.append(dom)
    test_host_domain.append(dom)
    git_repo.write("vms/a.yaml", _placed(dom, "host1"))
    first = git_repo.commit("on host1")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        f"source: {{repo: {git_repo.path}}}\nlisten: 127.0.0.1:0\n"
        "hosts:\n"
        f"  - connect: {URI}\n"
        "    host: {name: host1, domainType: qemu, networks: {pod: {user: {}}}}\n"
        f"  - connect: {TEST_URI}\n"
        "    host: {name: host2}\n"
    )
    d = start("--config", str(cfg))
    d.wait_applied(first)
    assert _on(URI, dom) == PowerState.RUNNING
    git_repo.write("vms/a.yaml", _placed(dom, "host2"))
    git_repo.commit("moved to host2")
    _killed_in_flight(d)
    assert (_on(URI, dom), _on(TEST_URI, dom)) == (PowerState.RUNNING, None)  # phase one in flight

    start("--config", str(cfg))

    def moved() -> bool:
        old, new = _on(URI, dom), _on(TEST_URI, dom)
        assert old is None or new is None, (old, new)  # never a copy on each host
        return old is None and new == PowerState.RUNNING

    wait_for("the move finished", moved, timeout=GRACE_S + 60)
