"""Fault injection against real libvirtd + QEMU (markers ``faults`` and ``integration``).

These tests kill and restart the libvirtd that ``scripts/libvirtd-up`` started, so they
disturb every other libvirt user of the machine: run them holding the shared lock
(``flock /tmp/rtest.lock make test-faults``). Whatever a test does, libvirtd is left
running and answering when it ends. Guests have no OS (they never answer ACPI).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.integration.sweep import remove

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
URI = "qemu:///system"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.integration)


def libvirtd_up() -> None:
    """Start libvirtd if it is not running and wait until its socket answers."""
    subprocess.run([str(ROOT / "scripts" / "libvirtd-up")], check=True)


def libvirtd_pids() -> list[int]:
    out = subprocess.run(["pgrep", "-x", "libvirtd"], capture_output=True, text=True, check=False).stdout
    return [int(p) for p in out.split()]


def kill_libvirtd(sig: int = signal.SIGKILL) -> None:
    """Take libvirtd down and wait until its process is gone (QEMU guests keep running)."""
    pids = libvirtd_pids()
    for pid in pids:
        os.kill(pid, sig)
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in pids):
        if time.monotonic() > deadline:
            pytest.fail(f"libvirtd {pids} did not exit")
        time.sleep(0.05)


@pytest.fixture
def libvirtd() -> Iterator[None]:
    """libvirtd running at the start; running and answering again at the end, whatever happened."""
    libvirtd_up()
    try:
        yield
    finally:
        libvirtd_up()


def remove_domains(names: list[str]) -> None:
    import libvirt

    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    conn = libvirt.open(URI)
    try:
        for name in names:
            try:
                dom = conn.lookupByName(name)
            except libvirt.libvirtError:
                continue
            remove(dom)
    finally:
        conn.close()


@pytest.fixture
def own_domains(libvirtd: None) -> Iterator[list[str]]:
    """Names of ``rtest-fault-*`` domains this test creates; removed before and after."""
    names: list[str] = []
    yield names
    libvirtd_up()
    remove_domains(names)
