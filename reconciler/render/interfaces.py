"""Network interfaces: ``<interface>`` elements.

Input: ``devices.interfaces`` and ``networks`` of the expanded spec, the host
config's network map. Output: one ``<interface>`` per interface whose ``state`` is
not ``absent``, in order. Pure. The ``pod`` network maps to the host's default
target (libvirt network, bridge or user-mode); ``multus.networkName`` to a named
network or bridge from the host config (``sriov``: a libvirt network pooling a NIC's
virtual functions); unknown names are errors. MAC addresses
are ``macAddress`` when given, else derived from the domain and interface names
(locally administered, stable across renders and hosts).
"""

from __future__ import annotations

import hashlib
import sys
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.model import Problem, Severity
from reconciler.model.identifiers import parse_mac
from reconciler.render.context import DEVICES, SPEC, Guest, RenderContext
from reconciler.render.xml import sub
from reconciler.settings.host import HostConfig, NetworkTarget

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Mapping

    from reconciler.render.caps import HostCaps

MODELS = ("e1000", "e1000e", "igb", "ne2k_pci", "pcnet", "rtl8139", "virtio")
# The binding methods of the pinned KubeVirt's Interface and what each is here (its
# libvirt equivalent, one of settings.host.BINDING_EQUIVALENTS or "sriov"):
# bridge and masquerade plug into the mapped network; passtBinding is user-mode
# networking through libvirt's passt backend (pod network only, as on KubeVirt); sriov
# is a virtual function from the pool of a libvirt network with <forward mode="hostdev">
# the multus network maps to (libvirt hands a free VF to each such interface);
# ``binding: {name: NAME}`` is a network binding plugin (PLUGINS, plus the host
# config's ``networks.bindingPlugins``).
CORE_BINDINGS = MappingProxyType(
    {"bridge": "bridge", "masquerade": "bridge", "sriov": "sriov", "passtBinding": "passt"}
)
PLUGIN = "binding"
# The network binding plugins KubeVirt's user guide documents, as libvirt equivalents:
# passt (user-mode through passt, pod network), macvtap (a direct interface on a
# multus network), slirp (user-mode through QEMU's slirp, pod network).
PLUGINS = MappingProxyType({"passt": "passt", "macvtap": "macvtap", "slirp": "slirp"})
# Core bindings KubeVirt discontinued in v1.3 (pkg/network/admitter/discontinued.go):
# still rendered here as their current equivalent, with a warning naming the KubeVirt
# version that refuses them and the form to write instead.
DISCONTINUED = MappingProxyType(
    {
        "passt": ("passt", "v1.3", "passtBinding: {}"),
        "macvtap": ("macvtap", "v1.3", "binding: {name: macvtap}"),
        "slirp": ("slirp", "v1.3", "binding: {name: slirp}"),
    }
)
BINDINGS = (*CORE_BINDINGS, PLUGIN, *DISCONTINUED)
# What an equivalent is for: user-mode networking exists on the pod network only (as
# KubeVirt's passt and slirp), SR-IOV and macvtap on multus networks only.
POD_ONLY = ("passt", "slirp")
IFACE_KEYS = ("name", "model", "macAddress", "bootOrder", "pciAddress", "acpiIndex", "state", *BINDINGS)
IFACE_NO_EFFECT = ("ports", "dhcpOptions", "tag")


def stable_mac(domain_name: str, iface: str, seed: str = "") -> str:
    """A locally administered unicast MAC from sha256([seed/]domain/interface):
    02:xx:xx:xx:xx:xx. ``seed``: the owner identity (``HostConfig.mac_seed``), so that two
    unrelated repositories give ``vm/web`` two MACs."""
    text = f"{seed}/{domain_name}/{iface}" if seed else f"{domain_name}/{iface}"
    digest = hashlib.sha256(text.encode()).digest()
    return "02:" + digest[:5].hex(":")


def pod_target(host: HostConfig, caps: HostCaps) -> NetworkTarget:
    """Where the pod network goes: the host config's mapping; with none, the libvirt
    network ``default`` when the host has it (or is not known), else user-mode
    networking (passt where libvirt offers it)."""
    if host.pod_network is not None:
        return host.pod_network
    if caps.networks is None or "default" in caps.networks:
        return NetworkTarget("network", "default")
    return NetworkTarget("user", "passt" if caps.passt else "")


def pod_network_note(host: HostConfig, caps: HostCaps) -> Problem | None:
    """A plan warning saying where the pod network goes when the host config does not say."""
    target = pod_target(host, caps)
    if host.pod_network is not None or target.kind == "network":
        return None
    backend = "passt" if target.name == "passt" else "user (slirp)"
    return Problem(
        "this host has no active libvirt network 'default' and the host config maps "
        f"none: VMs on the pod network use user-mode networking ({backend})",
        subject="pod network",
        severity=Severity.WARNING,
    )


def discontinued_warning(key: str) -> str:
    """The warning for a discontinued core binding: the version that refuses it, the form to write."""
    name, version, form = DISCONTINUED[key]
    return (
        f"the core {name} binding was discontinued in KubeVirt {version}, whose admission refuses it; "
        f"it is rendered here, but write {form} to keep the VM valid on KubeVirt"
    )


def binding_of(ctx: RenderContext, iface: Mapping[str, Any], where: str) -> tuple[str, str]:
    """(field, libvirt equivalent) of an interface's binding: ("", "bridge") when none is given."""
    given = [key for key in BINDINGS if iface.get(key) is not None]
    if len(given) > 1:
        raise ctx.error(f"{where}.{given[1]}", f"one binding per interface ({', '.join(given)} given)")
    if not given:
        return "", "bridge"
    key = given[0]
    if key == PLUGIN:
        plugin = _mapping_or_empty(ctx, iface, key, where)
        ctx.known(plugin, f"{where}.{key}", ("name",))
        name = ctx.string(plugin, "name", f"{where}.{key}")
        if not name:
            raise ctx.error(f"{where}.{key}.name", "a binding plugin needs a name")
        equivalent = ctx.host.binding_plugins.get(name) or PLUGINS.get(name)
        if equivalent is None:
            raise ctx.error(
                f"{where}.{key}.name",
                f"network binding plugin {name!r} is not known on this host: KubeVirt documents "
                f"{', '.join(PLUGINS)}; map a site plugin to its libvirt equivalent in the host config "
                f"(networks: {{bindingPlugins: {{{name}: bridge}}}})",
            )
        return key, equivalent
    ctx.known(_mapping_or_empty(ctx, iface, key, where), f"{where}.{key}", ())
    if key in DISCONTINUED:
        ctx.warn(f"{where}.{key}", discontinued_warning(key))
        return key, DISCONTINUED[key][0]
    return key, CORE_BINDINGS[key]


def _bound_target(
    ctx: RenderContext, target: NetworkTarget, binding: tuple[str, str], name: str, pods: set[str], where: str
) -> NetworkTarget:
    """The target an interface's binding asks for: passt and slirp are user-mode networking
    (on the pod network only, as on KubeVirt); macvtap needs a network mapped to a host
    interface (``direct``), and a ``direct`` network takes only macvtap."""
    key, equivalent = binding
    field = f"{where}.{key}" if key else where
    if equivalent in POD_ONLY:
        if name not in pods:
            raise ctx.error(field, f"the {equivalent} binding is for the pod network only (as on KubeVirt)")
        return NetworkTarget("user", "passt" if equivalent == "passt" else "")
    if equivalent == "sriov":
        if name in pods:
            raise ctx.error(field, "SR-IOV is for multus networks only (as on KubeVirt)")
        if target.kind != "network":
            raise ctx.error(
                field,
                f"SR-IOV needs network {name!r} mapped to a libvirt network whose <forward mode='hostdev'> "
                "pools the virtual functions of a host NIC (networks: {NAME: {network: sriov-net}})",
            )
        return target
    if equivalent == "macvtap":
        if target.kind != "direct":
            raise ctx.error(
                field,
                f"macvtap needs network {name!r} mapped to a host interface in the host config "
                "(networks: {NAME: {direct: eth0}})",
            )
        return target
    if target.kind == "direct":
        raise ctx.error(
            where,
            f"network {name!r} maps to a host interface (direct): give the interface binding: {{name: macvtap}}",
        )
    return target


def _network_targets(ctx: RenderContext) -> dict[str, NetworkTarget]:
    out: dict[str, NetworkTarget] = {}
    for i, n in enumerate(ctx.items(ctx.spec, "networks", SPEC)):
        where = f"{SPEC}.networks[{i}]"
        ctx.known(n, where, ("name", "pod", "multus"))
        name = ctx.string(n, "name", where)
        if not name:
            raise ctx.error(f"{where}.name", "a network needs a name")
        if n.get("pod") is not None and n.get("multus") is not None:
            raise ctx.error(where, "pod and multus cannot both be set")
        if n.get("pod") is not None:
            ctx.known(n["pod"] or {}, f"{where}.pod", (), ("vmNetworkCIDR", "vmIPv6NetworkCIDR"))
            out[name] = pod_target(ctx.host, ctx.caps)
        elif n.get("multus") is not None:
            m = ctx.mapping(n, "multus", where) or {}
            ctx.known(m, f"{where}.multus", ("networkName", "default"))
            net = ctx.string(m, "networkName", f"{where}.multus")
            target = ctx.host.network_for(net, ctx.namespace)
            if target is None:
                raise ctx.error(
                    f"{where}.multus.networkName", f"network {net!r} is not in the host config's network map"
                )
            out[name] = target
        else:
            raise ctx.error(where, "a network needs pod or multus")
    return out


def render_interfaces(ctx: RenderContext, devices: ET.Element, guest: Guest) -> None:
    targets = _network_targets(ctx)
    pods = {str(n.get("name")) for n in ctx.items(ctx.spec, "networks", SPEC) if n.get("pod") is not None}
    transitional = bool(ctx.devices.get("useVirtioTransitional"))
    macs: dict[str, str] = {}
    seen: set[str] = set()
    for i, iface in enumerate(ctx.items(ctx.devices, "interfaces", DEVICES)):
        where = f"{DEVICES}.interfaces[{i}]"
        name = _interface_name(ctx, iface, where, seen)
        state = ctx.string(iface, "state", where, ("up", "down", "absent"))
        if state == "absent":
            continue
        target = targets.get(name)
        if target is None:
            raise ctx.error(f"{where}.name", f"'{name}' not found.")
        bound = binding_of(ctx, iface, where)
        binding = bound[1]
        target = _bound_target(ctx, target, bound, name, pods, where)
        model = ctx.string(iface, "model", where, MODELS) or "virtio"
        if binding == "sriov" and state == "down":
            raise ctx.error(f"{where}.state", "a virtual function's link cannot be set down (SR-IOV)")
        if model == "virtio" and transitional:
            model = "virtio-transitional"
        mac = _mac(ctx, iface, where, name, guest, macs)
        el = sub(devices, "interface", type=target.kind)
        sub(el, "mac", address=mac)
        _source_and_model(ctx, el, target, model, binding)
        _boot_and_link(ctx, el, iface, where, state)


def _interface_name(ctx: RenderContext, iface: Mapping[str, Any], where: str, seen: set[str]) -> str:
    """The interface's name (once per VM); its keys checked, those without effect warned of."""
    ctx.known(iface, where, IFACE_KEYS, IFACE_NO_EFFECT)
    for key in ("ports", "dhcpOptions"):
        if iface.get(key):
            ctx.warn(f"{where}.{key}", "has no effect on a libvirt host (configure the network instead)")
    name = ctx.string(iface, "name", where)
    if name in seen:
        raise ctx.error(f"{where}.name", f"interface name {name!r} is used twice")
    seen.add(name)
    return name


def _mac(
    ctx: RenderContext, iface: Mapping[str, Any], where: str, name: str, guest: Guest, macs: dict[str, str]
) -> str:
    """The interface's MAC: the one given (unicast), else derived from the domain and the
    interface's name; one interface each (``macs``: MAC -> interface so far)."""
    given = ctx.string(iface, "macAddress", where)
    mac = parse_mac(given) or ""
    if given and not mac:
        raise ctx.error(f"{where}.macAddress", f"{given!r} is not a MAC address")
    if mac and int(mac[:2], 16) & 1:
        raise ctx.error(f"{where}.macAddress", f"{mac} is a multicast address")
    if not mac:
        mac = stable_mac(guest.key.domain, name, ctx.host.mac_seed)
        ctx.derived_macs.append((mac, name))  # a domain defined with another keeps it
    if mac in macs:
        raise ctx.error(f"{where}.macAddress", f"MAC {mac} is also used by interface {macs[mac]!r}")
    macs[mac] = name
    ctx.macs.append((mac, sys.intern(f"{where}.macAddress")))  # the same path for many VMs
    return mac


def _source_and_model(
    ctx: RenderContext, el: ET.Element, target: NetworkTarget, model: str, binding: str
) -> None:
    """The interface's source (network, bridge, host interface), model, backend and queues."""
    if target.kind == "network":
        sub(el, "source", network=target.name)
    elif target.kind == "bridge":
        sub(el, "source", bridge=target.name)
    elif target.kind == "direct":
        sub(el, "source", dev=target.name, mode="bridge")
    if binding != "sriov":  # the guest sees the VF itself: no emulated model, no queues
        sub(el, "model", type=model)
    if target.kind == "user" and target.name == "passt":
        sub(el, "backend", type="passt")
    multiqueue = bool(ctx.devices.get("networkInterfaceMultiqueue"))
    if multiqueue and model.startswith("virtio") and binding != "sriov":
        sub(el, "driver", queues=str(min(ctx.vcpus, 256)))


def _boot_and_link(
    ctx: RenderContext, el: ET.Element, iface: Mapping[str, Any], where: str, state: str
) -> None:
    """The interface's boot order (or no option ROM), link state, ACPI index and PCI address."""
    order = ctx.boot_order(iface, where)
    if order:
        sub(el, "boot", order=order)
    else:
        # KubeVirt disables the option ROM of interfaces that do not boot.
        sub(el, "rom", enabled="no")
    if state == "down":
        sub(el, "link", state="down")
    acpi = ctx.integer(iface, "acpiIndex", where, minimum=1)
    if acpi is not None:
        sub(el, "acpi", index=str(acpi))
    addr = ctx.pci_address(iface, "pciAddress", where)
    if addr:
        sub(el, "address", **addr)


def _mapping_or_empty(ctx: RenderContext, node: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    return ctx.mapping(node, key, where) or {}
