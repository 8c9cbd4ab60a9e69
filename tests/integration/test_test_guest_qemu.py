"""The minimal Linux test guest (``scripts/build-test-guest``, ``tests/helpers/guest.py``)
booted on real libvirtd + QEMU (TCG) by ``firmware.kernelBoot``, domains ``rtest-guest-*``.

Covers:
- the build is cached: a second run gives the same directory, its files readable by all;
- the guest boots through the project's pipeline and its agent answers ``guest-ping``
  through libvirt (the rendered domain carries the ``org.qemu.guest_agent.0`` channel);
- ``guest-exec`` of ``/bin/true`` and ``/bin/false`` exits 0 and 1, and
  ``test -f /tmp/healthy`` turns from 0 to 1 once the file is removed;
- libvirt's agent-sourced interface addresses give the configured IP;
- from the host, over a bridge the test makes: ``GET /`` and ``/healthz`` answer 200 and
  port 8080 accepts a connection; on a guest booted with ``rtest.http=0 rtest.tcp=0``
  both connections are refused; a guest booted with ``rtest.agent=0`` does not answer
  ``guest-ping`` while its web server does; a guest booted with ``rtest.ip=dhcp`` gets an
  address from the bridge's DHCP server and serves on it;
- a graceful stop (ACPI power button) and the agent's ``guest-shutdown`` power the
  guest off (last: it stops two of the guests).

The boot-to-agent time of each guest is printed (``-s`` shows it).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

import libvirt
import pytest

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.guest import (
    BootedGuest,
    GuestBridge,
    GuestSpec,
    agent_command,
    agent_ping,
    boot_test_guests,
    build_test_guest,
    connect,
    guest_bridge,
    guest_exec,
    http_get,
    remove_guest,
)
from tests.helpers.qemu import sweep_prefix, wait_state

if TYPE_CHECKING:
    from collections.abc import Iterator

PREFIX = "rtest-guest-"
UP, CLOSED, MUTE, LEASED = PREFIX + "up", PREFIX + "closed", PREFIX + "mute", PREFIX + "leased"


@pytest.fixture(scope="module")
def bridge(qemu_uri: str) -> Iterator[GuestBridge]:
    with guest_bridge(dhcp=True) as b:
        yield b


@pytest.fixture(scope="module")
def guests(qemu_uri: str, bridge: GuestBridge) -> Iterator[dict[str, BootedGuest]]:
    sweep_prefix(qemu_uri, PREFIX)
    workdir = Path("/var/lib/reconciler-rtest") / f"guest-{uuid.uuid4().hex[:8]}"
    workdir.mkdir(parents=True)
    specs = [
        GuestSpec(UP, host_octet=2),
        GuestSpec(CLOSED, host_octet=3, http=False, tcp=False),
        GuestSpec(MUTE, host_octet=4, agent=False),
        GuestSpec(LEASED, dhcp=True),
    ]
    try:
        booted = boot_test_guests(workdir, specs, bridge=bridge, uri=qemu_uri)
        for g in booted:
            if g.boot_s:
                print(f"\n{g.name}: guest agent answered {g.boot_s:.1f}s after the reconcile began")
        yield {g.name: g for g in booted}
    finally:
        for s in specs:
            remove_guest(qemu_uri, s.name)
        shutil.rmtree(workdir, ignore_errors=True)


def test_build_is_cached_and_readable(qemu_uri: str) -> None:
    first = build_test_guest()
    assert build_test_guest() == first
    for f in ("vmlinuz", "initrd.img"):
        assert (first / f).stat().st_mode & 0o004, f"{f} not readable by QEMU's user"
    assert first.stat().st_mode & 0o005 == 0o005


def test_agent_answers_and_channel_is_rendered(qemu_uri: str, guests: dict[str, BootedGuest]) -> None:
    assert agent_command(qemu_uri, UP, "guest-ping") == {}
    conn = libvirt.open(qemu_uri)
    try:
        root = ET.fromstring(conn.lookupByName(UP).XMLDesc(0))
    finally:
        conn.close()
    names = [t.get("name") for t in root.iterfind("devices/channel/target")]
    assert "org.qemu.guest_agent.0" in names
    assert root.findtext("os/kernel", "").endswith("/vmlinuz")


def test_guest_exec_exit_codes(qemu_uri: str, guests: dict[str, BootedGuest]) -> None:
    assert guest_exec(qemu_uri, UP, "/bin/true") == 0
    assert guest_exec(qemu_uri, UP, "/bin/false") == 1
    assert guest_exec(qemu_uri, UP, "/bin/test", "-f", "/tmp/healthy") == 0
    assert guest_exec(qemu_uri, UP, "/bin/rm", "/tmp/healthy") == 0
    assert guest_exec(qemu_uri, UP, "/bin/test", "-f", "/tmp/healthy") == 1


def test_agent_reports_the_configured_address(qemu_uri: str, guests: dict[str, BootedGuest]) -> None:
    conn = libvirt.open(qemu_uri)
    try:
        ifaces = conn.lookupByName(UP).interfaceAddresses(libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT)
    finally:
        conn.close()
    addrs = {a["addr"] for i in ifaces.values() for a in (i["addrs"] or [])}
    assert guests[UP].ip in addrs, ifaces


def test_http_and_tcp_from_the_host(guests: dict[str, BootedGuest]) -> None:
    ip = guests[UP].ip
    assert ip is not None
    status, body = http_get(ip, "/")
    assert (status, body) == (200, f"ok {UP}\n".encode())
    assert http_get(ip, "/healthz")[0] == 200
    assert http_get(ip, "/missing")[0] == 404
    sock = connect(ip, 8080)
    assert isinstance(sock, socket.socket), sock
    sock.close()


def test_switched_off_services_refuse(guests: dict[str, BootedGuest]) -> None:
    ip = guests[CLOSED].ip
    assert ip is not None
    assert isinstance(connect(ip, 80), ConnectionRefusedError)
    assert isinstance(connect(ip, 8080), ConnectionRefusedError)


def test_guest_without_agent_serves_but_does_not_ping(qemu_uri: str, guests: dict[str, BootedGuest]) -> None:
    ip = guests[MUTE].ip
    assert ip is not None
    assert http_get(ip, "/healthz")[0] == 200  # booted: init ran
    assert not agent_ping(qemu_uri, MUTE)


def test_guest_with_a_lease_serves_on_it(guests: dict[str, BootedGuest]) -> None:
    ip = guests[LEASED].ip
    assert ip is not None
    assert 100 <= int(ip.rsplit(".", 1)[1]) <= 250
    assert http_get(ip, "/")[1] == f"ok {LEASED}\n".encode()


def test_power_button_and_agent_shutdown_power_off(qemu_uri: str, guests: dict[str, BootedGuest]) -> None:
    """Last: stops two of the guests. A graceful stop (ACPI) and ``guest-shutdown`` both
    end in a powered-off guest, so a stop never waits out the grace period."""
    with Hypervisor(qemu_uri) as hv:
        hv.shutdown(MUTE)
        with contextlib.suppress(libvirt.libvirtError):  # the agent may go before it answers
            agent_command(qemu_uri, CLOSED, "guest-shutdown")
        wait_state(hv, MUTE, PowerState.SHUTOFF, timeout=60)
        wait_state(hv, CLOSED, PowerState.SHUTOFF, timeout=60)
        assert hv.state(UP) == PowerState.RUNNING
