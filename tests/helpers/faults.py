"""Shared pieces of the fault suite: VM documents, a daemon config, reads of the host,
and libvirtd itself (started, killed, its test domains removed).

Input: names, a repository, the host at ``URI``. Output: documents, config files,
domain states, metrics and ``reconciler status`` read back. ``kill_libvirtd`` and ``libvirtd_up`` stop and
start the machine's libvirtd: callers hold the shared lock (tests/faults/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from reconciler.host.hypervisor import Hypervisor
from tests.helpers.sweep import remove_all

if TYPE_CHECKING:
    from reconciler.model import PowerState

ROOT = Path(__file__).resolve().parents[2]
URI = "qemu:///system"
HOST = "rtest-fault-host"


def name(what: str) -> str:
    return f"rtest-fault-{what}-{os.getpid()}"


def vm(
    vm_name: str, strategy: str = "Always", memory: str = "64Mi", grace: int = 3, extra_domain: str = ""
) -> str:
    return f"""\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {vm_name}
spec:
  runStrategy: {strategy}
  template:
    spec:
      terminationGracePeriodSeconds: {grace}
      domain:
        devices: {{}}
        memory:
          guest: {memory}
{extra_domain}"""


def config(tmp_path: Path, repo: str, *, extra: str = "", listen: str = "127.0.0.1:0") -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"source:\n  repo: {repo}\n"
        f"connect: {URI}\n"
        f"host:\n  name: {HOST}\n  domainType: qemu\n  networks:\n    pod: {{user: {{}}}}\n"
        f"listen: {listen}\n"
        f"{extra}"
    )
    return path


def state_of(dom: str) -> PowerState | None:
    with Hypervisor(URI) as hv:
        live = hv.get_domain(dom)
        return live.state if live else None


def memory_kib(dom: str) -> int:
    with Hypervisor(URI) as hv:
        el = ET.fromstring(hv.persistent_xml(dom)).find("memory")
        assert el is not None
        assert el.text
        unit = el.get("unit", "KiB")
        return int(el.text) * {"KiB": 1, "MiB": 1024}[unit]


def metric(text: str, family: str, **labels: str) -> list[float]:
    """Values of ``family`` series whose labels include ``labels``."""
    out = []
    for line in text.splitlines():
        m = re.match(rf"^{re.escape(family)}\{{(.*)\}} (\S+)$", line)
        if not m:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(got.get(k) == v for k, v in labels.items()):
            out.append(float(m.group(2)))
    return out


def status_json(*args: str) -> dict[str, Any]:
    """``reconciler status -o json`` with ``args``, read back."""
    out = subprocess.run(
        [str(Path(sys.executable).parent / "reconciler"), "status", "-o", "json", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.stdout, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


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


def remove_domains(names: list[str]) -> None:
    import libvirt

    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    conn = libvirt.open(URI)
    try:
        doms = []
        for name in names:
            try:
                doms.append(conn.lookupByName(name))
            except libvirt.libvirtError:
                continue
        remove_all(doms)
    finally:
        conn.close()
