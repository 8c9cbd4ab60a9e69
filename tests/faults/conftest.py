"""Fault injection against real libvirtd + QEMU (markers ``faults`` and ``integration``).

These tests kill and restart the libvirtd that ``scripts/libvirtd-up`` started, so they
disturb every other libvirt user of the machine: run them holding the shared lock
(``flock /tmp/rtest.lock make test-faults``). Whatever a test does, libvirtd is left
running and answering when it ends. Guests have no OS (they never answer ACPI).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.helpers.faults import libvirtd_up, remove_domains

if TYPE_CHECKING:
    from collections.abc import Iterator


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def libvirtd() -> Iterator[None]:
    """libvirtd running at the start; running and answering again at the end, whatever happened."""
    libvirtd_up()
    try:
        yield
    finally:
        libvirtd_up()


@pytest.fixture
def own_domains(libvirtd: None) -> Iterator[list[str]]:
    """Names of ``rtest-fault-*`` domains this test creates; removed before and after."""
    names: list[str] = []
    yield names
    libvirtd_up()
    remove_domains(names)
