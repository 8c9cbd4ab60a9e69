"""Capture real libvirt read-back XML for the normaliser fixtures (needs libvirtd + QEMU).

Usage: ``.venv/bin/python -m tests.data.normalize.capture`` (root, after
scripts/libvirtd-up). For each case directory holding a ``desired.xml``, defines the
domain (name ``rtest-apply-capture``, disk sources pointed at a tiny temp qcow2),
writes ``persistent.xml`` (VIR_DOMAIN_XML_INACTIVE) and, when the case has a
``start`` file, starts it and writes ``running.xml``; a ``hotplug.xml`` is then
attached live and ``persistent-after.xml`` / ``running-after.xml`` are written after
the redefinition with the device, as apply does. The domain is removed afterwards.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from reconciler.compare import essence as normalize
from reconciler.host.hypervisor import Hypervisor

HERE = Path(__file__).parent
NAME = "rtest-apply-capture"
URI = "qemu:///system"


VOLUMES = "/var/lib/reconciler/volumes/capture"


def _prepare(xml: str, images: Path) -> str:
    """Rename the domain and create the disks it names under ``VOLUMES`` in ``images``."""
    xml = re.sub(r"<name>[^<]*</name>", f"<name>{NAME}</name>", xml, count=1)
    for file in set(re.findall(re.escape(VOLUMES) + r"/([\w.-]+)", xml)):
        path = images / file
        if not path.exists():
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), "1M"], check=True)
            path.chmod(0o666)
    return xml.replace(VOLUMES, str(images))


def capture(case: Path) -> None:
    images = Path(tempfile.mkdtemp(prefix="rtest-apply-", dir="/tmp"))
    images.chmod(0o755)
    desired = _prepare((case / "desired.xml").read_text(), images)
    with Hypervisor(URI) as hv:
        old = hv.get_domain(NAME)
        if old is not None:
            if old.active:
                hv.destroy(NAME)
            hv.undefine(NAME)
        try:
            hv.define(desired, NAME)
            (case / "persistent.xml").write_text(_stable(hv.persistent_xml(NAME), images))
            if (case / "start").exists():
                hv.start(NAME)
                (case / "running.xml").write_text(_stable(hv.running_xml(NAME), images))
                hotplug = case / "hotplug.xml"
                if hotplug.exists():
                    after = _prepare(hotplug.read_text(), images)
                    carried = normalize.carry_addresses(after, hv.persistent_xml(NAME))
                    hv.define(carried, NAME)
                    dev = normalize.device_xml(
                        hv.persistent_xml(NAME), (case / "hotplug-key").read_text().strip()
                    )
                    assert dev is not None
                    hv.attach_device(NAME, dev)
                    (case / "persistent-after.xml").write_text(_stable(hv.persistent_xml(NAME), images))
                    (case / "running-after.xml").write_text(_stable(hv.running_xml(NAME), images))
        finally:
            left = hv.get_domain(NAME)
            if left is not None:
                if left.active:
                    hv.destroy(NAME)
                hv.undefine(NAME)
            for p in images.iterdir():
                p.unlink()
            images.rmdir()


def _stable(xml: str, images: Path) -> str:
    """Make the capture independent of the temp dir and the run (ids, ports, labels)."""
    xml = xml.replace(str(images), VOLUMES)
    xml = re.sub(r"<domain type='qemu' id='\d+'>", "<domain type='qemu' id='1'>", xml)
    return xml


def main(argv: list[str]) -> int:
    cases = (
        [HERE / a for a in argv]
        if argv
        else sorted(p for p in HERE.iterdir() if (p / "desired.xml").exists())
    )
    for case in cases:
        capture(case)
        print(f"captured {case.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
