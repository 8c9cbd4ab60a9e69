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
from typing import TYPE_CHECKING, Any

from reconciler.model.units import quantity_count
from reconciler.render.context import DEVICES, DOMAIN, SPEC, Guest, RenderContext
from reconciler.render.volumes import volume_source
from reconciler.render.xml import sub

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Mapping

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
CACHE = ("none", "writethrough", "writeback")
IO = ("native", "threads", "default")
ERROR_POLICY = MappingProxyType(
    {"stop": "stop", "ignore": "ignore", "report": "report", "enospace": "enospace"}
)


def letters(index: int) -> str:
    """0 -> a, 25 -> z, 26 -> aa (Linux sd naming)."""
    out = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        out = chr(ord("a") + rem) + out
    return out


# -- disks --------------------------------------------------------------------


def render_disks(ctx: RenderContext, domain: ET.Element, devices: ET.Element, guest: Guest) -> None:
    disks = ctx.items(ctx.devices, "disks", DEVICES)
    volumes = ctx.items(ctx.spec, "volumes", SPEC)
    by_name: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for i, v in enumerate(volumes):
        name = v.get("name")
        if not isinstance(name, str) or not name:
            raise ctx.error(f"{SPEC}.volumes[{i}].name", "a volume needs a name")
        if name in by_name:
            raise ctx.error(f"{SPEC}.volumes[{i}].name", f"volume name {name!r} is used twice")
        by_name[name] = (i, v)
    used: set[str] = set()
    next_letter = {"vd": 0, "sd": 0}
    transitional = bool(ctx.devices.get("useVirtioTransitional"))
    multiqueue = bool(ctx.devices.get("blockMultiQueue"))
    iothreads = _IOThreads(ctx, disks)
    any_scsi = False

    for i, d in enumerate(disks):
        where = f"{DEVICES}.disks[{i}]"
        ctx.known(d, where, DISK_KEYS, DISK_NO_EFFECT)
        name = ctx.string(d, "name", where)
        if name not in by_name:
            raise ctx.error(f"{where}.name", f"'{name}' not found.")
        if name in used:
            raise ctx.error(f"{where}.name", f"volume {name!r} is attached twice")
        used.add(name)
        targets = [k for k in ("disk", "cdrom", "lun") if d.get(k) is not None]
        if len(targets) > 1:
            raise ctx.error(where, "only one of disk, cdrom, lun may be set")
        device = targets[0] if targets else "disk"
        target = ctx.mapping(d, device, where) or {}
        twhere = f"{where}.{device}"
        target_keys = {
            "disk": ("bus", "readonly", "pciAddress"),
            "cdrom": ("bus", "readonly", "tray"),
            "lun": ("bus", "readonly"),
        }
        if target.get("reservation"):
            raise ctx.error(f"{twhere}.reservation", "SCSI persistent reservations are not supported")
        ctx.known(target, twhere, target_keys[device], ("reservation",))
        bus = ctx.string(target, "bus", twhere) or "sata"
        if bus == "ide":
            raise ctx.error(f"{twhere}.bus", "IDE bus is not supported")
        if bus not in BUSES:
            raise ctx.error(
                f"{twhere}.bus", f"{bus!r} is an unrecognized bus (supported: {', '.join(BUSES)})"
            )
        if device == "cdrom" and bus == "virtio":
            raise ctx.error(f"{twhere}.bus", "Bus type virtio is invalid for CD-ROM device")
        readonly = ctx.boolean(target, "readonly", twhere)
        if device == "disk" and bus == "sata" and readonly:
            raise ctx.error(f"{twhere}.readonly", "sata hard-disks do not support read-only.")
        any_scsi = any_scsi or bus == "scsi"

        vol_index, vol = by_name[name]
        source = volume_source(ctx, guest, vol, vol_index)
        if device == "lun" and (source.type != "volume" or source.format != "raw"):
            raise ctx.error(
                twhere,
                "a lun needs a block device: a persistentVolumeClaim or dataVolume in a block storage pool "
                "(host config storagePoolFormat: raw)",
            )
        if device == "lun" and bus not in ("scsi", "virtio"):
            raise ctx.error(f"{twhere}.bus", f"a lun cannot use the {bus} bus (scsi or virtio)")

        el = sub(devices, "disk", type=source.type, device=device)
        if bus == "virtio" and transitional:
            el.set("model", "virtio-transitional")
        cache = ctx.string(d, "cache", where, CACHE)
        io = ctx.string(d, "io", where, IO)
        error_policy = ctx.string(d, "errorPolicy", where, tuple(ERROR_POLICY))
        queues = str(ctx.vcpus) if multiqueue and bus == "virtio" else None
        dedicated = ctx.boolean(d, "dedicatedIOThread", where)
        if dedicated and bus != "virtio":
            raise ctx.error(
                f"{where}.dedicatedIOThread", f"IOThreads are not supported for disks on a {bus} bus"
            )
        iothread = iothreads.assign(name, bool(dedicated)) if bus == "virtio" else None
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
        if source.type == "file":
            sub(el, "source", file=source.file)
        else:
            sub(el, "source", pool=source.pool, volume=source.volume)
        prefix = PREFIX[bus]
        dev = prefix + letters(next_letter[prefix])
        next_letter[prefix] += 1
        tray = ctx.string(target, "tray", twhere, ("open", "closed")) if device == "cdrom" else ""
        sub(el, "target", dev=dev, bus=bus, tray=tray or None)
        order = ctx.boot_order(d, where)
        if order:
            sub(el, "boot", order=order)
        if (device == "cdrom" and readonly is not False) or readonly or source.readonly:
            sub(el, "readonly")
        if ctx.boolean(d, "shareable", where):
            if cache not in ("none", ""):
                raise ctx.error(f"{where}.shareable", "a shareable disk needs cache none")
            if source.format != "raw":
                raise ctx.error(
                    f"{where}.shareable",
                    f"a shareable disk needs a raw image, not {source.format or 'unknown'}",
                )
            sub(el, "shareable")
        serial = ctx.string(d, "serial", where)
        if serial:
            sub(el, "serial", serial)
        _block_size(ctx, el, d, where, bus)
        addr = ctx.pci_address(target, "pciAddress", twhere) if device == "disk" else None
        if addr:
            if bus != "virtio":
                raise ctx.error(f"{twhere}.pciAddress", "only virtio disks have a PCI address")
            sub(el, "address", **addr)

    for name, (i, _) in by_name.items():
        if name not in used:
            raise ctx.error(f"{SPEC}.volumes[{i}]", f"volume {name!r} has no disk")
    if any_scsi:
        sub(devices, "controller", type="scsi", index="0", model="virtio-scsi")
    if iothreads.count:
        sub(domain, "iothreads", str(iothreads.count))


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
