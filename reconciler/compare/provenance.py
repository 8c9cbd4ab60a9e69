"""Changes in the user's words: libvirt field changes mapped back to KubeVirt fields.

Input: the ``FieldChange`` records of a plan (libvirt essence paths such as
``currentMemory`` or ``cpu/topology@sockets``, values in libvirt units), optionally
the expanded VM at both sides and a ``Sources`` (where each catalog object and file
lives). Output: ``UserChange`` records, one per KubeVirt field path: the field as the
VM's YAML names it (``memory.guest``, ``cpu.sockets``), its values in human units
(``2Gi``), its class, the libvirt paths behind it (kept for ``-v`` and JSON), and where
it came from (the VM file, the instancetype or preference and its file, file:line);
``create_attributes``: what a new domain will be (CPU, memory, machine, disks,
interfaces), as a create is shown. Pure: reads files only through the reader handed in.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from types import MappingProxyType
from typing import TYPE_CHECKING

from reconciler import manifests
from reconciler.compare.changes import reserved_port_field
from reconciler.errors import ReconcilerError
from reconciler.expand.tree import dig
from reconciler.model import ExpandedVM, FieldPath, Manifest, RenderedDomain, RevisionInfo, parse_path, units
from reconciler.model.changes import ChangeClass, FieldChange
from reconciler.model.devices import DEVICE_KINDS
from reconciler.model.units import format_bytes
from reconciler.records import dataclass
from reconciler.render.passthrough import ANNOTATION as PASSTHROUGH
from reconciler.wording.escape import located
from reconciler.wording.images import image_line

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

DOMAIN = ("spec", "template", "spec", "domain")


@dataclass(frozen=True, slots=True)
class UserChange:
    field: str  # KubeVirt field path under spec.template.spec.domain, e.g. "memory.guest"
    old: str | None  # human units; None = absent
    new: str | None
    change_class: ChangeClass
    libvirt: tuple[str, ...]  # the libvirt XML (essence) paths behind it
    origin: str = ""  # "instancetype u1.medium (base/instancetypes.yaml:12)", "VM base/vms/a.yaml:20", ...


class Sources:
    """Where the catalog objects live, and a reader for their files (file:line lookups).

    ``load`` (instead of ``objects``) defers finding them until a change needs them:
    a diff with no changed VM never builds them."""

    def __init__(
        self,
        objects: Mapping[tuple[str, str, str], Manifest] | None = None,
        read: Callable[[str], bytes] | None = None,
        load: Callable[[], Mapping[tuple[str, str, str], Manifest]] | None = None,
    ) -> None:
        self._objects = objects
        self._load = load
        self.read = read

    @property
    def objects(self) -> Mapping[tuple[str, str, str], Manifest]:
        if self._objects is None:
            self._objects = self._load() if self._load is not None else {}
        return self._objects

    def locate(self, m: Manifest, path: FieldPath) -> str:
        """``file:line`` where the field at ``path`` of ``m`` was written (a field an overlay
        set: that overlay's file and line)."""
        if not m.path:
            return ""
        try:
            file, line, _ = manifests.field_position(m, path, self.read)
        except ReconcilerError:
            file, line = m.path, m.line
        return f"{file}:{line}" if line else file


# -- libvirt path -> KubeVirt field --------------------------------------------------

# The root ports KubeVirt reserves for hotplug (``render.ports``): one line for all of them
HOTPLUG_PORTS = "devices (hotplug root ports)"
# (regex on the essence path, KubeVirt field, unit of the libvirt value)
_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(rx), name, unit)
    for rx, name, unit in (
        (r"^currentMemory$", "memory.guest", "KiB"),
        (r"^memory$", "memory.maxGuest", "KiB"),
        (r"^vcpu@current$", "cpu.guest", ""),
        (r"^vcpu$", "cpu.maxSockets", ""),
        (r"^cpu/topology@sockets$", "cpu.sockets", ""),
        (r"^cpu/topology@cores$", "cpu.cores", ""),
        (r"^cpu/topology@threads$", "cpu.threads", ""),
        (r"^cpu/feature", "cpu.features", ""),
        (r"^cpu/numa", "cpu.numa", ""),
        (r"^cpu", "cpu.model", ""),
        (r"^os/type@machine$", "machine.type", ""),
        (r"^os/(loader|nvram)|^os@firmware|^os/firmware", "firmware.bootloader", ""),
        (r"^os/smbios|^sysinfo", "firmware.serial", ""),
        (r"^os/boot", "devices.disks.bootOrder", ""),
        (r"^features/(?P<x>[^/@]+)", "features.{x}", ""),
        (r"^clock", "clock", ""),
        (r"^memoryBacking", "memory.hugepages", ""),
        (r"^iothreads", "ioThreadsPolicy", ""),
        # one row per device kind the plan names by a field (``model.devices``)
        *(
            (rf"^devices/{k.element}\[(?P<x>[^\]]+)\]", f"{k.field} ({{x}})", "")
            if k.keyed
            else (rf"^devices/{k.element}(?=[\[/@]|$)", k.field, "")
            for k in DEVICE_KINDS
            if k.field
        ),
        (r"^(title|description|metadata)", "metadata.annotations", ""),
        (r"^name$", "metadata.name", ""),
        (r"^config/(?P<x>.+)$", "volume {x}", ""),
        (r"^uuid$", "firmware.uuid", ""),
        (r"^devices/controller\[pci:", HOTPLUG_PORTS, ""),
    )
)

# Where an instancetype / preference can set a KubeVirt field (path under its spec).
_INSTANCETYPE: Mapping[str, FieldPath] = MappingProxyType(
    {
        "memory.guest": ("memory", "guest"),
        "memory.maxGuest": ("memory", "maxGuest"),
        "memory.hugepages": ("memory", "hugepages"),
        "cpu.guest": ("cpu", "guest"),
        "cpu.maxSockets": ("cpu", "maxSockets"),
        "cpu.sockets": ("cpu", "guest"),
        "cpu.cores": ("cpu", "guest"),
        "cpu.threads": ("cpu", "guest"),
        "cpu.model": ("cpu", "model"),
        "cpu.numa": ("cpu", "numa"),
        "ioThreadsPolicy": ("ioThreadsPolicy",),
    }
)
_PREFERENCE: Mapping[str, FieldPath] = MappingProxyType(
    {
        "cpu.sockets": ("cpu", "preferredCPUTopology"),
        "cpu.cores": ("cpu", "preferredCPUTopology"),
        "cpu.threads": ("cpu", "preferredCPUTopology"),
        "cpu.features": ("cpu", "preferredCPUFeatures"),
        "machine.type": ("machine", "preferredMachineType"),
        "firmware.bootloader": ("firmware",),
        "clock": ("clock",),
        **{k.field: k.preference for k in DEVICE_KINDS if k.preference and not k.keyed},
    }
)
_PREFERENCE_PREFIX: Mapping[str, FieldPath] = MappingProxyType(
    {
        "features.": ("features",),
        **{k.field: k.preference for k in DEVICE_KINDS if k.preference and k.keyed},
    }
)


PASSTHROUGH_FIELD = "passthrough"
# Where a pass-through lives in the VM (the VMI template's annotations).
PASSTHROUGH_PATH: FieldPath = ("spec", "template", "metadata", "annotations", PASSTHROUGH)


def kept(path: str, passthrough: Iterable[str]) -> bool:
    """Whether ``path`` lies in what a pass-through wrote (``RenderedDomain.passthrough``)."""
    return any(path == k or path.startswith((f"{k}/", f"{k}@")) for k in passthrough)


def kubevirt_field(path: str, passthrough: Iterable[str] = ()) -> tuple[str, str]:
    """The KubeVirt field (under ``spec.template.spec.domain``) behind a libvirt path, and
    its unit; ``passthrough (<path>)`` for what the VM's pass-through wrote."""
    if passthrough and kept(path, passthrough):
        return f"{PASSTHROUGH_FIELD} ({path})", ""
    for rx, name, unit in _RULES:
        m = rx.match(path)
        if m:
            return name.format(**m.groupdict()), unit
    return f"domain ({path})", ""


def human(value: str | None, unit: str) -> str | None:
    """``4194304`` KiB -> ``4Gi``; other values as they are."""
    if value is None or unit != "KiB" or not value.isdigit():
        return value
    return format_bytes(int(value) * 1024)


VCPUS = "cpu (vCPUs)"  # the vCPU count of a VM without an instancetype: sockets × cores × threads


def field_names(fields: Iterable[FieldChange], instancetype: bool) -> list[str]:
    """The KubeVirt fields behind ``fields``, once each, as ``explain`` names them."""
    names = [kubevirt_field(f.path)[0] for f in fields]
    if not instancetype:
        names = [VCPUS if n in ("cpu.guest", "cpu.maxSockets") else n for n in names]
    return list(dict.fromkeys(names))


def explain(
    fields: Iterable[FieldChange],
    old_vm: ExpandedVM | None = None,
    new_vm: ExpandedVM | None = None,
    sources: Sources | None = None,
    passthrough: Iterable[str] = (),
    instancetype: bool | None = None,
) -> tuple[UserChange, ...]:
    """One ``UserChange`` per KubeVirt field (see the module doc), in the order of
    ``fields``; ``passthrough``: the essence paths the VM's pass-through wrote;
    ``instancetype``: whether the VM has one (its vCPU count is then ``cpu.guest``, else
    ``cpu (vCPUs)``); by default, what the expanded VMs say."""
    groups: dict[str, list[tuple[FieldChange, str]]] = {}
    passthrough = tuple(passthrough)
    for f in fields:
        name, unit = kubevirt_field(f.path, passthrough)
        groups.setdefault(name, []).append((f, unit))
    # The maximum moves with the guest size when nothing else sets it: one change, not two.
    guest, top = groups.get("memory.guest"), groups.get("memory.maxGuest")
    if guest and top and (guest[0][0].old, guest[0][0].new) == (top[0][0].old, top[0][0].new):
        guest.extend(groups.pop("memory.maxGuest"))
    cpus, vcpu = groups.get("cpu.guest"), groups.get("cpu.maxSockets")
    if cpus and vcpu and (cpus[0][0].old, cpus[0][0].new) == (vcpu[0][0].old, vcpu[0][0].new):
        cpus.extend(groups.pop("cpu.maxSockets"))
    elif vcpu and not cpus:
        groups["cpu.guest"] = groups.pop("cpu.maxSockets")
    vm = new_vm or old_vm
    if instancetype is None:
        instancetype = vm is not None and vm.instancetype is not None
    if "cpu.guest" in groups and not instancetype:
        # Without an instancetype the count is sockets × cores × threads: no cpu.guest field.
        groups = {(VCPUS if k == "cpu.guest" else k): v for k, v in groups.items()}
    out: list[UserChange] = []
    for name, members in groups.items():
        first, unit = members[0]
        restart = any(f.change_class == ChangeClass.RESTART for f, _ in members)
        if name == HOTPLUG_PORTS and all(reserved_port_field(f) for f, _ in members):
            ports = len({f.path.split("@", 1)[0] for f, _ in members})
            out.append(
                UserChange(
                    name,
                    None,
                    f"{ports} reserved (the guest gets them at its next cold boot)",
                    ChangeClass.LIVE,
                    tuple(f.path for f, _ in members),
                )
            )
            continue
        out.append(
            UserChange(
                field=name,
                old=human(first.old, unit),
                new=human(first.new, unit),
                change_class=ChangeClass.RESTART if restart else ChangeClass.LIVE,
                libvirt=tuple(f.path for f, _ in members),
                origin=origin(name, old_vm, new_vm, sources),
            )
        )
    return tuple(out)


def _vm_path(name: str) -> FieldPath:
    base = name.split(" ", 1)[0]
    if base == PASSTHROUGH_FIELD:
        return PASSTHROUGH_PATH
    if base == "cpu":
        return (*DOMAIN, "cpu")
    if base == "volume":  # a generated ISO (``config/<volume>``)
        return (*DOMAIN[:-1], "volumes")
    return DOMAIN + parse_path(base)


def _catalog_object(info: RevisionInfo, sources: Sources | None) -> Manifest | None:
    if sources is None:
        return None
    return sources.objects.get((info.kind, info.namespace, info.name))


def _from_object(
    role: str, info: RevisionInfo | None, spec_path: FieldPath | None, sources: Sources | None
) -> str:
    if info is None or spec_path is None:
        return ""
    label = f"{role} {info.name}"
    m = _catalog_object(info, sources)
    if m is not None and dig(m.obj, "spec", *spec_path) is None:
        return ""
    if m is None:
        data = info.data
        return f"{label} (spec.{'.'.join(map(str, spec_path))})" if data else label
    where = sources.locate(m, ("spec", *spec_path)) if sources is not None else ""
    return f"{label} spec.{'.'.join(map(str, spec_path))} ({where})" if where else label


def _preference_path(name: str) -> FieldPath | None:
    if name in _PREFERENCE:
        return _PREFERENCE[name]
    for prefix, path in _PREFERENCE_PREFIX.items():
        if name.startswith(prefix):
            return path
    return None


def origin(
    name: str, old_vm: ExpandedVM | None, new_vm: ExpandedVM | None, sources: Sources | None = None
) -> str:
    """Where the head value of KubeVirt field ``name`` comes from, in words (file:line when known)."""
    vm = new_vm or old_vm
    if vm is None:
        return ""
    src = vm.source
    parts: list[str] = []
    for role, key in (("instancetype", "instancetype"), ("preference", "preference")):
        before = getattr(old_vm, key) if old_vm is not None else None
        after = getattr(new_vm, key) if new_vm is not None else None
        if before is not None and after is not None and before.name != after.name:
            where = _locate_vm(src, ("spec", key, "name"), sources)
            parts.append(f"the VM's {role} {before.name} → {after.name} ({where})")
        elif before is not None and after is not None and before.hash != after.hash:
            parts.append(f"{role} {after.name} edited")
    path = _vm_path(name)
    if dig(src.obj, *path) is not None:
        label = "set by" if src.set_at(path) is not None else "VM"
        parts.append(f"{label} {_locate_vm(src, path, sources)}")
    else:
        got = _from_object("instancetype", vm.instancetype, _INSTANCETYPE.get(name), sources) or _from_object(
            "preference", vm.preference, _preference_path(name), sources
        )
        if got:
            parts.append(got)
        elif not parts:
            parts.append(f"VM {located(src)}")
    return "; ".join(parts)


def _locate_vm(src: Manifest, path: FieldPath, sources: Sources | None) -> str:
    if sources is not None:
        return sources.locate(src, path)
    at = src.set_at(path)
    if at is not None:
        return f"{at[0]}:{at[1]}" if at[1] else at[0]
    return located(src)


def content_only(c: UserChange) -> bool:
    """A generated ISO whose objects kept their names but not their content."""
    return c.old == c.new and bool(c.libvirt) and c.libvirt[0].startswith("config/")


def line(c: UserChange, verbose: bool = False) -> str:
    """``memory.guest: 2Gi → 4Gi (from ...)``; ``verbose`` adds the libvirt paths."""
    old = "(none)" if c.old is None else c.old
    new = "(none)" if c.new is None else c.new
    text = f"{c.field}: {old} → {new}"
    if content_only(c):
        text = f"{c.field}: {c.new or 'content'} changed"  # a generated ISO: names only
    if c.origin:
        text += f"  [{c.origin}]"
    if verbose:
        text += f"  (libvirt: {', '.join(c.libvirt)})"
    return text


def lines(
    fields: Sequence[FieldChange],
    verbose: bool = False,
    passthrough: Iterable[str] = (),
    instancetype: bool = False,
) -> list[str]:
    """Plan lines without the expanded VMs (the daemon keeps none): field, values, class."""
    return [
        f"{c.change_class:<7} {line(c, verbose)}"
        for c in explain(fields, passthrough=passthrough, instancetype=instancetype)
    ]


def create_attributes(d: RenderedDomain) -> list[str]:
    """What a new domain will be, as terraform shows a create: CPU, memory, machine, each
    disk (bus, where its data lives, the size a disk is created with) and each interface
    (model, what it plugs into, MAC), from the definition the plan carries."""
    try:
        dom = ET.fromstring(d.xml)
    except ET.ParseError:
        return []
    sizes = {v.path: v.capacity for v in d.volumes if v.capacity}
    images = {v.path: image_line(v.image, v.digest, v.backing) for v in d.volumes if v.image}
    out = [line for line in (_cpu_line(dom), _memory_line(dom), _machine_line(dom)) if line]
    out.extend(_disk_line(disk, sizes, images) for disk in dom.findall("devices/disk"))
    out.extend(_interface_line(nic) for nic in dom.findall("devices/interface"))
    for hostdev in dom.findall("devices/hostdev"):
        out.append(f"hostdev   {hostdev.get('type', '')}")
    return out


def _cpu_line(dom: ET.Element) -> str:
    """vCPUs, their topology and the CPU mode ("" without a vcpu element)."""
    vcpu = dom.find("vcpu")
    if vcpu is None or not vcpu.text:
        return ""
    count = vcpu.get("current") or vcpu.text.strip()
    topo = dom.find("cpu/topology")
    shape = (
        f" ({topo.get('sockets', '1')} socket(s) × {topo.get('cores', '1')} core(s) × "
        f"{topo.get('threads', '1')} thread(s))"
        if topo is not None
        else ""
    )
    cpu = dom.find("cpu")
    model = cpu.get("mode", "") if cpu is not None else ""
    return f"cpu       {count} vCPUs{shape}" + (f", {model}" if model else "")


def _memory_line(dom: ET.Element) -> str:
    """The memory the guest starts with ("" without one)."""
    mem = dom.find("currentMemory")
    mem = mem if mem is not None else dom.find("memory")
    if mem is None or not mem.text:
        return ""
    return f"memory    {format_bytes(units.memory_bytes(mem.text.strip(), mem.get('unit')))}"


def _machine_line(dom: ET.Element) -> str:
    """The machine type and firmware ("" without a machine type)."""
    machine = dom.find("os/type")
    if machine is None or not machine.get("machine"):
        return ""
    os_el = dom.find("os")
    firmware = os_el.get("firmware", "") if os_el is not None else ""
    return f"machine   {machine.get('machine')}" + (f", firmware {firmware}" if firmware else "")


def _disk_line(disk: ET.Element, sizes: dict[str, int], images: dict[str, str]) -> str:
    """A disk: its device, bus, where its data lives, the size it is created with and
    the image it is made from."""
    target = disk.find("target")
    source = disk.find("source")
    dev = target.get("dev", "?") if target is not None else "?"
    bus = target.get("bus", "") if target is not None else ""
    where = ""
    if source is not None:
        where = (
            source.get("file")
            or source.get("dev")
            or (f"pool {source.get('pool')} volume {source.get('volume')}" if source.get("volume") else "")
        )
    size = sizes.get(where) or sizes.get(source.get("volume", "") if source is not None else "")
    kind = disk.get("device", "disk")
    text = f"{kind:<9} {dev}: {bus or 'default bus'}" + (f", {where}" if where else ", no media")
    text += f" ({format_bytes(size)} when created)" if size else ""
    image = images.get(where) or images.get(source.get("volume", "") if source is not None else "")
    return text + (f", {image}" if image else "")


def _interface_line(nic: ET.Element) -> str:
    """An interface: its model, what it plugs into, its MAC."""
    source = nic.find("source")
    nic_model = nic.find("model")
    mac = nic.find("mac")
    plug = nic.get("type", "")
    if source is not None:
        name = source.get("network") or source.get("bridge") or source.get("dev") or ""
        plug = f"{plug} {name}".strip()
    text = f"interface {nic_model.get('type') if nic_model is not None else 'default model'}, {plug}"
    return text + (f", MAC {mac.get('address')}" if mac is not None else "")
