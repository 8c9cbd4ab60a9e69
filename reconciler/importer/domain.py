"""One live domain read back into a KubeVirt VirtualMachine: the renderer in reverse.

Input: a domain's persistent XML (``VIR_DOMAIN_XML_INACTIVE``), its power state and
autostart flag. Output: a ``Reading``: the VirtualMachine object (a plain mapping, as
a YAML file holds it), what the domain asks of the host configuration (``HostAsk``:
the settings one host has once, such as the emulator, and the entries it lists, such
as disk directories and networks), and the reasons it cannot be imported, each naming
the element (the values are ``importer.reading``'s). Pure: no libvirt, no files.

This module reads the name, reads the machine through ``importer.machine`` and the
devices through ``importer.devices``, and builds the VM and its pass-through. For each
element the field is the one ``render/`` writes it from (docs/mapping.md); an
element this module does not read is left for ``importer.verify`` to find: the VM is
rendered again and compared with the live definition, so nothing is imported that the
plan would change or a redefinition would drop. This module never guesses a value the
XML does not hold.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler.importer.devices import read_devices
from reconciler.importer.machine import (
    read_clock,
    read_cpu,
    read_features,
    read_identity,
    read_memory,
    read_os,
)
from reconciler.importer.reading import DomainRead, Found, HostAsk, Reading
from reconciler.model import PowerState, RunStrategy
from reconciler.model.identifiers import is_dns_label, is_dns_subdomain
from reconciler.render.allowlist import OMIT
from reconciler.render.identity import ANNOTATION_ADOPT
from reconciler.render.passthrough import ANNOTATION as PASSTHROUGH
from reconciler.render.passthrough import fragment_text

if TYPE_CHECKING:
    from collections.abc import Mapping

GUEST_AGENT = "org.qemu.guest_agent.0"


def vm_name(domain: str) -> tuple[str, str, str]:
    """(namespace, name, "") of the VM a domain name is; ("", mapped, why) when the
    domain name is no VM's (``team-a_web`` is ``web`` in namespace ``team-a``)."""
    ns, sep, rest = domain.partition("_")
    if sep and is_dns_label(ns) and is_dns_subdomain(rest) and ns != "default":
        return ns, rest, ""
    if not sep and is_dns_subdomain(domain):
        return "default", domain, ""
    mapped = re.sub(r"[^a-z0-9.-]+", "-", domain.lower()).strip("-.") or "vm"
    mapped = re.sub(r"-{2,}", "-", mapped)[:63].strip("-.") or "vm"
    return "", mapped, f"{domain!r} is not a KubeVirt name (the domain name is the VM's name)"


def run_strategy(state: PowerState, autostart: bool) -> RunStrategy:
    """The run strategy that keeps a domain as it is: a running one running (``Always``
    when libvirt starts it with the host, else ``RerunOnFailure``: a clean stop stays
    stopped), a stopped one stopped (``Manual`` when libvirt autostarts it, so it still
    comes up with the host and the reconciler leaves its power alone, else ``Halted``)."""
    if state in (PowerState.RUNNING, PowerState.PAUSED):
        return RunStrategy.ALWAYS if autostart else RunStrategy.RERUN_ON_FAILURE
    return RunStrategy.MANUAL if autostart else RunStrategy.HALTED


def read_domain(
    xml: str, state: PowerState = PowerState.SHUTOFF, autostart: bool = False, keep: bool = False
) -> Reading:
    """The VirtualMachine a domain's persistent definition is, or the reasons it is none.

    ``keep``: what KubeVirt's fields cannot say and a pass-through may hold (SPICE
    graphics, a clock in local time, firmware auto-selection, a boot device list, no
    guest agent channel) goes into the VM's pass-through instead of being a reason."""
    dom = ET.fromstring(xml)
    r = DomainRead(keep=keep)
    name_el = dom.find("name")
    domain = (name_el.text or "") if name_el is not None else ""
    namespace, name, bad_name = vm_name(domain)
    if bad_name:
        r.refuse(
            "<name>",
            f"{bad_name}; rename the domain first (virsh domrename {domain!r} {name}) and import again",
        )
        r.notes.append(f"name {domain!r} maps to {name!r}")
    r.setting("domainType", dom.get("type", ""))
    tmpl: dict[str, Any] = {}
    spec_domain: dict[str, Any] = {}
    read_identity(dom, domain, spec_domain, r)
    read_memory(dom, spec_domain, r)
    read_cpu(dom, spec_domain, r)
    read_os(dom, domain, tmpl, spec_domain, r)
    read_features(dom, spec_domain, r)
    read_clock(dom, spec_domain, r)
    dev_el = dom.find("devices")
    found = read_devices(dev_el, namespace, r) if dev_el is not None else Found(namespace)
    spec_domain["devices"] = found.devices
    tmpl["domain"] = spec_domain
    if found.networks:
        tmpl["networks"] = found.networks
    if found.volumes:
        tmpl["volumes"] = found.volumes
    metadata: dict[str, Any] = {"name": name, "annotations": {ANNOTATION_ADOPT: "true"}}
    if namespace not in ("", "default"):
        metadata["namespace"] = namespace
    vm: dict[str, Any] = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": metadata,
        "spec": {"runStrategy": run_strategy(state, autostart).value, "template": {"spec": tmpl}},
    }
    fragment = _fragment(r, dev_el) if keep else None
    ask = HostAsk(
        settings=tuple(sorted(r.settings.items())),
        directories=tuple(dict.fromkeys(r.directories)),
        networks=tuple(dict.fromkeys(r.networks)),
        pod=r.pod,
        host_devices=tuple(r.host_devices),
        dedicated_cpus=tuple(r.dedicated),
        images=tuple(r.images),
    )
    reading = Reading(domain, name, namespace or "default", vm, ask, tuple(r.reasons), tuple(r.notes))
    if fragment is not None:
        reading = with_fragment(reading, fragment, prefixes_in(xml))
    return reading


_NS_DECL = re.compile(r'xmlns:([A-Za-z_][\w.-]*)="([^"]*)"')


def prefixes_in(xml: str) -> dict[str, str]:
    """``namespace URI -> prefix`` as a domain's XML declares them (libvirt keeps the
    prefix each application gave its metadata)."""
    out: dict[str, str] = {}
    for prefix, uri in _NS_DECL.findall(xml):
        out.setdefault(uri, prefix)
    return out


def _clean(el: ET.Element) -> ET.Element:
    """A live device or element without libvirt's bookkeeping (aliases, addresses)."""
    out = ET.Element(el.tag, dict(el.attrib))
    out.text = el.text.strip() if el.text and el.text.strip() else None
    for child in el:
        if child.tag not in ("alias", "address"):
            out.append(_clean(child))
    return out


def _fragment(r: DomainRead, dev_el: ET.Element | None) -> ET.Element | None:
    """The pass-through of what ``r`` kept, and the guest agent channel omitted when the
    live domain has none (the render always writes one, as KubeVirt does)."""
    frag = ET.Element("domain")
    for container, el in r.kept:
        node = frag
        for tag in container:
            found = node.find(tag)
            node = found if found is not None else ET.SubElement(node, tag)
        node.append(_clean(el))
    agent = dev_el is not None and any(c.get("name") == GUEST_AGENT for c in dev_el.findall("channel/target"))
    if not agent:
        devices = frag.find("devices")
        devices = devices if devices is not None else ET.SubElement(frag, "devices")
        channel = ET.SubElement(devices, "channel", {OMIT: "yes"})
        ET.SubElement(channel, "target", {"name": GUEST_AGENT})
    return frag if len(frag) else None


def with_fragment(reading: Reading, fragment: ET.Element | None, prefixes: Mapping[str, str]) -> Reading:
    """``reading`` with its VM's pass-through annotation set to ``fragment`` (None: none)."""
    tmpl = reading.vm["spec"]["template"]
    meta = tmpl.setdefault("metadata", {})
    annotations = meta.setdefault("annotations", {})
    if fragment is None or not len(fragment):
        annotations.pop(PASSTHROUGH, None)
        if not annotations:
            del meta["annotations"]
        if not meta:
            del tmpl["metadata"]
        return replace(reading, fragment=None, prefixes=dict(prefixes))
    annotations[PASSTHROUGH] = fragment_text(fragment, prefixes)
    # The template's metadata goes before its spec, as KubeVirt's examples write it.
    reading.vm["spec"]["template"] = {"metadata": tmpl.pop("metadata"), **tmpl}
    return replace(reading, fragment=fragment, prefixes=dict(prefixes))
