"""Shared pytest options and fixtures.

- ``--regen-golden``: rewrite expected golden files instead of comparing; a missing
  golden file is written and the test fails, so a human reviews it.
- ``golden``: compare text against a golden file under tests/data.
- ``git_repo``: a throw-away git repository with a helper to commit files.
- ``start``: `reconciler run` subprocesses, stopped at the end of the test.
- ``plain_registry``, ``auth_registry``, ``tls_registry``: Debian's docker-registry on
  loopback, one of each per session (``tests/helpers/registry.py``).
- Under pytest-xdist (``make test``: ``-n 2 --dist loadgroup``), the tests that touch the
  real libvirtd (tests/integration and tests/faults: a test that needs libvirtd lives
  there) are one unit of work: they run one after the other on one worker, as without
  xdist (faults restart libvirtd; the session sweeper runs once on that worker), while the
  other workers run the pure and ``test:///default`` tests beside them (and the few
  modules there that touch no libvirtd: ``NO_LIBVIRTD``). That lane sets the run's wall
  time, so while a worker runs other tests of such a session it runs them (and the
  processes they start) at a lower priority (``BESIDE_NICE``): the lane's daemons, QEMU
  boots and waits get the CPU first; the lane's own tests run at the usual priority.

Shared helpers (and the fixtures' types) live in ``tests.helpers``.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

import pytest

from tests.helpers.daemon import start
from tests.helpers.git import GitRepo
from tests.helpers.registry import auth_registry, plain_registry, tls_registry

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = ["auth_registry", "plain_registry", "start", "tls_registry"]  # fixtures defined with their helpers


LIBVIRTD_DIRS = ("tests/integration/", "tests/faults/")  # their conftests mark every test
LIBVIRTD_LANE = "libvirtd"  # the scheduling unit of those tests under xdist
NO_LIBVIRTD = ("tests/integration/test_install.py",)  # there, but no libvirtd: runs beside
BESIDE_NICE = 5  # the priority of a worker's tests beside the libvirtd lane (nice)
WITH_LANE = pytest.StashKey[bool]()  # this session has tests of the libvirtd lane


def libvirtd_lane(nodeid: str) -> str:
    """The scheduling unit of a test under ``--dist loadgroup``: one for all the tests that
    touch the real libvirtd, the test itself for every other test."""
    if nodeid.startswith(LIBVIRTD_DIRS) and not nodeid.startswith(NO_LIBVIRTD):
        return LIBVIRTD_LANE
    return nodeid


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's ``loadgroup`` with the libvirtd tests as one group, chosen by their directory
    (the ``xdist_group`` marks of the workers' items do not reach xdist's scheduler under
    pytest 9.2, which ignores a changed ``_nodeid``)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LibvirtdLane(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no types
        def _split_scope(self, nodeid: str) -> str:
            return libvirtd_lane(nodeid)

    return LibvirtdLane(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked ``integration`` or ``faults`` outside their directories would run beside
    the libvirtd lane under xdist: refused, with where it belongs."""
    config.stash[WITH_LANE] = any(libvirtd_lane(item.nodeid) == LIBVIRTD_LANE for item in items)
    astray = [
        item.nodeid
        for item in items
        if not item.nodeid.startswith(LIBVIRTD_DIRS)
        and (item.get_closest_marker("integration") or item.get_closest_marker("faults"))
    ]
    if astray:
        raise pytest.UsageError(
            f"{astray[0]}: a test that touches the real libvirtd lives under "
            f"{' or '.join(LIBVIRTD_DIRS)} (their tests run one after another under xdist)"
        )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under xdist, a worker runs a test beside the libvirtd lane at ``BESIDE_NICE`` and a
    test of the lane at its usual priority (a worker may run both kinds, one after the other)."""
    if not hasattr(item.config, "workerinput") or not item.config.stash.get(WITH_LANE, False):
        return
    nice = 0 if libvirtd_lane(item.nodeid) == LIBVIRTD_LANE else BESIDE_NICE
    if os.getpriority(os.PRIO_PROCESS, 0) != nice:
        with contextlib.suppress(PermissionError):  # back to 0 needs root: the lane's tests do
            os.setpriority(os.PRIO_PROCESS, 0, nice)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--regen-golden", action="store_true", help="rewrite golden files")


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[Path, str], None]:
    regen = bool(request.config.getoption("--regen-golden"))

    def check(path: Path, actual: str) -> None:
        if regen or not path.exists():
            existed = path.exists()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(actual)
            if not existed and not regen:
                pytest.fail(f"golden file {path} was missing and has been written: review it")
            return
        assert actual == path.read_text(), (
            f"output differs from {path} (run with --regen-golden after review)"
        )

    return check


@pytest.fixture
def git_repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")
