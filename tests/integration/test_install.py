"""`make install` (scripts/install) on a host, into scratch directories.

Covers: the command lands where the unit's ExecStart points and runs; the README the
unit's Documentation= names is installed there; the installed unit passes
``systemd-analyze verify`` as installed (no edit); the example configs are
installed beside config.yaml and an existing config.yaml is never overwritten; a
second run succeeds (idempotent).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_install_puts_the_command_where_the_unit_points(tmp_path: Path) -> None:
    dirs = {
        "LIBDIR": tmp_path / "opt" / "reconciler",
        "BINDIR": tmp_path / "bin",
        "UNITDIR": tmp_path / "units",
        "CONFDIR": tmp_path / "etc" / "reconciler",
        "DOCDIR": tmp_path / "doc" / "reconciler",
    }
    env = {**os.environ, **{k: str(v) for k, v in dirs.items()}}
    for _ in range(2):  # the second run must succeed as well
        proc = subprocess.run(
            [str(ROOT / "scripts" / "install")], env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stderr + proc.stdout
        (dirs["CONFDIR"] / "config.yaml").write_text("# mine\n")
    assert (dirs["CONFDIR"] / "config.yaml").read_text() == "# mine\n"
    assert (dirs["CONFDIR"] / "config.yaml.example").read_text() == (
        ROOT / "examples" / "config.yaml"
    ).read_text()

    unit_text = (dirs["UNITDIR"] / "reconciler.service").read_text()
    (doc,) = [line.split("=", 1)[1] for line in unit_text.splitlines() if line.startswith("Documentation=")]
    assert doc == f"file://{dirs['DOCDIR']}/README.md"
    assert (dirs["DOCDIR"] / "README.md").read_text() == (ROOT / "README.md").read_text()
    assert (dirs["DOCDIR"] / "docs" / "mapping.md").exists()

    binary = dirs["BINDIR"] / "reconciler"
    assert subprocess.run([str(binary), "--help"], capture_output=True, check=False).returncode == 0
    unit = dirs["UNITDIR"] / "reconciler.service"
    exec_start = next(line for line in unit.read_text().splitlines() if line.startswith("ExecStart="))
    assert exec_start.startswith(f"ExecStart={binary} ")
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze is missing: scripts/setup installs systemd with libvirt-daemon")
    verify = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert verify.returncode == 0, verify.stderr
    assert verify.stderr.strip() == "", verify.stderr
