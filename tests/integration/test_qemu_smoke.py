"""Real libvirtd + QEMU: the hypervisor wrapper drives a real domain.

Covers: define with the ownership mark, read it back, start and see it running,
graceful stop falling back to a forced stop (no guest OS answers ACPI), undefine.
"""

from __future__ import annotations

from reconciler import ownership
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import OwnershipMark, PowerState

DOMAIN = """<domain type='qemu'>
  <name>rtest-smoke</name>
  <uuid>6f1c1f3e-5a8e-4c0e-9d55-1d2a3b4c5d6e</uuid>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type></os>
  <devices><serial type='pty'/><console type='pty'/></devices>
</domain>"""


def test_define_start_stop_undefine(qemu_uri: str) -> None:
    mark = OwnershipMark(commit="c0ffee", path="vms/smoke.yaml", spec_hash="abc", run_strategy="Always")
    with Hypervisor(qemu_uri) as hv:
        hv.define(ownership.with_mark(DOMAIN, mark), "rtest-smoke")
        live = hv.get_domain("rtest-smoke")
        assert live is not None
        assert live.mark == mark
        assert live.state == PowerState.SHUTOFF

        hv.start("rtest-smoke")
        assert hv.state("rtest-smoke") == PowerState.RUNNING
        running = hv.get_domain("rtest-smoke")
        assert running is not None
        assert "<alias" in running.live_xml

        stopped_by_guest = hv.stop("rtest-smoke", grace_s=1.0)
        assert stopped_by_guest is False  # no guest OS: forced after the grace period
        assert hv.state("rtest-smoke") == PowerState.SHUTOFF

        hv.undefine("rtest-smoke")
        assert hv.get_domain("rtest-smoke") is None
