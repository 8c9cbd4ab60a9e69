"""KubeVirt's validating-webhook rules, as one table, and the checks we run for them.

Input: a VirtualMachine (or VirtualMachinePool) manifest after the schema check.
Output: ``Finding`` records (field path, message, rule, severity); the catalog raises
the first error at its file:line and passes warnings on. Pure: never reads files.

``RULES`` lists the admission rules of the pinned KubeVirt (``KUBEVIRT_COMMIT``, the
same commit as ``reconciler/data/kubevirt/swagger.json``) for VirtualMachine,
VirtualMachinePool, instancetypes and preferences (its rows are written in
``catalog.machine_rules`` and ``catalog.device_rules``, in the words of
``catalog.rules``), each with the KubeVirt source file it comes from and what we do: the same refusal (checked here, or by the stage named in
``where``), a warning where a libvirt host can honour what KubeVirt refuses, a refusal
of something KubeVirt accepts but a libvirt host cannot do (``UNSUPPORTED``), or not
applicable (with why). tests/data/kubevirt-admission/cases.yaml holds cases from
KubeVirt's own admitter tests; ``bench/admission`` prints how often we agree.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeGuard

from reconciler.catalog.device_rules import DEVICE_RULES, NETWORK_RULES, VOLUME_RULES
from reconciler.catalog.machine_rules import (
    CPU_MEMORY_RULES,
    FIRMWARE_RULES,
    INSTANCETYPE_RULES,
    RUN_STRATEGY_RULES,
)
from reconciler.catalog.rules import Ours, Rule
from reconciler.model.units import quantity_value
from reconciler.records import dataclass

if TYPE_CHECKING:
    from fractions import Fraction

KUBEVIRT_VERSION = "v1.9.0-beta.0-1264-gd923fdb815"
KUBEVIRT_COMMIT = "d923fdb815cd2016ddaebdaaa51db04133576d72"

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Finding:
    path: Path  # from the document root
    message: str
    rule: str
    error: bool


# The table, in the order of its areas (the rows are in catalog.machine_rules and
# catalog.device_rules).
RULES: tuple[Rule, ...] = (
    *CPU_MEMORY_RULES,
    *DEVICE_RULES,
    *NETWORK_RULES,
    *VOLUME_RULES,
    *FIRMWARE_RULES,
    *RUN_STRATEGY_RULES,
    *INSTANCETYPE_RULES,
)
RULE_BY_ID: Mapping[str, Rule] = MappingProxyType({r.id: r for r in RULES})

TEMPLATE: Path = ("spec", "template", "spec")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_IFACE_NAME = re.compile(r"^[A-Za-z0-9-_]+$")
_PORT_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_MACHINES = ("q35", "pc-q35")
RUN_STRATEGIES = ("Always", "RerunOnFailure", "Once", "Manual", "Halted", "WaitAsReceiver")
EVICTION = ("LiveMigrate", "LiveMigrateIfPossible", "None", "External")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
RESERVED_MAC = "02:00:00:00:00:00"

Check = Callable[[Mapping[str, Any], Path], Iterator[tuple[Path, str]]]


def _mapping(node: Any) -> TypeGuard[Mapping[str, Any]]:
    # A parsed document's: a dict, quickly told (and an absent field without the ABC).
    return type(node) is dict or (node is not None and isinstance(node, Mapping))


def _dig(node: Any, *keys: str) -> Any:
    for k in keys:
        if type(node) is not dict and (node is None or not isinstance(node, Mapping)):
            return None
        node = node.get(k)
    return node


def _items(node: Any, key: str) -> list[tuple[int, Mapping[str, Any]]]:
    value = node.get(key) if _mapping(node) else None
    return [(i, v) for i, v in enumerate(value) if _mapping(v)] if isinstance(value, list) else []


def _quantity(value: Any) -> Fraction | None:
    try:
        return quantity_value(value) if value is not None else None
    except (ValueError, TypeError):
        return None


def _cpu_requests(spec: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    res = _dig(spec, "domain", "resources") or {}
    req, lim = _quantity(_dig(res, "requests", "cpu")), _quantity(_dig(res, "limits", "cpu"))
    for kind, value in (("requests", req), ("limits", lim)):
        if value is not None and value < 0:
            yield (*at, "domain", "resources", kind, "cpu"), "must be a positive quantity"
    if req is not None and lim is not None and req > lim:
        yield (*at, "domain", "resources", "requests", "cpu"), "is greater than limits.cpu"


def _memory_requests(spec: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    res = _dig(spec, "domain", "resources") or {}
    req, lim = _quantity(_dig(res, "requests", "memory")), _quantity(_dig(res, "limits", "memory"))
    for kind, value in (("requests", req), ("limits", lim)):
        if value is not None and value < 0:
            yield (*at, "domain", "resources", kind, "memory"), "must be a positive quantity"
    if req is not None and 0 < req < 1_000_000:  # KubeVirt: a zero request is no request
        yield (*at, "domain", "resources", "requests", "memory"), "must be greater than or equal to 1M"
    if req is not None and lim is not None and lim >= 0 and req > lim:
        yield (*at, "domain", "resources", "requests", "memory"), "is greater than limits.memory"


def _dedicated(spec: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    cpu = _dig(spec, "domain", "cpu") or {}
    if cpu.get("realtime") is not None and _dig(cpu, "numa", "guestMappingPassthrough") is None:
        yield (*at, "domain", "cpu", "realtime"), "realtime needs numa.guestMappingPassthrough"
    if cpu.get("dedicatedCpuPlacement") is not True:
        return
    threads = cpu.get("threads")
    if isinstance(threads, int) and threads > 2:
        yield (*at, "domain", "cpu", "threads"), "not more than two threads with dedicatedCpuPlacement"
    res = _dig(spec, "domain", "resources") or {}
    req, lim = _quantity(_dig(res, "requests", "cpu")), _quantity(_dig(res, "limits", "cpu"))
    for kind, value in (("requests", req), ("limits", lim)):
        if value is not None and value.denominator != 1:
            yield (*at, "domain", "resources", kind, "cpu"), "must be an integer with dedicatedCpuPlacement"
    if req is not None and lim is not None and req != lim:
        yield (
            (*at, "domain", "resources", "requests", "cpu"),
            "must equal limits.cpu with dedicatedCpuPlacement",
        )


def _hugepages(spec: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    size_text = _dig(spec, "domain", "memory", "hugepages", "pageSize")
    if size_text is None:
        return
    where = (*at, "domain", "memory", "hugepages", "pageSize")
    size = _quantity(size_text)
    if size is None or size <= 0:
        yield where, f"{size_text!r} is not a page size"
        return
    for source in (("domain", "memory", "guest"), ("domain", "resources", "requests", "memory")):
        memory = _quantity(_dig(spec, *source))
        if memory is None:
            continue
        if memory < size:
            yield where, f"{size_text} is larger than {'.'.join(source)}"
        elif memory % size:
            yield where, f"{'.'.join(source)} is not a multiple of the page size {size_text}"
        return


def _machine(spec: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    machine = _dig(spec, "domain", "machine", "type")
    if isinstance(machine, str) and machine and not machine.startswith(_MACHINES):
        yield (
            (*at, "domain", "machine", "type"),
            (
                f"KubeVirt accepts only the machine types of its emulatedMachines (q35*, pc-q35* by default): "
                f"{machine!r} runs here if the host's QEMU offers it, but not on a default KubeVirt"
            ),
        )


def _names(spec: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    hostname, subdomain = spec.get("hostname"), spec.get("subdomain")
    if isinstance(hostname, str) and (len(hostname) > 63 or not _DNS_LABEL.match(hostname)):
        yield (*at, "hostname"), "does not conform to the kubernetes DNS_LABEL rules"
    if isinstance(subdomain, str) and (
        len(subdomain) > 253 or not all(_DNS_LABEL.match(p) for p in subdomain.split("."))
    ):
        yield (*at, "subdomain"), "does not conform to the kubernetes DNS_SUBDOMAIN rules"


def _dns(spec: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    policy = spec.get("dnsPolicy")
    if policy is None:
        return
    if policy not in DNS_POLICIES:
        yield (*at, "dnsPolicy"), f"{policy!r} is not supported, valid values: {', '.join(DNS_POLICIES)}"
        return
    if policy != "None":
        return
    config = spec.get("dnsConfig")
    if not isinstance(config, Mapping):
        yield (*at, "dnsPolicy"), "must provide dnsConfig when dnsPolicy is None"
        return
    servers = config.get("nameservers") or []
    if not servers:
        yield (
            (*at, "dnsConfig", "nameservers"),
            "must provide at least one DNS nameserver when dnsPolicy is None",
        )
    if len(servers) > 3:
        yield (*at, "dnsConfig", "nameservers"), "must not have more than 3 nameservers"
    for i, server in enumerate(servers):
        try:
            ipaddress.ip_address(str(server))
        except ValueError:
            yield (*at, "dnsConfig", "nameservers", i), f"must be a valid IP address: {server}"


def _strategies(spec: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    start = spec.get("startStrategy")
    if start is not None and start != "Paused":
        yield (*at, "startStrategy"), f"is set with an unrecognized option: {start}"
    if start == "Paused" and spec.get("livenessProbe") is not None:
        yield (*at, "startStrategy"), "pausing a VM with a livenessProbe is not supported"
    eviction = spec.get("evictionStrategy")
    if eviction is not None and eviction not in EVICTION:
        yield (*at, "evictionStrategy"), f"is set with an unrecognized option: {eviction}"


def _has_pod_network(spec: Mapping[str, Any]) -> bool:
    networks = spec.get("networks")
    if networks is None:  # KubeVirt adds the pod network unless told not to
        return _dig(spec, "domain", "devices", "autoattachPodInterface") is not False
    return any(isinstance(n, Mapping) and n.get("pod") is not None for n in networks)


def _probes(spec: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    for key in ("readinessProbe", "livenessProbe"):
        probe = spec.get(key)
        if not _mapping(probe):
            continue
        actions = [a for a in ("httpGet", "tcpSocket", "exec", "guestAgentPing") if probe.get(a) is not None]
        if len(actions) != 1:
            yield (*at, key), "must have exactly one probe type set"
        elif actions[0] in ("httpGet", "tcpSocket") and not _has_pod_network(spec):
            yield (*at, key, actions[0]), "is only allowed if the Pod Network is attached"


def _video(spec: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    devices = _dig(spec, "domain", "devices") or {}
    if devices.get("video") is not None and devices.get("autoattachGraphicsDevice") is False:
        yield (
            (*at, "domain", "devices", "video"),
            "a video device needs autoattachGraphicsDevice (it is false)",
        )


def _host_disks(spec: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    for i, vol in _items(spec, "volumes"):
        disk = vol.get("hostDisk")
        if _mapping(disk) and disk.get("type") == "Disk" and disk.get("capacity") is not None:
            yield (*at, "volumes", i, "hostDisk", "capacity"), "is allowed only with type DiskOrCreate"


def _interfaces(spec: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    listed = _items(spec, "networks")
    networks = {str(n.get("name")): n for _, n in listed}
    ifaces = _items(_dig(spec, "domain", "devices"), "interfaces")
    names = {str(iface.get("name")) for _, iface in ifaces}
    pods = [i for i, n in listed if n.get("pod") is not None]
    for i in pods[1:]:
        yield (*at, "networks", i), "more than one interface is connected to a pod network"
    for i, n in listed:
        if str(n.get("name")) not in names:
            yield (*at, "networks", i, "name"), f"{n.get('name')!r} not found among the interfaces"
    where = (*at, "domain", "devices", "interfaces")
    for i, iface in ifaces:
        name = str(iface.get("name") or "")
        net = networks.get(name) or {}
        if name and not _IFACE_NAME.match(name):
            yield (
                (*where, i, "name"),
                "can only contain alphabetical characters, numbers, dashes (-) or underscores (_)",
            )
        if iface.get("masquerade") is not None:
            if net and net.get("pod") is None:
                yield (*where, i, "masquerade"), "masquerade is only implemented with the pod network"
            if str(iface.get("macAddress") or "").lower() == RESERVED_MAC:
                yield (*where, i, "macAddress"), "the MAC address is reserved for the in-pod bridge"
        if iface.get("state") == "absent":
            if iface.get("bridge") is None:
                yield (*where, i, "state"), "state absent is supported only for the bridge binding"
            elif net.get("pod") is not None or _dig(net, "multus", "default") is True:
                yield (*where, i, "state"), "state absent is not supported on the default network"
        yield from _ports(iface, (*where, i))
        yield from _dhcp(iface, (*where, i))


def _ports(iface: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    seen: set[str] = set()
    for j, port in _items(iface, "ports"):
        name, number, protocol = port.get("name"), port.get("port"), port.get("protocol")
        if name:
            if name in seen:
                yield (*at, "ports", j, "name"), f"duplicate name of the port: {name}"
            if len(str(name)) > 15 or not _PORT_NAME.match(str(name)):
                yield (*at, "ports", j, "name"), f"invalid name of the port: {name}"
            seen.add(str(name))
        if not isinstance(number, int) or number == 0:
            yield (*at, "ports", j, "port"), "the port field is mandatory"
        elif not 0 < number < 65536:
            yield (*at, "ports", j, "port"), "must be in range 0 < x < 65536"
        if protocol not in (None, "", "TCP", "UDP"):
            yield (*at, "ports", j, "protocol"), "unknown protocol, only TCP or UDP allowed"


def _dhcp(iface: Mapping[str, Any], at: Path) -> Iterator[tuple[Path, str]]:
    options = iface.get("dhcpOptions")
    if not _mapping(options):
        return
    private = [o for _, o in _items(options, "privateOptions")]
    if len({o.get("option") for o in private}) < len(private):
        yield (*at, "dhcpOptions", "privateOptions"), "duplicate DHCP private options"
    for j, o in _items(options, "privateOptions"):
        if not isinstance(o.get("option"), int) or not 224 <= o["option"] <= 254:
            yield (*at, "dhcpOptions", "privateOptions", j, "option"), "must be in range 224 to 254"
    for j, server in enumerate(options.get("ntpServers") or ()):
        try:
            ipaddress.IPv4Address(str(server))
        except ValueError:
            yield (*at, "dhcpOptions", "ntpServers", j), "NTP servers must be IPv4 addresses"


TEMPLATE_CHECKS: tuple[tuple[str, Check], ...] = (
    ("cpu-requests", _cpu_requests),
    ("memory-requests", _memory_requests),
    ("hugepages", _hugepages),
    ("dedicated-cpu", _dedicated),
    ("machine-type", _machine),
    ("hostname", _names),
    ("dns", _dns),
    ("start-strategy", _strategies),
    ("probes", _probes),
    ("video", _video),
    ("host-disk", _host_disks),
    ("iface-network-pairs", _interfaces),
)

# Each check with whether its findings are errors (its rule's, read once).
_TEMPLATE_RULES = tuple((rule, check, RULE_BY_ID[rule].ours != Ours.WARN) for rule, check in TEMPLATE_CHECKS)


def _vm_spec(spec: Mapping[str, Any], at: Path) -> Iterator[Finding]:
    if spec.get("running") is not None and spec.get("runStrategy") is not None:
        yield Finding(
            (*at, "running"),
            "running and runStrategy are mutually exclusive (running is deprecated: write runStrategy)",
            "run-strategy",
            True,
        )
    strategy = spec.get("runStrategy")
    if strategy is not None and strategy not in RUN_STRATEGIES:
        yield Finding(
            (*at, "runStrategy"),
            f"invalid runStrategy {strategy!r} (one of {', '.join(RUN_STRATEGIES)})",
            "run-strategy",
            True,
        )
    template = _dig(spec, "template", "spec")
    if _mapping(template):
        where = (*at, "template", "spec")
        for rule, check, error in _TEMPLATE_RULES:
            for path, message in check(template, where):
                yield Finding(path, message, rule, error)


def review(kind: str, obj: Mapping[str, Any]) -> list[Finding]:
    """The admission findings of one document, in field order of the checks."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return []
    if kind == "VirtualMachine":
        return list(_vm_spec(spec, ("spec",)))
    if kind == "VirtualMachinePool":
        vm = _dig(spec, "virtualMachineTemplate", "spec")
        if isinstance(vm, Mapping):
            return list(_vm_spec(vm, ("spec", "virtualMachineTemplate", "spec")))
    return []
