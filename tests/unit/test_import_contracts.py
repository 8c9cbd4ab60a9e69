"""The import contracts of pyproject.toml hold, and they catch an arrow pointing back.

Covers: ``lint-imports`` keeps every contract on the package as it is; a copy of the
package where ``reconciler/model.py`` imports the daemon breaks the foundation and
pure-pipeline contracts, naming the offending chain.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_package_keeps_every_contract() -> None:
    proc = lint(PROJECT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_an_arrow_pointing_back_breaks_the_contracts(tmp_path: Path) -> None:
    shutil.copytree(
        PROJECT / "reconciler", tmp_path / "reconciler", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(PROJECT / "pyproject.toml", tmp_path / "pyproject.toml")
    model = tmp_path / "reconciler" / "model.py"
    model.write_text(
        model.read_text() + "\nfrom reconciler import daemon as _daemon  # a deliberate back arrow\n"
    )
    proc = lint(tmp_path)
    assert proc.returncode == 1, proc.stdout
    assert "The foundation (model, errors, escape) imports nothing above it BROKEN" in proc.stdout
    assert "The pure pipeline imports nothing of the host, the daemon or the CLI BROKEN" in proc.stdout
    assert "reconciler.model -> reconciler.daemon" in proc.stdout
