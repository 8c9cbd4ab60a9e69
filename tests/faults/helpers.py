"""Shared pieces of the fault suite: VM documents, a daemon config, reads of the host."""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler.host.hypervisor import Hypervisor
from tests.faults.conftest import URI

if TYPE_CHECKING:
    from pathlib import Path

    from reconciler.model import PowerState

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
