"""The minimal Linux test guest on real libvirtd + QEMU: built, networked, booted, asked.

``scripts/build-test-guest`` makes a kernel and an initramfs (busybox, ``qemu-ga``) from
this host's Debian packages, cached under ``CACHE`` by their versions. A VM boots it by
``firmware.kernelBoot`` through the project's own pipeline (``reconcile_once`` with a host
config mapping the image ``IMAGE`` to the cache directory), ``domainType: qemu`` (TCG),
256Mi. Its kernel command line steers it, so a probe can be made to pass or fail:

- ``agent=False``: no ``qemu-ga`` (``guestAgentPing`` and ``exec`` probes fail);
- ``http=False``: no httpd on port 80 (``GET /`` and ``/healthz`` refused);
- ``tcp=False``: no listener on port 8080 (``tcpSocket`` refused);
- ``healthy=False``: no ``/tmp/healthy`` (``exec: test -f /tmp/healthy`` fails; removing
  it with ``guest_exec(uri, name, "/bin/rm", "/tmp/healthy")`` makes it fail later);
- ACPI power button and the agent's ``guest-shutdown`` power it off at once.

API (everything needs root and ``flock /tmp/rtest.lock``; domain names start ``rtest-``):

- ``build_test_guest() -> Path``: the cache directory holding ``vmlinuz`` and ``initrd.img``.
- ``guest_bridge(third_octet=None, *, dhcp=False)``: context manager, a ``GuestBridge(name, subnet,
  host_ip)``: a Linux bridge ``rtbr-NNN`` with ``198.18.NNN.1/24`` on the host side, deleted
  on exit. ``bridge.guest_ip(n)`` is ``198.18.NNN.n``. ``sweep_bridges()`` deletes any
  ``rtbr-*`` an interrupted run left (``make sweep`` calls it). ``dhcp=True`` runs busybox
  udhcpd on it, leasing ``.100``-``.250``.
- ``vm_manifest(name, *, ip=None, agent=True, http=True, tcp=True, healthy=True,
  run_strategy="Always") -> dict``: a ``VirtualMachine`` using the guest; with ``ip``
  (``"198.18.NNN.2/24"``) one interface on the pod network (bridge binding), else none.
  Add ``readinessProbe``/``livenessProbe`` under ``["spec"]["template"]["spec"]`` and
  write ``yaml.safe_dump(m)`` to ``vms/<name>.yaml``. ``ip="dhcp"``: from the bridge's
  DHCP server. ``pool_manifest(name, replicas, **same) -> dict``: a VirtualMachinePool
  (its replicas share the command line: use ``ip="dhcp"``); the replicas' ``rtest.name``
  is the pool's name.
- ``host_config(image_dir, workdir, bridge=None) -> HostConfig`` and
  ``host_config_yaml(...) -> str`` (the same as a daemon's host config file): the image
  map, ``allowedDirectories``, ``domainType: qemu``, ``networks.pod: {bridge: ...}``.
- ``boot_test_guest(workdir, name, *, bridge=None, host_octet=2, agent=True, http=True,
  tcp=True, healthy=True, uri=URI) -> BootedGuest(name, uri, ip, boot_s)``: writes the
  VM to ``workdir/vms``, reconciles it (it is created and started) and, with the agent,
  waits until ``guest-ping`` answers (``boot_s``: seconds from the reconcile to the answer).
- ``agent_command(uri, name, execute, arguments=None, timeout=5) -> Any`` (the
  ``return``), ``agent_ping(uri, name) -> bool``, ``guest_exec(uri, name, path, *args)
  -> int`` (exit code), ``wait_agent(uri, name, timeout)``, ``remove_guest(uri, name)``,
  ``agent_ipv4(uri, name, subnet) -> str | None`` (the address the agent reports).
- ``connect(ip, port) -> socket | ConnectionRefusedError`` (waits while the guest is not
  up yet), ``http_get(ip, path="/", port=80) -> (status, body)``.
- ``boot_test_guests(workdir, [GuestSpec(name, host_octet=2, agent=..., http=...), ...],
  bridge=...)`` boots several at once (one reconcile; faster than one by one).

A module booting guests once (as tests/integration/test_test_guest_qemu.py does)::

    @pytest.fixture(scope="module")
    def guest(qemu_uri):
        workdir = Path("/var/lib/reconciler-rtest") / f"probe-{uuid.uuid4().hex[:8]}"
        with guest_bridge() as bridge:
            try:
                yield boot_test_guest(workdir, "rtest-probe-web", bridge=bridge, http=False)
            finally:
                remove_guest(qemu_uri, "rtest-probe-web")
                shutil.rmtree(workdir, ignore_errors=True)

A daemon test writes ``vm_manifest(...)`` (with its probes) under its repository and
``host_config_yaml(build_test_guest(), workdir, bridge)`` as the host configuration.

Networking: libvirt networks cannot start on the test machines (no iptables), so the
guest's interface is a tap libvirt adds to a bridge the test makes (``guest_bridge``): a
private ``198.18.0.0/15`` /24 (RFC 2544 benchmarking range) with the host at ``.1`` and
no route anywhere else; the guest has no default route, and the tests only talk to the
guest's own address. The prober runs in the daemon's process, in the root namespace, so
the bridge lives there too (a namespace of its own would hide the guest from it).
Creating the bridge needs root (CAP_NET_ADMIN).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import libvirt
import libvirt_qemu
import yaml

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import SourceSnapshot
from reconciler.reconcile import reconcile_once
from reconciler.settings.host import HostConfig, ImageSource, NetworkTarget
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.source import DirView

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
URI = "qemu:///system"
CACHE = Path("/var/cache/reconciler-rtest/test-guest")  # QEMU (libvirt-qemu) reads it
IMAGE = "rtest/test-guest"
NET = "198.18"


def build_test_guest() -> Path:
    """Build (or find cached) the guest; its directory with ``vmlinuz`` and ``initrd.img``."""
    out = subprocess.run(
        [str(ROOT / "scripts" / "build-test-guest")],
        env={"RTEST_GUEST_CACHE": str(CACHE), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


@dataclass(frozen=True, slots=True)
class GuestBridge:
    name: str
    subnet: str  # "198.18.NNN"
    host_ip: str

    def guest_ip(self, n: int = 2) -> str:
        return f"{self.subnet}.{n}"


@contextlib.contextmanager
def guest_bridge(third_octet: int | None = None, *, dhcp: bool = False) -> Iterator[GuestBridge]:
    """A Linux bridge with the host at ``198.18.NNN.1/24``, deleted on exit; with ``dhcp``
    a busybox udhcpd on it leases ``.100``-``.250`` (static addresses stay below)."""
    used = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, check=True).stdout
    n = (
        third_octet
        if third_octet is not None
        else random.choice([i for i in range(1, 255) if f"rtbr-{i} " not in used])
    )
    bridge = GuestBridge(f"rtbr-{n}", f"{NET}.{n}", f"{NET}.{n}.1")
    subprocess.run(["ip", "link", "add", bridge.name, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "addr", "add", f"{bridge.host_ip}/24", "dev", bridge.name], check=True)
        subprocess.run(["ip", "link", "set", bridge.name, "up"], check=True)
        if not dhcp:
            yield bridge
            return
        with tempfile.TemporaryDirectory(prefix="rtest-udhcpd-") as tmp:
            conf = Path(tmp) / "udhcpd.conf"
            conf.write_text(
                f"start {bridge.subnet}.100\nend {bridge.subnet}.250\ninterface {bridge.name}\n"
                f"lease_file {tmp}/leases\npidfile {tmp}/pid\noption subnet 255.255.255.0\noption lease 86400\n"
            )
            (Path(tmp) / "leases").touch()
            server = subprocess.Popen(["busybox", "udhcpd", "-f", str(conf)], stderr=subprocess.DEVNULL)
            try:
                yield bridge
            finally:
                server.terminate()
                server.wait(10)
    finally:
        subprocess.run(["ip", "link", "del", bridge.name], check=False)


def sweep_bridges() -> list[str]:
    """Delete ``rtbr-*`` bridges an interrupted run left (``make sweep``); their names."""
    out = subprocess.run(
        ["ip", "-o", "link", "show", "type", "bridge"], capture_output=True, text=True, check=False
    )
    names = [
        line.split(":")[1].strip().split("@")[0] for line in out.stdout.splitlines() if ": rtbr-" in line
    ]
    for name in names:
        subprocess.run(["ip", "link", "del", name], check=False)
    return names


def kernel_args(name: str, *, ip: str | None, agent: bool, http: bool, tcp: bool, healthy: bool) -> str:
    """The guest's command line: ``quiet`` (a serial console is slow under TCG), its switches."""
    args = ["console=ttyS0", "quiet", f"rtest.name={name}"]
    if ip:
        args.append(f"rtest.ip={ip}")
    args += [
        f"rtest.{k}=0"
        for k, on in (("agent", agent), ("http", http), ("tcp", tcp), ("healthy", healthy))
        if not on
    ]
    return " ".join(args)


def vm_manifest(
    name: str,
    *,
    ip: str | None = None,
    agent: bool = True,
    http: bool = True,
    tcp: bool = True,
    healthy: bool = True,
    run_strategy: str = "Always",
) -> dict[str, Any]:
    """A VirtualMachine booting the test guest; ``ip`` (``a.b.c.d/24``) for eth0 on the pod network."""
    devices: dict[str, Any] = {"autoattachGraphicsDevice": False}
    template: dict[str, Any] = {
        "terminationGracePeriodSeconds": 5,
        "domain": {
            "cpu": {"cores": 1},
            "memory": {"guest": "256Mi"},
            "firmware": {
                "kernelBoot": {
                    "kernelArgs": kernel_args(name, ip=ip, agent=agent, http=http, tcp=tcp, healthy=healthy),
                    "container": {"image": IMAGE, "kernelPath": "/vmlinuz", "initrdPath": "/initrd.img"},
                }
            },
            "devices": devices,
        },
    }
    if ip:
        devices["interfaces"] = [{"name": "default", "bridge": {}}]
        template["networks"] = [{"name": "default", "pod": {}}]
    else:
        devices["autoattachPodInterface"] = False
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {"runStrategy": run_strategy, "template": {"spec": template}},
    }


def pool_manifest(name: str, replicas: int, **switches: Any) -> dict[str, Any]:
    """A ``VirtualMachinePool`` of the test guest (``switches`` as ``vm_manifest``'s; its
    replicas share one command line, so give them ``ip="dhcp"``, not one address)."""
    vm_spec = vm_manifest(name, **switches)["spec"]
    labels = {"kubevirt.io/vmpool": name}
    vm_spec["template"]["metadata"] = {"labels": labels}
    return {
        "apiVersion": "pool.kubevirt.io/v1beta1",
        "kind": "VirtualMachinePool",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "virtualMachineTemplate": {"metadata": {"labels": labels}, "spec": vm_spec},
        },
    }


def host_config(image_dir: Path, workdir: Path, bridge: GuestBridge | None = None) -> HostConfig:
    """The host config a VM of ``vm_manifest`` needs (``host_config_yaml`` as a file)."""
    return HostConfig(
        name="h1",
        allowed_dirs=(str(image_dir.parent), str(workdir)),
        volume_dir=str(workdir / "volumes"),
        domain_type="qemu",
        graphics="none",
        images={IMAGE: ImageSource(str(image_dir), "raw")},
        pod_network=NetworkTarget("bridge", bridge.name) if bridge else NetworkTarget("user"),
    )


def host_config_yaml(image_dir: Path, workdir: Path, bridge: GuestBridge | None = None) -> str:
    """``host_config`` as a host config file (``--host-config``)."""
    doc: dict[str, Any] = {
        "name": "h1",
        "allowedDirectories": [str(image_dir.parent), str(workdir)],
        "volumeDirectory": str(workdir / "volumes"),
        "domainType": "qemu",
        "defaults": {"graphics": "none"},
        "images": {IMAGE: {"path": str(image_dir), "format": "raw"}},
        "networks": {"pod": {"bridge": bridge.name} if bridge else {"user": True}},
    }
    return str(yaml.safe_dump(doc, sort_keys=False))


@dataclass(frozen=True, slots=True)
class GuestSpec:
    """One test guest to boot: its name, address (``.host_octet`` on the bridge) and switches."""

    name: str
    host_octet: int = 2
    agent: bool = True
    http: bool = True
    tcp: bool = True
    healthy: bool = True
    dhcp: bool = False  # ask the bridge's DHCP server (``guest_bridge(dhcp=True)``), not host_octet


@dataclass(frozen=True, slots=True)
class BootedGuest:
    name: str
    uri: str
    ip: str | None  # the guest's address (no prefix), None without a bridge
    boot_s: float  # seconds from the reconcile that starts it to its first guest-ping answer (0: no agent)


def write_guest(workdir: Path, spec: GuestSpec, bridge: GuestBridge | None = None) -> str | None:
    """Write ``workdir/vms/<name>.yaml`` for ``spec``; the guest's address (None: none or DHCP)."""
    ip = bridge.guest_ip(spec.host_octet) if bridge and not spec.dhcp else None
    manifest = vm_manifest(
        spec.name,
        ip=f"{ip}/24" if ip else "dhcp" if bridge else None,
        agent=spec.agent,
        http=spec.http,
        tcp=spec.tcp,
        healthy=spec.healthy,
    )
    (workdir / "vms").mkdir(parents=True, exist_ok=True)
    (workdir / "vms" / f"{spec.name}.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return ip


def reconcile_guests(workdir: Path, bridge: GuestBridge | None = None, uri: str = URI) -> None:
    """One ``reconcile_once`` of ``workdir/vms`` with the test guest's host config."""
    snap = SourceSnapshot(repo=str(workdir), ref="HEAD", commit="e" * 40, files=DirView(str(workdir)))
    target = HostTarget(uri, host_config(build_test_guest(), workdir, bridge), PlanPolicy(host="h1"))
    with Hypervisor(uri) as hv:
        plan, status = reconcile_once(snap, "vms", target, hv)
    assert not plan.errors, status.message
    assert all(r.ok for r in status.results), [r.message for r in status.results if not r.ok]


def boot_test_guests(
    workdir: Path,
    specs: list[GuestSpec],
    *,
    bridge: GuestBridge | None = None,
    uri: str = URI,
    timeout: float = 240.0,
) -> list[BootedGuest]:
    """Boot the guests together (one reconcile) and wait for each one's agent."""
    ips = [write_guest(workdir, s, bridge) for s in specs]
    build_test_guest()  # outside the timing: the first build takes a few seconds
    start = time.monotonic()
    reconcile_guests(workdir, bridge, uri)
    booted = []
    for spec, ip in zip(specs, ips, strict=True):
        if spec.agent:
            wait_agent(uri, spec.name, timeout - (time.monotonic() - start))
        if spec.dhcp and bridge and spec.agent:
            ip = wait_agent_ipv4(uri, spec.name, bridge.subnet, timeout - (time.monotonic() - start))
        booted.append(BootedGuest(spec.name, uri, ip, time.monotonic() - start if spec.agent else 0.0))
    return booted


def boot_test_guest(
    workdir: Path, name: str, *, bridge: GuestBridge | None = None, uri: str = URI, **switches: Any
) -> BootedGuest:
    """``boot_test_guests`` of one: ``switches`` are ``GuestSpec``'s (``agent=False``, ...)."""
    return boot_test_guests(workdir, [GuestSpec(name, **switches)], bridge=bridge, uri=uri)[0]


def connect(ip: str, port: int, timeout: float = 60.0) -> socket.socket | ConnectionRefusedError:
    """A TCP connection to the guest (the caller closes it), or its refusal (the guest is
    up, nothing listens); retried while the guest does not answer yet (unreachable, timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection((ip, port), timeout=2)
        except ConnectionRefusedError as e:
            return e
        except OSError:
            assert time.monotonic() < deadline, (
                f"{ip}:{port} neither answered nor refused within {timeout:.0f}s"
            )
            time.sleep(0.5)


def http_get(ip: str, path: str = "/", port: int = 80, timeout: float = 60.0) -> tuple[int, bytes]:
    """``GET path`` from the guest once it answers on ``port``: status and body."""
    sock = connect(ip, port, timeout)
    assert isinstance(sock, socket.socket), f"{ip}:{port}: {sock}"
    sock.close()
    conn = http.client.HTTPConnection(ip, port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@contextlib.contextmanager
def _domain(uri: str, name: str) -> Iterator[libvirt.virDomain]:
    conn = libvirt.open(uri)
    try:
        yield conn.lookupByName(name)
    finally:
        conn.close()


def agent_command(
    uri: str, name: str, execute: str, arguments: dict[str, Any] | None = None, timeout: int = 5
) -> Any:
    """One guest agent command through libvirt; its ``return`` (libvirt.libvirtError if none)."""
    cmd: dict[str, Any] = {"execute": execute}
    if arguments is not None:
        cmd["arguments"] = arguments
    with _domain(uri, name) as dom:
        return json.loads(libvirt_qemu.qemuAgentCommand(dom, json.dumps(cmd), timeout, 0))["return"]


def agent_ping(uri: str, name: str, timeout: int = 2) -> bool:
    try:
        agent_command(uri, name, "guest-ping", timeout=timeout)
    except libvirt.libvirtError:
        return False
    return True


def wait_agent(uri: str, name: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not agent_ping(uri, name):
        assert time.monotonic() < deadline, f"{name}: the guest agent did not answer within {timeout:.0f}s"
        time.sleep(0.5)


def agent_ipv4(uri: str, name: str, subnet: str) -> str | None:
    """The guest's IPv4 address in ``subnet`` (``198.18.NNN``) as its agent reports it."""
    for iface in agent_command(uri, name, "guest-network-get-interfaces"):
        for a in iface.get("ip-addresses", []):
            if a["ip-address-type"] == "ipv4" and a["ip-address"].startswith(subnet + "."):
                return str(a["ip-address"])
    return None


def wait_agent_ipv4(uri: str, name: str, subnet: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while (ip := agent_ipv4(uri, name, subnet)) is None:
        assert time.monotonic() < deadline, f"{name}: no address in {subnet}.0/24 within {timeout:.0f}s"
        time.sleep(0.5)
    return ip


def guest_exec(uri: str, name: str, path: str, *args: str, timeout: float = 30.0) -> int:
    """Run ``path args`` in the guest through ``guest-exec``; its exit code."""
    pid = agent_command(uri, name, "guest-exec", {"path": path, "arg": list(args)})["pid"]
    deadline = time.monotonic() + timeout
    while True:
        st = agent_command(uri, name, "guest-exec-status", {"pid": pid})
        if st["exited"]:
            return int(st.get("exitcode", -1))
        assert time.monotonic() < deadline, f"{name}: {path} did not exit within {timeout:.0f}s"
        time.sleep(0.1)


def remove_guest(uri: str, name: str) -> None:
    """Destroy and undefine the guest's domain (no error when it is gone)."""
    conn = libvirt.open(uri)
    try:
        for dom in conn.listAllDomains(0):
            if dom.name() == name:
                if dom.isActive():
                    dom.destroy()
                dom.undefine()
    finally:
        conn.close()
