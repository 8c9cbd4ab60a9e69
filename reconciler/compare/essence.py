"""Reduce desired and live domain XML to their comparable essence; carry live addresses.

Input: domain XML strings or their parsed trees. Output: an *essence*: a flat
``{path: value}`` mapping, with paths like ``devices/disk[vda]/source@file``; and, for
redefinitions, the desired tree with the addresses libvirt already assigned carried
over. Pure: no libvirt, no I/O. The tree functions never parse, and ``essence_of``
never changes the tree it reads.

What is normalised away (``essence``):
- the reconciler's ownership element (it is not part of the spec);
- what libvirt's bookkeeping adds on read-back: ``<alias>``, ``<address>`` of devices,
  the running domain's ``id``, ``<vcpus>`` online map, ``<seclabel>``, ``<resource>``;
- units: memory sizes become KiB integers; MAC addresses lower case;
- implied values: ``vcpu@current`` defaults to the vCPU count and ``currentMemory``
  to ``memory`` (libvirt drops / adds them on read-back);
- identity: disks are keyed by target dev, interfaces by MAC, controllers by type
  and index, inputs by type and bus, other repeated devices by position among their
  kind; repeated elements with distinct names (timers, sysinfo entries, cpu
  features) by name; so a reordering in libvirt's output is no change.

What libvirt *adds* as defaults (``placement='static'``, ``<boot dev='hd'>``,
``<clock>``, implicit controllers, ...) is not removed here: ``changes.py`` compares the
desired essence as a subset of the live one, except for the owned device kinds
(``OWNED_DEVICES`` of ``model.devices``), whose extra live instances are real
differences. Equivalences that need both sides (machine-type aliases, an expanded
``host-model`` CPU, a clock adjustment stored as ``offset='variable'``, the default
cdrom tray, autoport graphics, the format of an empty cdrom, auto-selected firmware
the running domain names by its files; the RTC and PIT timers
``present='yes'``, a topology of one socket per vCPU and the custom CPU model
``qemu64``, which are what QEMU has without them) are in ``same_value`` / ``readback_equivalent``.
"""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from types import MappingProxyType

from reconciler import ownership
from reconciler.model.devices import IMPLICIT_DEVICES, OWNED_DEVICES, device_key
from reconciler.model.units import memory_kib
from reconciler.render.ports import PORT_MODEL

Essence = Mapping[str, str]

_SIZED = frozenset({"memory", "currentMemory", "maxMemory"})
# Attributes holding a size in the element's ``unit``.
_SIZED_ATTRS = ("memory",)
# Children that only libvirt's bookkeeping carries (never part of a spec).
_VOLATILE_CHILDREN = frozenset({"alias"})
# Top-level elements a running domain reports that are runtime state, not config.
_VOLATILE_TOP = frozenset({"seclabel", "resource", "vcpus", "keywrap"})
# Domain attributes of a running domain only.
_VOLATILE_ATTRS = frozenset({"id"})

# Machine-type aliases: the spec may name the alias, libvirt stores the canonical name.
MACHINE_ALIASES = MappingProxyType({"pc": "pc-i440fx-", "q35": "pc-q35-", "virt": "virt-"})


def _key(parent_path: str, el: ET.Element, index: int, repeated: bool) -> str:
    if parent_path == "devices":
        return device_key(el, index, repeated)
    return f"{el.tag}[{index}]" if repeated else str(el.tag)


def _walk(el: ET.Element, path: str, out: dict[str, str], device: bool = False) -> None:
    """Flatten ``el`` at ``path``; ``device``: ``el`` is a child of ``<devices>``."""
    tag = el.tag
    attrib = el.attrib
    if tag in _SIZED and el.text and el.text.strip():
        out[path] = str(memory_kib(el.text.strip(), attrib.get("unit")))
        for name, value in attrib.items():
            if name != "unit":
                out[f"{path}@{name}"] = value
        return
    if attrib:
        if "unit" in attrib and any(a in attrib for a in _SIZED_ATTRS):
            _sized_attributes(attrib, path, out)
        else:
            for name, value in attrib.items():
                out[f"{path}@{name}"] = value.lower() if name == "address" and tag == "mac" else value
    text = el.text
    if text:
        text = text.strip()
        if text:
            out[path] = text
    n = len(el)
    if not n:
        return
    devices = path == "devices"
    if n > 1:
        _walk_children(el, path, out, device, devices)
        return
    child = el[0]
    ctag = child.tag
    if ctag in _VOLATILE_CHILDREN or (device and ctag == "address"):
        return
    key = device_key(child, 0, False) if devices else ctag
    _walk(child, f"{path}/{key}", out, devices)


def _sized_attributes(attrib: Mapping[str, str], path: str, out: dict[str, str]) -> None:
    """An element's attributes, those holding a size in its ``unit`` in KiB (e.g. ``<cell
    memory=... unit='b'>``); the unit itself left out."""
    unit = attrib["unit"]
    for name, value in attrib.items():
        if name == "unit":
            continue
        out[f"{path}@{name}"] = (
            str(memory_kib(value, unit)) if name in _SIZED_ATTRS and value.isdigit() else value
        )


def _walk_children(el: ET.Element, path: str, out: dict[str, str], device: bool, devices: bool) -> None:
    """Flatten the children of ``el`` (more than one) as ``_walk`` does."""
    counts: dict[str, int] = {}
    names: dict[str, set[str] | None] = {}
    for child in el:
        ctag = child.tag
        counts[ctag] = counts.get(ctag, 0) + 1
        if not devices:
            # Repeated elements that carry distinct names (clock timers, sysinfo entries,
            # cpu features) are keyed by name: libvirt may write them in its own order.
            cname = child.get("name")
            got = names.get(ctag, set())
            names[ctag] = None if got is None or cname is None or cname in got else got | {cname}
    seen: dict[str, int] = {}
    for child in el:
        ctag = child.tag
        if ctag in _VOLATILE_CHILDREN or (device and ctag == "address"):
            continue  # a device's bus address: libvirt's choice, carried, not compared
        i = seen.get(ctag, 0)
        seen[ctag] = i + 1
        repeated = counts[ctag] > 1
        if devices:
            key = device_key(child, i, repeated)
        elif repeated and names.get(ctag) is not None:
            key = f"{ctag}[{child.get('name')}]"
        else:
            key = f"{ctag}[{i}]" if repeated else ctag
        _walk(child, f"{path}/{key}", out, devices)


def _walk_devices(devices: ET.Element, out: dict[str, str]) -> frozenset[str]:
    """Flatten ``<devices>`` as ``_walk`` does, and return the owned device roots it wrote
    (``device_roots``, known here without reading the paths back)."""
    counts: dict[str, int] = {}
    for child in devices:
        counts[child.tag] = counts.get(child.tag, 0) + 1
    seen: dict[str, int] = {}
    roots: set[str] = set()
    for name, value in devices.attrib.items():
        out[f"devices@{name}"] = value
    if devices.text and devices.text.strip():
        out["devices"] = devices.text.strip()
    for child in devices:
        ctag = child.tag
        if ctag in _VOLATILE_CHILDREN:
            continue
        i = seen.get(ctag, 0)
        seen[ctag] = i + 1
        key = device_key(child, i, counts[ctag] > 1)
        before = len(out)
        _walk(child, f"devices/{key}", out, True)
        if ctag in OWNED_DEVICES and len(out) > before:
            roots.add("devices/" + key.split("/", 1)[0].split("@", 1)[0])
    return frozenset(roots)


def essence(xml: str) -> dict[str, str]:
    """The flat essence of a domain XML (ownership element and runtime state removed)."""
    return essence_of(ET.fromstring(xml))


def essence_of(dom: ET.Element) -> dict[str, str]:
    """The flat essence of a parsed domain (read only: the tree is not changed)."""
    children = ownership.unmarked(dom)
    out = EssenceDict()
    for name, value in dom.attrib.items():
        if name not in _VOLATILE_ATTRS:
            out[f"@{name}"] = value
    counts: dict[str, int] = {}
    for child in children:
        counts[child.tag] = counts.get(child.tag, 0) + 1
    seen: dict[str, int] = {}
    for child in children:
        if child.tag in _VOLATILE_TOP:
            continue
        i = seen.get(child.tag, 0)
        seen[child.tag] = i + 1
        if child.tag == "devices" and counts["devices"] == 1:
            out._roots = _walk_devices(child, out)
        else:
            _walk(child, _key("", child, i, counts[child.tag] > 1), out)
    if "vcpu" in out and "vcpu@current" not in out:
        out["vcpu@current"] = out["vcpu"]
    if "memory" in out and "currentMemory" not in out:
        out["currentMemory"] = out["memory"]
    return out


def device_root(path: str) -> str | None:
    """``devices/disk[vda]/source@file`` -> ``devices/disk[vda]``; None outside devices."""
    if not path.startswith("devices/"):
        return None
    head = path.split("/", 2)[1].split("@", 1)[0]
    return f"devices/{head}"


def device_kind(root: str) -> str:
    """``devices/disk[vda]`` -> ``disk``."""
    return root.split("/", 1)[1].split("[", 1)[0]


class EssenceDict(dict[str, str]):
    """An essence that remembers its owned device roots (computed once, on first use)."""

    __slots__ = ("_roots",)
    _roots: frozenset[str]


def device_roots(ess: Essence) -> frozenset[str]:
    """The owned device identities present in an essence, e.g. ``devices/disk[vda]``."""
    cached: frozenset[str] | None = getattr(ess, "_roots", None)
    if cached is not None:
        return cached
    roots = set()
    for path in ess:
        if path.startswith("devices/"):
            head = path[8:].split("/", 1)[0].split("@", 1)[0]
            if head.split("[", 1)[0] in OWNED_DEVICES:
                roots.add("devices/" + head)
    result = frozenset(roots)
    if isinstance(ess, EssenceDict):
        ess._roots = result
    return result


def same_value(path: str, desired: str, live: str) -> bool:
    """Whether a desired value and the value libvirt reports for it mean the same."""
    if desired == live:
        return True
    if path == "os/type@machine":
        prefix = MACHINE_ALIASES.get(desired)
        return live.startswith(prefix) if prefix else live.startswith(desired + "-")
    if desired == PORT_MODEL and path.startswith("devices/controller[pci:") and path.endswith("]@model"):
        # A PCI controller libvirt already numbered (a bridge of an earlier definition) keeps
        # its index; the root port rendered there is one fewer spare (``render.ports``).
        return live in KEPT_PCI_MODELS
    return False


# PCI controllers libvirt adds by itself on q35 that keep their index over a rendered root port.
KEPT_PCI_MODELS = frozenset({"pcie-to-pci-bridge", "dmi-to-pci-bridge", "pci-bridge"})


def _qemu64(path: str, desired: Essence) -> bool:
    """Whether ``desired`` names QEMU's default x86 CPU (custom ``qemu64``) at ``path``."""
    if desired.get("os/type@arch") not in ("x86_64", "i686") or desired.get("cpu/model") != "qemu64":
        return False
    if path.startswith("cpu/topology@"):
        return _socket_per_vcpu(path, desired, desired.get("vcpu"))
    return path in ("cpu@mode", "cpu@match", "cpu/model", "cpu/model@fallback")


def _socket_per_vcpu(path: str, desired: Essence, vcpus: str | None) -> bool:
    """Whether the desired topology is one socket per vCPU (``vcpus``, the maximum)."""
    return (
        desired.get("cpu/topology@cores") == "1"
        and desired.get("cpu/topology@threads") == "1"
        and desired.get("cpu/topology@sockets") == vcpus
        and desired.get(path) is not None
    )


def _in_cpu(path: str) -> bool:
    """Whether ``path`` lies in ``<cpu>`` (not ``<cputune>``, which pins vCPUs)."""
    return path == "cpu" or path.startswith(("cpu@", "cpu/"))


def readback_equivalent(path: str, desired: Essence, live: Essence) -> bool:
    """Whether a difference at ``path`` is only libvirt expanding what the spec left open.

    A ``host-model`` CPU is expanded into ``mode='custom'`` with a model and features
    when the domain starts; only the topology and NUMA stay comparable.
    """
    if path.startswith("cpu/topology@") and not any(p.startswith("cpu/topology") for p in live):
        # No topology: libvirt gives QEMU one socket per vCPU (-smp N,sockets=N,cores=1,threads=1).
        return _socket_per_vcpu(path, desired, live.get("vcpu"))
    if _in_cpu(path) and desired.get("cpu@mode") == "host-model" and live.get("cpu@mode") == "custom":
        return not (path.startswith(("cpu/topology", "cpu/numa")))
    if path == "clock@offset" and desired.get(path) in ("utc", "localtime"):
        # An adjustment makes libvirt store offset='variable' with the offset as basis.
        return live.get(path) == "variable" and live.get("clock@basis") == desired.get(path)
    if (path == "os@firmware" or path.startswith("os/firmware")) and "os@firmware" not in live:
        # Firmware auto-selection: the running domain names the files libvirt chose.
        efi = live.get("os/loader@type") == "pflash" or "os/nvram" in live
        return (desired.get("os@firmware") == "efi") == efi
    if path.startswith("clock/timer") and path.endswith("@present") and path not in live:
        # The RTC and the PIT of an x86 guest are always there: present='yes' is what
        # QEMU does without the attribute (KubeVirt writes it, virt-install does not).
        timer = path[: -len("@present")]
        return desired.get(path) == "yes" and desired.get(f"{timer}@name") in ("rtc", "pit")
    if _in_cpu(path) and not any(_in_cpu(p) for p in live) and _qemu64(path, desired):
        # No <cpu> on x86: QEMU's default model, qemu64 (libvirt writes it so for TCG).
        return True
    root = device_root(path)
    if root is None:
        return False
    rest = path[len(root) :]
    if rest == "/target@tray":
        return desired.get(path) == "closed" and path not in live  # the default, dropped on read-back
    if root.startswith("devices/graphics") and rest in ("@port", "@tlsPort", "@websocket"):
        # autoport: the running domain reports the port it was given.
        return desired.get(f"{root}@autoport") == "yes" or desired.get(f"{root}{rest}") == "-1"
    if root.startswith("devices/graphics") and rest == "/listen@address" and path not in live:
        # A VNC display without a listen address listens where qemu.conf's vnc_listen
        # says: 127.0.0.1 unless changed.
        return desired.get(path) == "127.0.0.1" and not live.get(f"{root}@listen")
    if rest.startswith("/driver@") and device_kind(root) == "disk":
        # An empty cdrom / floppy drive: libvirt drops the format of the missing media.
        removable = desired.get(f"{root}@device") in ("cdrom", "floppy")
        empty = not any(p.startswith(f"{root}/source") for p in live)
        return removable and empty
    return False


# -- carrying libvirt's addresses into a redefinition ----------------------------------


def device_index(devices: ET.Element) -> dict[str, ET.Element]:
    """The children of ``<devices>`` by their identity (``device_key``)."""
    counts: dict[str, int] = {}
    for child in devices:
        counts[child.tag] = counts.get(child.tag, 0) + 1
    seen: dict[str, int] = {}
    out: dict[str, ET.Element] = {}
    for child in devices:
        i = seen.get(child.tag, 0)
        seen[child.tag] = i + 1
        out[device_key(child, i, counts[child.tag] > 1)] = child
    return out


def _machine(dom: ET.Element) -> str:
    t = dom.find("os/type")
    return (t.get("machine") or "") if t is not None else ""


def _same_machine_family(desired: str, live: str) -> bool:
    if not desired or not live:
        return True
    if same_value("os/type@machine", desired, live) or same_value("os/type@machine", live, desired):
        return True
    fam = re.compile(r"^(pc-i440fx|pc-q35|pc|q35|virt)")
    d, lv = fam.match(desired), fam.match(live)
    alias = {"pc": "pc-i440fx", "q35": "pc-q35"}
    if d and lv:
        return alias.get(d.group(1), d.group(1)) == alias.get(lv.group(1), lv.group(1))
    return desired == live


def carry_addresses(desired_xml: str, live_xml: str) -> str:
    """The desired XML with the addresses the live definition already has
    (``carry_addresses_into``; the very string when nothing is carried)."""
    desired = ET.fromstring(desired_xml)
    changed = carry_addresses_into(desired, ET.fromstring(live_xml))
    return ET.tostring(desired, encoding="unicode") if changed else desired_xml


def carry_addresses_into(desired: ET.Element, live: ET.Element) -> bool:
    """Carry the addresses the live definition already has into the desired tree, in place;
    whether anything was carried. ``live`` is read only.

    Every desired device that exists on the live side (same identity, see
    ``device_key``) and names no address of its own gets the live one, so a
    redefinition that adds or removes a device never moves another. Controllers and
    the balloon libvirt added on its own are carried whole (with their addresses)
    unless the spec names them. Nothing is carried across a change of machine family
    (i440fx <-> q35), where the old addresses would not fit. A PCI bridge libvirt
    numbered where the spec renders a root port keeps its index (``same_value``). A spec
    without a UUID gets the live one (a redefinition, not a new domain).
    """
    changed = False
    live_uuid = live.find("uuid")
    if desired.find("uuid") is None and live_uuid is not None:
        # A spec without a UUID redefines the same domain, not a new one.
        name = desired.find("name")
        uuid = ET.Element("uuid")
        uuid.text = live_uuid.text
        desired.insert(list(desired).index(name) + 1 if name is not None else 0, uuid)
        changed = True
    if not _same_machine_family(_machine(desired), _machine(live)):
        return changed
    d_devices = desired.find("devices")
    l_devices = live.find("devices")
    if l_devices is None:
        return changed
    if d_devices is None:
        d_devices = ET.SubElement(desired, "devices")
    live_index = device_index(l_devices)
    desired_index = device_index(d_devices)
    for key, el in list(desired_index.items()):
        src = live_index.get(key)
        if src is None or el.find("address") is not None or el.tag != src.tag:
            continue
        if el.get("model") == PORT_MODEL and src.get("model") in KEPT_PCI_MODELS:
            kept = copy.deepcopy(src)  # the bridge keeps its index (``same_value``)
            for alias in kept.findall("alias"):
                kept.remove(alias)
            d_devices[list(d_devices).index(el)] = kept
            desired_index[key] = kept
            changed = True
            continue
        address = src.find("address")
        if address is not None:
            el.append(copy.deepcopy(address))
            changed = True
    desired_kinds = {el.tag for el in d_devices}
    for key, src in live_index.items():
        if src.tag not in IMPLICIT_DEVICES or key in desired_index:
            continue
        if src.tag == "memballoon" and "memballoon" in desired_kinds:
            continue
        clone = copy.deepcopy(src)
        for alias in clone.findall("alias"):
            clone.remove(alias)
        d_devices.append(clone)
        changed = True
    return changed


def device_xml(domain_xml: str, key: str) -> str | None:
    """The XML of one device of a domain by identity (``disk[vdb]``), or None."""
    dom = ET.fromstring(domain_xml)
    devices = dom.find("devices")
    if devices is None:
        return None
    el = device_index(devices).get(key)
    if el is None:
        return None
    clone = copy.deepcopy(el)
    for alias in clone.findall("alias"):
        clone.remove(alias)
    return ET.tostring(clone, encoding="unicode")


def device_addresses(domain_xml: str) -> dict[str, str]:
    """``{device identity: "type bus:slot.function"}`` for every device with an address."""
    dom = ET.fromstring(domain_xml)
    devices = dom.find("devices")
    out: dict[str, str] = {}
    if devices is None:
        return out
    for key, el in device_index(devices).items():
        a = el.find("address")
        if a is not None:
            out[key] = " ".join(f"{k}={v}" for k, v in sorted(a.attrib.items()))
    return out
