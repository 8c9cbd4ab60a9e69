"""The shipped deployment files: examples/config.yaml and systemd/reconciler.service.

Covers: the example configuration parses (its /etc/reconciler file references pointed
at a scratch directory) into the documented two-host layout; the unit passes
``systemd-analyze verify`` with no warning (ExecStart pointed at this checkout's
binary, the only change), is Type=notify with a watchdog, and carries the hardening
the README promises.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.config.daemon_file import parse_config

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "reconciler.service"
EXAMPLE = ROOT / "examples" / "config.yaml"


def test_example_config_parses(tmp_path: Path) -> None:
    # As shipped: it loads with no file in place (the file-naming sections are commented out).
    c = parse_config(EXAMPLE.read_bytes(), str(EXAMPLE))
    assert c.source.remote
    assert c.source.verify is None
    assert c.webhook_secret == b""
    # Uncommented, with the files it names in place.
    for name in ("git-token", "allowed_signers", "webhook-secret", "deploy_key", "known_hosts"):
        (tmp_path / name).write_text("x\n")
    text = EXAMPLE.read_text().replace("/etc/reconciler/", f"{tmp_path}/")
    for key in ("credentials:", "verify:", "username:", "passwordFile:", "sshKeyFile:", "knownHostsFile:"):
        text = text.replace(f"  # {key}", f"  {key}").replace(f"  #   {key}", f"    {key}")
    for key in ("mode:", "keys:"):
        text = text.replace(f"  #   {key}", f"    {key}")
    text = text.replace("# webhook:", "webhook:").replace("#   secretFile:", "  secretFile:")
    c = parse_config(text.encode(), str(tmp_path / "config.yaml"))
    assert c.source.remote
    assert c.source.path == "overlays/prod"
    assert [h.config.name for h in c.hosts] == ["host1", "host2"]
    assert c.hosts[1].uri.startswith("qemu+ssh://")
    assert c.source.verify is not None
    assert c.source.verify.mode == "ssh"
    assert c.source.credentials.username == "reconciler"
    assert c.webhook_secret == b"x"
    assert (c.fetch_interval_s, c.resync_interval_s) == (60.0, 30.0)


def unit_settings() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            k, v = line.split("=", 1)
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def test_unit_settings() -> None:
    s = unit_settings()
    assert s["Type"] == ["notify"]
    assert s["WatchdogSec"]
    assert s["Restart"] == ["on-failure"]
    assert s["NoNewPrivileges"] == ["yes"]
    assert s["ProtectSystem"] == ["strict"]
    assert s["ProtectHome"] == ["yes"]
    assert s["PrivateTmp"] == ["yes"]
    rw = s["ReadWritePaths"][0].split()
    assert "/var/lib/reconciler" in rw
    assert "/var/lib/libvirt/images" in rw
    assert "/var/lib/libvirt/qemu/nvram" in rw  # EFI guests' variable stores
    assert s["MemoryMax"] == ["512M"]
    assert s["ExecStart"][0].startswith("/usr/local/bin/reconciler ")  # where scripts/install links it
    assert any("-HUP" in v for v in s["ExecReload"])


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    binary = Path(sys.executable).parent / "reconciler"
    assert binary.exists()
    unit = tmp_path / "reconciler.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/reconciler", str(binary)))
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "", proc.stderr  # verify only warns on unknown keys and bad values


def test_systemd_analyze_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    binary = Path(sys.executable).parent / "reconciler"
    unit = tmp_path / "reconciler.service"
    unit.write_text(
        UNIT.read_text()
        .replace("/usr/local/bin/reconciler", str(binary))
        .replace("Type=notify", "Type=notifyy")
    )
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert "notifyy" in proc.stderr
