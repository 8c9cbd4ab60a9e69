"""Real libvirtd + QEMU fixtures (marker ``integration``).

The suite starts the daemons itself (scripts/libvirtd-up, idempotent), and a
session-scoped sweeper removes ``rtest-*`` domains before and after the run.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.helpers.sweep import sweep

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
QEMU_URI = "qemu:///system"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def qemu_uri() -> Iterator[str]:
    subprocess.run([str(ROOT / "scripts" / "libvirtd-up")], check=True)
    sweep(QEMU_URI)
    yield QEMU_URI
    sweep(QEMU_URI)


@pytest.fixture
def prefixed_repo(request: pytest.FixtureRequest, tmp_path: Path, qemu_uri: str) -> Iterator[Path]:
    """A repository directory with ``vms/``; the module's ``PREFIX`` domains swept before and after."""
    from tests.helpers.qemu import sweep_prefix

    prefix = str(request.module.PREFIX)
    sweep_prefix(qemu_uri, prefix)
    (tmp_path / "vms").mkdir()
    yield tmp_path
    sweep_prefix(qemu_uri, prefix)


@pytest.fixture
def qemu_workdir(request: pytest.FixtureRequest, qemu_uri: str) -> Iterator[Path]:
    """A repository work area QEMU can reach (a pytest tmp dir is private to root), with
    ``vms/``; the module's ``PREFIX`` domains swept before and after, the area removed."""
    import shutil
    import uuid

    from tests.helpers.qemu import sweep_prefix

    prefix = str(request.module.PREFIX)
    sweep_prefix(qemu_uri, prefix)
    base = Path("/var/lib/reconciler-rtest") / f"{prefix.removeprefix('rtest-')}{uuid.uuid4().hex[:8]}"
    (base / "vms").mkdir(parents=True)
    yield base
    sweep_prefix(qemu_uri, prefix)
    shutil.rmtree(base, ignore_errors=True)
