"""Probes of a guest, run as KubeVirt runs them: through the QEMU guest agent, or over
the network to the guest's address.

Input: a libvirt URI (a connection of its own, never the reconcile's), a domain name, a
``Probe`` (``model/health.py``). Output: an ``Answer`` record per run (``run``), the
guest's address with where it came from (``address``), the guest ended (``end``,
libvirt's destroy: a failing liveness probe ends the guest as KubeVirt ends the VMI).

- ``guestAgentPing``: ``guest-ping`` through ``virDomainQemuAgentCommand``, bounded by
  the probe's timeout;
- ``exec``: ``guest-exec`` (no output captured), then ``guest-exec-status`` polled
  until the process exits or the timeout passes, as virt-probe does; exit status 0
  passes;
- ``tcpSocket``: a TCP connection opened within the timeout;
- ``httpGet``: a GET answered within the timeout with a status in 200-399 (the kubelet's
  rule), HTTPS without checking the certificate (as the kubelet does).

A network probe goes to its ``host`` when set, else to the guest's address: the guest
agent's interfaces first (``VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT``), then the
libvirt network's DHCP leases (``..._SRC_LEASE``), the first IPv4 address that is not a
loopback one. Every call is bounded by the probe's timeout and is made without the
connection's lock: libvirt serves calls from many threads on one connection, and a
guest that never answers holds only its own call.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import socket
import ssl
import time
from typing import Any

from reconciler.errors import DomainNotFound, HypervisorError
from reconciler.host.connection import Connection, libvirt_qemu
from reconciler.model.health import AddressSource, Answer, GuestAddress, Outcome, Probe, ProbeAction

EXEC_POLL_S = 0.1  # guest-exec-status polled this often while the command runs
HTTP_OK = range(200, 400)


class GuestProbes(Connection):
    """The prober's connection to one host."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self._qemu = libvirt_qemu()

    def _domain(self, name: str) -> Any:
        with self._translated("lookup"):
            return self._conn.lookupByName(name)

    def run(self, name: str, probe: Probe, address: GuestAddress | None) -> Answer:
        """One run of ``probe`` against domain ``name`` (``address``: the one known; looked
        up again when ``None``). Never raises for what the guest does."""
        try:
            if probe.action == ProbeAction.GUEST_AGENT_PING:
                return self._agent(name, {"execute": "guest-ping"}, probe.timeout_s)[0]
            if probe.action == ProbeAction.EXEC:
                return self._exec(name, probe)
            if probe.host:
                address = GuestAddress(probe.host, AddressSource.SPEC)
            elif address is None or address.source == AddressSource.SPEC:
                address = self.address(name)
            if address is None:
                return Answer(Outcome.NO_ADDRESS)
            if probe.action == ProbeAction.TCP_SOCKET:
                return tcp_answer(address, probe)
            return http_answer(address, probe)
        except HypervisorError:
            return Answer(Outcome.ERROR)

    def _agent(self, name: str, command: dict[str, Any], timeout_s: float) -> tuple[Answer, Any]:
        lv = self._libvirt
        dom = self._domain(name)
        try:
            reply = self._qemu.qemuAgentCommand(dom, json.dumps(command), max(1, round(timeout_s)), 0)
        except lv.libvirtError as err:
            if err.get_error_code() == lv.VIR_ERR_NO_DOMAIN:
                raise DomainNotFound(str(err)) from err
            if not self.alive():  # the host, not the guest: no answer to count
                return Answer(Outcome.ERROR), None
            return Answer(Outcome.NO_AGENT), None
        try:
            return Answer(Outcome.PASSED), json.loads(reply).get("return")
        except (ValueError, AttributeError):
            return Answer(Outcome.ERROR), None

    def _exec(self, name: str, probe: Probe) -> Answer:
        deadline = time.monotonic() + probe.timeout_s
        started, ret = self._agent(
            name,
            {
                "execute": "guest-exec",
                "arguments": {"path": probe.command[0], "arg": list(probe.command[1:])},
            },
            probe.timeout_s,
        )
        if not started.ok or not isinstance(ret, dict) or "pid" not in ret:
            return started if not started.ok else Answer(Outcome.ERROR)
        status = {"execute": "guest-exec-status", "arguments": {"pid": ret["pid"]}}
        while True:
            left = deadline - time.monotonic()
            polled, ret = self._agent(name, status, max(left, 1.0))
            if not polled.ok:
                return polled
            if isinstance(ret, dict) and ret.get("exited"):
                code = int(ret.get("exitcode", -1))
                return Answer(Outcome.PASSED if code == 0 else Outcome.FAILED, code=code)
            if left <= 0:
                return Answer(Outcome.TIMEOUT)
            time.sleep(min(EXEC_POLL_S, left))

    def address(self, name: str) -> GuestAddress | None:
        """The guest's first IPv4 address: the guest agent's word, else the DHCP lease's."""
        lv = self._libvirt
        dom = self._domain(name)
        for source, flag in (
            (AddressSource.AGENT, lv.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT),
            (AddressSource.LEASE, lv.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE),
        ):
            try:
                ifaces = dom.interfaceAddresses(flag, 0) or {}
            except lv.libvirtError:
                continue
            for iface in ifaces.values():
                for addr in iface.get("addrs") or ():
                    if addr.get("type") == lv.VIR_IP_ADDR_TYPE_IPV4 and _usable(addr.get("addr", "")):
                        return GuestAddress(str(addr["addr"]), source)
        return None

    def run_id(self, name: str) -> int:
        """The ID of the domain's run (libvirt's domain ID; -1 when it does not run)."""
        dom = self._domain(name)
        with self._translated("read"):
            return int(dom.ID())

    def end(self, name: str) -> None:
        """End the guest at once (libvirt's destroy)."""
        dom = self._domain(name)
        with self._translated("destroy"):
            dom.destroy()


def _usable(text: str) -> bool:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    return not (ip.is_loopback or ip.is_link_local)


def tcp_answer(address: GuestAddress, probe: Probe) -> Answer:
    """A TCP connection to the address's ``probe.port`` within the probe's timeout."""
    try:
        with socket.create_connection((address.address, probe.port), timeout=probe.timeout_s):
            return Answer(Outcome.PASSED, address=address)
    except TimeoutError:
        return Answer(Outcome.TIMEOUT, address=address)
    except OSError:
        return Answer(Outcome.REFUSED, address=address)


def http_answer(address: GuestAddress, probe: Probe) -> Answer:
    """A GET of ``probe.path`` answered with 200-399 within the probe's timeout."""
    conn: http.client.HTTPConnection
    if probe.scheme == "HTTPS":
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        conn = http.client.HTTPSConnection(
            address.address, probe.port, timeout=probe.timeout_s, context=context
        )
    else:
        conn = http.client.HTTPConnection(address.address, probe.port, timeout=probe.timeout_s)
    try:
        conn.request("GET", probe.path, headers=dict(probe.headers))
        status = conn.getresponse().status
    except TimeoutError:
        return Answer(Outcome.TIMEOUT, address=address)
    except (OSError, http.client.HTTPException):
        return Answer(Outcome.REFUSED, address=address)
    finally:
        with contextlib.suppress(OSError):
            conn.close()
    return Answer(Outcome.PASSED if status in HTTP_OK else Outcome.FAILED, code=status, address=address)
