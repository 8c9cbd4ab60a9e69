"""Shared pytest options and fixtures.

- ``--regen-golden``: rewrite expected golden files instead of comparing; a missing
  golden file is written and the test fails, so a human reviews it.
- ``golden``: compare text against a golden file under tests/data.
- ``git_repo``: a throw-away git repository with a helper to commit files.
- ``start``: `reconciler run` subprocesses, stopped at the end of the test.
- ``plain_registry``, ``auth_registry``, ``tls_registry``: Debian's docker-registry on
  loopback, one of each per session (``tests/helpers/registry.py``).

Shared helpers (and the fixtures' types) live in ``tests.helpers``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.helpers.daemon import start
from tests.helpers.git import GitRepo
from tests.helpers.registry import auth_registry, plain_registry, tls_registry

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = ["auth_registry", "plain_registry", "start", "tls_registry"]  # fixtures defined with their helpers


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
