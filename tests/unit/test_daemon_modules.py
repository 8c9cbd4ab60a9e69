"""The daemon's modules stay small: each under 500 lines, so no module of the loop
grows into a second loop (a new concern gets its own module; the daemon's exhaustive
layer contract in pyproject.toml makes lint-imports ask for its place)."""

from __future__ import annotations

from pathlib import Path

import pytest

import reconciler.daemon

DAEMON = Path(reconciler.daemon.__file__).parent
LIMIT = 500


@pytest.mark.parametrize("path", sorted(DAEMON.glob("*.py")), ids=lambda p: p.name)
def test_daemon_module_is_under_the_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines < LIMIT, f"daemon/{path.name}: {lines} lines"
