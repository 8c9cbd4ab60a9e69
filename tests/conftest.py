"""Shared pytest options and fixtures.

- ``--regen-golden``: rewrite expected golden files instead of comparing; a missing
  golden file is written and the test fails, so a human reviews it.
- ``golden``: compare text against a golden file under tests/data.
- ``git_repo``: a throw-away git repository with a helper to commit files.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

DATA = Path(__file__).parent / "data"


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


class GitRepo:
    """A real git repository in a temp dir, committed to by the test."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.email", "test@example.invalid")
        self.git("config", "user.name", "Test")
        self.git("config", "commit.gpgsign", "false")

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.path, check=True, capture_output=True, text=True
        ).stdout.strip()

    def write(self, rel: str, text: str) -> Path:
        p = self.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p

    def remove(self, rel: str) -> None:
        self.git("rm", "-q", "-r", rel)

    def commit(self, message: str = "change") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def git_repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")


def drop_domains(hv: Any, names: Iterable[str]) -> None:
    """Destroy and undefine the domains of ``names`` that exist (test cleanup)."""
    wanted = set(names)
    for d in hv.list_domains():
        if d.name in wanted:
            if d.active:
                hv.destroy(d.name)
            hv.undefine(d.name)
