"""Disks: ``<disk>`` elements, their targets, controller and IO threads.

Input: ``devices.disks`` and ``volumes`` of the expanded spec, the host config (through
the render context). Output: ``<disk>`` elements in disk order, a SCSI controller when
needed, an ``<iothreads>`` count; each disk's source and the volumes apply must
provision come from ``volumes`` (``VOLUME_SOURCES``). Pure.

Target names: per prefix, the next free letter in disk order (virtio -> vd*,
sata/scsi/usb share sd*), a..z, aa.. like Linux. An unset bus is ``sata`` (KubeVirt's
amd64 default).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from reconciler.model.units import quantity_count
from reconciler.render.context import DEVICES, DOMAIN, SPEC, Guest, RenderContext
from reconciler.render.volumes import volume_source
from reconciler.render.xml import sub

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Mapping

    from reconciler.render.volumes import Source

BUSES = ("virtio", "sata", "scsi", "usb")
PREFIX = MappingProxyType({"virtio": "vd", "sata": "sd", "scsi": "sd", "usb": "sd"})
DISK_KEYS = (
    "name",
    "disk",
    "cdrom",
    "lun",
    "bootOrder",
    "serial",
    "dedicatedIOThread",
    "cache",
    "io",
    "blockSize",
    "shareable",
    "errorPolicy",
)
DISK_NO_EFFECT = ("tag",)
# The device kinds of a disk and the keys each takes.
TARGET_KEYS = MappingProxyType(
    {
        "disk": ("bus", "readonly", "pciAddress"),
        "cdrom": ("bus", "readonly", "tray"),
        "lun": ("bus", "readonly"),
    }
)
TRAY = ("open", "closed")
CACHE = ("none", "writethrough", "writeback")
IO = ("native", "threads", "default")
ERROR_POLICY = MappingProxyType(
    {"stop": "stop", "ignore": "ignore", "report": "report", "enospace": "enospace"}
)


def letters(index: int) -> str:
    """0 -> a, 25 -> z, 26 -> aa (Linux sd naming)."""
    if 0 <= index < 26:  # a VM's disks, nearly always
        return chr(97 + index)
    out = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        out = chr(ord("a") + rem) + out
    return out


# -- disks --------------------------------------------------------------------


class _Target(NamedTuple):
    """Where a disk appears to the guest: its device kind (disk, cdrom, lun), that
    kind's mapping and field path, its bus and whether it is read-only."""

    device: str
    spec: Mapping[str, Any]
    where: str
    bus: str
    readonly: bool | None


class _Layout:
    """What the disks of one VM share: the next free target letter of each prefix, the
    virtio model and queues, the IO threads."""

    def __init__(self, ctx: RenderContext, disks: list[Mapping[str, Any]]) -> None:
        self.next_letter = {"vd": 0, "sd": 0}
        self.transitional = bool(ctx.devices.get("useVirtioTransitional"))
        self.multiqueue = bool(ctx.devices.get("blockMultiQueue"))
        self.iothreads = _IOThreads(ctx, disks)

    def target_dev(self, bus: str) -> str:
        """The next target name on ``bus`` (vda, vdb, ...; sda, ...)."""
        prefix = PREFIX[bus]
        n = self.next_letter[prefix]
        self.next_letter[prefix] = n + 1
        return prefix + letters(n)


def render_disks(ctx: RenderContext, domain: ET.Element, devices: ET.Element, guest: Guest) -> None:
    disks = ctx.items(ctx.devices, "disks", DEVICES)
    by_name = _volumes_by_name(ctx)
    used: set[str] = set()
    layout = _Layout(ctx, disks)
    any_scsi = False
    for i, d in enumerate(disks):
        where = f"{DEVICES}.disks[{i}]"
        name = _disk_volume(ctx, d, where, by_name, used)
        target = _target(ctx, d, where)
        any_scsi = any_scsi or target.bus == "scsi"
        vol_index, vol = by_name[name]
        source = volume_source(ctx, guest, vol, vol_index)
        _check_lun(ctx, target, source)
        _render_disk(ctx, devices, d, where, name, target, source, layout)
    for name, (i, _) in by_name.items():
        if name not in used:
            raise ctx.error(f"{SPEC}.volumes[{i}]", f"volume {name!r} has no disk")
    if any_scsi:
        sub(devices, "controller", type="scsi", index="0", model="virtio-scsi")
    if layout.iothreads.count:
        sub(domain, "iothreads", str(layout.iothreads.count))


def _volumes_by_name(ctx: RenderContext) -> dict[str, tuple[int, Mapping[str, Any]]]:
    """Each volume of the spec by its name, with its index (named, and each name once)."""
    by_name: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for i, v in enumerate(ctx.items(ctx.spec, "volumes", SPEC)):
        name = v.get("name")
        if not isinstance(name, str) or not name:
            raise ctx.error(f"{SPEC}.volumes[{i}].name", "a volume needs a name")
        if name in by_name:
            raise ctx.error(f"{SPEC}.volumes[{i}].name", f"volume name {name!r} is used twice")
        by_name[name] = (i, v)
    return by_name


def _disk_volume(
    ctx: RenderContext,
    d: Mapping[str, Any],
    where: str,
    by_name: Mapping[str, tuple[int, Mapping[str, Any]]],
    used: set[str],
) -> str:
    """The name of the volume the disk attaches (a volume of the spec, attached once)."""
    ctx.known(d, where, DISK_KEYS, DISK_NO_EFFECT)
    name = ctx.string(d, "name", where)
    if name not in by_name:
        raise ctx.error(f"{where}.name", f"'{name}' not found.")
    if name in used:
        raise ctx.error(f"{where}.name", f"volume {name!r} is attached twice")
    used.add(name)
    return name


def _target(ctx: RenderContext, d: Mapping[str, Any], where: str) -> _Target:
    """The disk's device kind and bus, checked as KubeVirt's admission checks them."""
    targets = [k for k in TARGET_KEYS if d.get(k) is not None]
    if len(targets) > 1:
        raise ctx.error(where, "only one of disk, cdrom, lun may be set")
    device = targets[0] if targets else "disk"
    target = ctx.mapping(d, device, where) or {}
    twhere = f"{where}.{device}"
    if target.get("reservation"):
        raise ctx.error(f"{twhere}.reservation", "SCSI persistent reservations are not supported")
    ctx.known(target, twhere, TARGET_KEYS[device], ("reservation",))
    bus = ctx.string(target, "bus", twhere) or "sata"
    if bus == "ide":
        raise ctx.error(f"{twhere}.bus", "IDE bus is not supported")
    if bus not in BUSES:
        raise ctx.error(f"{twhere}.bus", f"{bus!r} is an unrecognized bus (supported: {', '.join(BUSES)})")
    if device == "cdrom" and bus == "virtio":
        raise ctx.error(f"{twhere}.bus", "Bus type virtio is invalid for CD-ROM device")
    readonly = ctx.boolean(target, "readonly", twhere)
    if device == "disk" and bus == "sata" and readonly:
        raise ctx.error(f"{twhere}.readonly", "sata hard-disks do not support read-only.")
    return _Target(device, target, twhere, bus, readonly)


def _check_lun(ctx: RenderContext, target: _Target, source: Source) -> None:
    """A lun is a block device of the pool, on a SCSI or virtio bus."""
    if target.device != "lun":
        return
    if source.type != "volume" or source.format != "raw":
        raise ctx.error(
            target.where,
            "a lun needs a block device: a persistentVolumeClaim or dataVolume in a block storage pool "
            "(host config storagePoolFormat: raw)",
        )
    if target.bus not in ("scsi", "virtio"):
        raise ctx.error(f"{target.where}.bus", f"a lun cannot use the {target.bus} bus (scsi or virtio)")


def _render_disk(
    ctx: RenderContext,
    devices: ET.Element,
    d: Mapping[str, Any],
    where: str,
    name: str,
    target: _Target,
    source: Source,
    layout: _Layout,
) -> None:
    """One ``<disk>``: its driver, source, target, boot order and what else the disk sets."""
    bus = target.bus
    el = sub(devices, "disk", type=source.type, device=target.device)
    if bus == "virtio" and layout.transitional:
        el.set("model", "virtio-transitional")
    _driver(ctx, el, d, where, name, bus, source, layout)
    if source.type == "file":
        sub(el, "source", file=source.file)
    else:
        sub(el, "source", pool=source.pool, volume=source.volume)
    dev = layout.target_dev(bus)
    tray = ctx.string(target.spec, "tray", target.where, TRAY) if target.device == "cdrom" else ""
    sub(el, "target", dev=dev, bus=bus, tray=tray or None)
    order = ctx.boot_order(d, where)
    if order:
        sub(el, "boot", order=order)
    readonly = target.readonly
    if (target.device == "cdrom" and readonly is not False) or readonly or source.readonly:
        sub(el, "readonly")
    _shareable(ctx, el, d, where, source)
    serial = ctx.string(d, "serial", where)
    if serial:
        sub(el, "serial", serial)
    _block_size(ctx, el, d, where, bus)
    addr = ctx.pci_address(target.spec, "pciAddress", target.where) if target.device == "disk" else None
    if addr:
        if bus != "virtio":
            raise ctx.error(f"{target.where}.pciAddress", "only virtio disks have a PCI address")
        sub(el, "address", **addr)


def _driver(
    ctx: RenderContext,
    el: ET.Element,
    d: Mapping[str, Any],
    where: str,
    name: str,
    bus: str,
    source: Source,
    layout: _Layout,
) -> None:
    """The disk's ``<driver>``: image format, cache and IO modes, error policy, queues, IO thread."""
    cache = ctx.string(d, "cache", where, CACHE)
    io = ctx.string(d, "io", where, IO)
    error_policy = ctx.string(d, "errorPolicy", where, ERROR_POLICY)
    queues = str(ctx.vcpus) if layout.multiqueue and bus == "virtio" else None
    dedicated = ctx.boolean(d, "dedicatedIOThread", where)
    if dedicated and bus != "virtio":
        raise ctx.error(f"{where}.dedicatedIOThread", f"IOThreads are not supported for disks on a {bus} bus")
    iothread = layout.iothreads.assign(name, bool(dedicated)) if bus == "virtio" else None
    sub(
        el,
        "driver",
        name="qemu",
        type=source.format or None,
        cache=cache or None,
        io=io or None,
        error_policy=ERROR_POLICY[error_policy] if error_policy else None,
        queues=queues,
        iothread=iothread,
    )


def _shareable(ctx: RenderContext, el: ET.Element, d: Mapping[str, Any], where: str, source: Source) -> None:
    """``<shareable/>``: a raw image without a host cache, which several domains may open."""
    if not ctx.boolean(d, "shareable", where):
        return
    cache = d.get("cache") or ""
    if cache not in ("none", ""):
        raise ctx.error(f"{where}.shareable", "a shareable disk needs cache none")
    if source.format != "raw":
        raise ctx.error(
            f"{where}.shareable",
            f"a shareable disk needs a raw image, not {source.format or 'unknown'}",
        )
    sub(el, "shareable")


def _block_size(ctx: RenderContext, el: ET.Element, d: Mapping[str, Any], where: str, bus: str) -> None:
    bs = ctx.mapping(d, "blockSize", where)
    if bs is None:
        return
    ctx.known(bs, f"{where}.blockSize", ("custom",))
    custom = ctx.mapping(bs, "custom", f"{where}.blockSize")
    if custom is None:
        raise ctx.error(f"{where}.blockSize", "only blockSize.custom is supported")
    cwhere = f"{where}.blockSize.custom"
    ctx.known(custom, cwhere, ("logical", "physical"), ("discardGranularity",))
    logical = ctx.integer(custom, "logical", cwhere, minimum=512)
    physical = ctx.integer(custom, "physical", cwhere, minimum=512)
    if logical is None or physical is None:
        raise ctx.error(cwhere, "logical and physical are required")
    if bus == "sata" and logical != 512:
        raise ctx.error(f"{cwhere}.logical", f"Logical size {logical} must be 512 for SATA devices")
    sub(el, "blockio", logical_block_size=str(logical), physical_block_size=str(physical))


class _IOThreads:
    """KubeVirt's IO thread layout (virt-launcher ``iothreads.GetIOThreadsCountType`` and
    ``assignDiskIOThread``): every disk without a dedicated thread counts towards the
    shared pool, capped by the policy's limit (``shared``: 1; ``auto``: 2 per requested
    CPU, 1 with an isolated emulator thread on dedicated CPUs); shared threads take ids
    1..n round-robin over virtio disks, dedicated ones follow. One dedicated disk alone:
    one thread."""

    def __init__(self, ctx: RenderContext, disks: list[Mapping[str, Any]]) -> None:
        policy = ctx.string(ctx.domain, "ioThreadsPolicy", DOMAIN, ("shared", "auto"))
        dedicated = sum(1 for d in disks if d.get("dedicatedIOThread"))
        self.enabled = bool(policy) or bool(dedicated)
        shared = len(disks) - dedicated
        limit = self._pool_limit(ctx, policy)
        if shared + dedicated > limit:
            shared = max(1, limit - dedicated)
        self.shared = shared
        self.count = shared + dedicated if self.enabled else 0
        self._next_shared = 1
        self._next_dedicated = shared + 1

    @staticmethod
    def _pool_limit(ctx: RenderContext, policy: str) -> int:
        if policy != "auto":
            return 1
        cpu = ctx.domain.get("cpu") or {}
        if cpu.get("dedicatedCpuPlacement") and cpu.get("isolateEmulatorThread"):
            return 1
        resources = ctx.domain.get("resources") or {}
        cpus = 1
        for part in ("requests", "limits"):
            value = (resources.get(part) or {}).get("cpu")
            if value is not None:
                try:
                    cpus = quantity_count(value)
                except ValueError as err:
                    raise ctx.error(f"{DOMAIN}.resources.{part}.cpu", str(err)) from err
                break
        return 2 * cpus

    def assign(self, name: str, dedicated: bool) -> str | None:
        if not self.enabled:
            return None
        if dedicated:
            tid = self._next_dedicated
            self._next_dedicated += 1
            return str(tid)
        tid = self._next_shared
        self._next_shared = tid % self.shared + 1
        return str(tid)


__all__ = ["letters", "render_disks"]
