"""Disks and storage: ``<disk>`` elements and the volumes apply must provision.

Input: ``devices.disks`` and ``volumes`` of the expanded spec (plus
``dataVolumeTemplates``), the host config (allowed directories, image map, pool).
Output: ``<disk>`` elements in disk order, a SCSI controller when needed, an
``<iothreads>`` count, and ``VolumeSpec`` records. Pure: every host path is checked
lexically against the allowed directories here; ``provision`` re-checks them with
symlinks resolved before touching anything.

Target names: per prefix, the next free letter in disk order (virtio -> vd*,
sata/scsi/usb share sd*), a..z, aa.. like Linux. An unset bus is ``sata`` (KubeVirt's
amd64 default). Source mapping (a named table, ``VOLUME_SOURCES``):
hostDisk -> the file; emptyDisk -> per-VM sparse qcow2, fresh each cold boot;
containerDisk -> per-VM qcow2 overlay over the image map's file (read-only base);
persistentVolumeClaim / dataVolume -> a volume in the host's storage pool;
cloudInitNoCloud / cloudInitConfigDrive -> a generated ISO.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.hostconfig import path_inside
from reconciler.model import VolumeSpec, domain_name
from reconciler.render import configdisk
from reconciler.render.cloudinit import cloud_init_payload
from reconciler.render.context import DEVICES, DOMAIN, SPEC, RenderContext
from reconciler.render.units import quantity_count
from reconciler.render.xml import sub

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Callable, Mapping

BUSES = ("virtio", "sata", "scsi", "usb")
PREFIX = {"virtio": "vd", "sata": "sd", "scsi": "sd", "usb": "sd"}
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
ERROR_POLICY = {"stop": "stop", "ignore": "ignore", "report": "report", "enospace": "enospace"}
RAW_SUFFIXES = (".img", ".raw", ".iso")


@dataclass(frozen=True, slots=True)
class Source:
    """How a volume appears in ``<disk>``: a file or a pool volume."""

    type: str  # "file" | "volume"
    format: str  # driver type; "" = leave it to the pool volume
    file: str = ""
    pool: str = ""
    volume: str = ""
    readonly: bool = False  # the volume itself is read-only (PVC readOnly)


def letters(index: int) -> str:
    """0 -> a, 25 -> z, 26 -> aa (Linux sd naming)."""
    out = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        out = chr(ord("a") + rem) + out
    return out


def format_for(path: str) -> str:
    return "raw" if path.endswith(RAW_SUFFIXES) else "qcow2"


# -- volume sources -----------------------------------------------------------


def _host_disk(ctx: RenderContext, name: str, src: Mapping[str, Any], where: str) -> Source:
    ctx.known(src, where, ("path", "type", "capacity"), ("shared",))
    path = ctx.check_path(ctx.string(src, "path", where), f"{where}.path")
    if path_inside(path, (ctx.host.volume_dir,)):
        raise ctx.error(
            f"{where}.path", f"{path} is inside the volume directory, which holds other VMs' generated disks"
        )
    if any(path == img.path for img in ctx.host.images.values()):
        raise ctx.error(
            f"{where}.path", f"{path} is a base image of the host config's image map (kept read-only)"
        )
    kind = ctx.string(src, "type", where, ("Disk", "DiskOrCreate"))
    if not kind:
        raise ctx.error(f"{where}.type", "hostDisk type (Disk or DiskOrCreate) is required")
    fmt = format_for(path)
    if kind == "Disk":
        ctx.add_volume(VolumeSpec(kind="file", path=path, format=fmt, must_exist=True))
    else:
        capacity = ctx.capacity(src, "capacity", where)
        if not capacity:
            raise ctx.error(f"{where}.capacity", "DiskOrCreate needs a capacity")
        ctx.add_volume(VolumeSpec(kind="file", path=path, capacity=capacity, format=fmt))
    return Source("file", fmt, file=path)


def _empty_disk(ctx: RenderContext, name: str, src: Mapping[str, Any], where: str) -> Source:
    ctx.known(src, where, ("capacity",))
    capacity = ctx.capacity(src, "capacity", where)
    if not capacity:
        raise ctx.error(f"{where}.capacity", "emptyDisk needs a capacity")
    path = ctx.artefact_path(f"{name}.qcow2")
    ctx.add_volume(VolumeSpec(kind="file", path=path, capacity=capacity, format="qcow2", ephemeral=True))
    return Source("file", "qcow2", file=path)


def _container_disk(ctx: RenderContext, name: str, src: Mapping[str, Any], where: str) -> Source:
    ctx.known(src, where, ("image",), ("imagePullPolicy", "imagePullSecret", "path"))
    image = ctx.string(src, "image", where)
    if not image:
        raise ctx.error(f"{where}.image", "an image is required")
    if src.get("path") not in (None, ""):
        raise ctx.error(f"{where}.path", "a path inside the image is not supported; map the disk file itself")
    local = ctx.host.images.get(image)
    if local is None:
        raise ctx.error(f"{where}.image", f"image {image!r} is not in the host config's image map")
    backing = ctx.check_path(local.path, f"{where}.image")
    path = ctx.artefact_path(f"{name}.overlay.qcow2")
    ctx.add_volume(
        VolumeSpec(
            kind="overlay",
            path=path,
            format="qcow2",
            backing=backing,
            backing_format=local.format,
            ephemeral=True,
        )
    )
    return Source("file", "qcow2", file=path)


def _templates(ctx: RenderContext) -> dict[str, tuple[int, Mapping[str, Any]]]:
    spec = ctx.vm.vm.get("spec") or {}
    out: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for i, t in enumerate(ctx.items(spec, "dataVolumeTemplates", "spec")):
        name = (t.get("metadata") or {}).get("name")
        if isinstance(name, str) and name:
            out[name] = (i, t)
    return out


def _data_source_key(ctx: RenderContext, ref: Mapping[str, Any], where: str) -> str:
    """The host config's image-map key of a DataVolume's ``sourceRef``:
    ``DataSource <namespace>/<name>`` (the VM's namespace unless the reference names one)."""
    ctx.known(ref, where, ("kind", "name", "namespace"))
    if ctx.string(ref, "kind", where) != "DataSource":
        raise ctx.error(f"{where}.kind", "sourceRef kind must be DataSource")
    name = ctx.string(ref, "name", where)
    if not name:
        raise ctx.error(f"{where}.name", "sourceRef needs the DataSource's name")
    namespace = ctx.string(ref, "namespace", where) or ctx.vm.namespace
    return f"DataSource {namespace}/{name}"


def _pool_volume(ctx: RenderContext, claim: str, where: str, readonly: bool) -> Source:
    if not claim or "/" in claim or claim in (".", ".."):
        raise ctx.error(where, f"{claim!r} is not a valid claim name")
    volume = domain_name(ctx.vm.namespace, claim)
    pool = ctx.host.storage_pool
    fmt = ctx.host.storage_pool_format
    tmpl = _templates(ctx).get(claim)
    if tmpl is None:
        ctx.add_volume(VolumeSpec(kind="pool-volume", path=volume, pool=pool, format=fmt, must_exist=True))
        return Source("volume", fmt, pool=pool, volume=volume, readonly=readonly)
    i, t = tmpl
    twhere = f"spec.dataVolumeTemplates[{i}].spec"
    tspec = ctx.mapping(t, "spec", f"spec.dataVolumeTemplates[{i}]") or {}
    storage = ctx.mapping(tspec, "storage", twhere) or ctx.mapping(tspec, "pvc", twhere) or {}
    req = ((storage.get("resources") or {}).get("requests")) or {}
    capacity = ctx.capacity(req, "storage", f"{twhere}.storage.resources.requests")
    if not capacity:
        raise ctx.error(f"{twhere}.storage.resources.requests.storage", "a size is required")
    source = ctx.mapping(tspec, "source", twhere) or {}
    ctx.known(source, f"{twhere}.source", ("blank", "registry", "http"))
    backing = backing_format = ""
    ref = ctx.mapping(tspec, "sourceRef", twhere)
    if ref is not None:
        if source:
            raise ctx.error(f"{twhere}.sourceRef", "a DataVolume takes source or sourceRef, not both")
        key = _data_source_key(ctx, ref, f"{twhere}.sourceRef")
        local = ctx.host.images.get(key)
        if local is None:
            raise ctx.error(
                f"{twhere}.sourceRef",
                f"{key!r} is not in the host config's image map (map the DataSource to a local image: "
                f"images: {{{key!r}: /path/to/image.qcow2}})",
            )
        backing = ctx.check_path(local.path, f"{twhere}.sourceRef")
        backing_format = local.format
    for kind in ("registry", "http"):
        s = ctx.mapping(source, kind, f"{twhere}.source")
        if s is None:
            continue
        url = ctx.string(s, "url", f"{twhere}.source.{kind}")
        key = url.removeprefix("docker://") if kind == "registry" else url
        local = ctx.host.images.get(key)
        if local is None:
            raise ctx.error(f"{twhere}.source.{kind}.url", f"{key!r} is not in the host config's image map")
        backing = ctx.check_path(local.path, f"{twhere}.source.{kind}.url")
        backing_format = local.format
    ctx.add_volume(
        VolumeSpec(
            kind="pool-volume",
            path=volume,
            pool=pool,
            capacity=capacity,
            format=fmt,
            backing=backing,
            backing_format=backing_format,
        )
    )
    return Source("volume", fmt, pool=pool, volume=volume, readonly=readonly)


def _pvc(ctx: RenderContext, name: str, src: Mapping[str, Any], where: str) -> Source:
    ctx.known(src, where, ("claimName", "readOnly"), ("hotpluggable",))
    return _pool_volume(
        ctx, ctx.string(src, "claimName", where), f"{where}.claimName", bool(src.get("readOnly"))
    )


def _data_volume(ctx: RenderContext, name: str, src: Mapping[str, Any], where: str) -> Source:
    ctx.known(src, where, ("name",), ("hotpluggable",))
    return _pool_volume(ctx, ctx.string(src, "name", where), f"{where}.name", False)


def _generated_iso(ctx: RenderContext, name: str, content: bytes) -> Source:
    """An ISO built from ``content`` at each cold boot (cloud-init, config disks); the
    build's Secrets it names go beside it, their digests into the payload."""
    path = ctx.artefact_path(f"{name}.iso")
    content, secrets, digest = configdisk.finish(ctx, name, content)
    ctx.add_volume(
        VolumeSpec(
            kind="cloudinit-iso", path=path, format="raw", content=content, ephemeral=True, secrets=secrets
        )
    )
    ctx.config.append(digest)
    return Source("file", "raw", file=path)


def _cloud_init(kind: str) -> Callable[[RenderContext, str, Mapping[str, Any], str], Source]:
    def render(ctx: RenderContext, name: str, src: Mapping[str, Any], where: str) -> Source:
        return _generated_iso(ctx, name, cloud_init_payload(ctx, kind, src, where))

    return render


def _config_disk(
    payload: Callable[[RenderContext, Mapping[str, Any], str], bytes],
) -> Callable[[RenderContext, str, Mapping[str, Any], str], Source]:
    def render(ctx: RenderContext, name: str, src: Mapping[str, Any], where: str) -> Source:
        return _generated_iso(ctx, name, payload(ctx, src, where))

    return render


VOLUME_SOURCES: dict[str, Callable[[RenderContext, str, Mapping[str, Any], str], Source]] = {
    "hostDisk": _host_disk,
    "emptyDisk": _empty_disk,
    "containerDisk": _container_disk,
    "persistentVolumeClaim": _pvc,
    "dataVolume": _data_volume,
    "cloudInitNoCloud": _cloud_init("cloudInitNoCloud"),
    "cloudInitConfigDrive": _cloud_init("cloudInitConfigDrive"),
    "configMap": _config_disk(configdisk.config_map_payload),
    "secret": _config_disk(configdisk.secret_payload),
    "sysprep": _config_disk(configdisk.sysprep_payload),
}


def _volume_source(ctx: RenderContext, vol: Mapping[str, Any], index: int) -> Source:
    where = f"{SPEC}.volumes[{index}]"
    name = str(vol.get("name"))
    kinds = [k for k in vol if k != "name"]
    if len(kinds) != 1:
        raise ctx.error(where, f"volume {name!r} must have exactly one source")
    kind = kinds[0]
    handler = VOLUME_SOURCES.get(kind)
    if handler is None:
        raise ctx.error(f"{where}.{kind}", f"volume source {kind} is not supported on a libvirt host")
    src = vol[kind] if vol[kind] is not None else {}
    if not isinstance(src, dict):
        raise ctx.error(f"{where}.{kind}", "expected a mapping")
    return handler(ctx, name, src, f"{where}.{kind}")


# -- disks --------------------------------------------------------------------


def render_disks(ctx: RenderContext, domain: ET.Element, devices: ET.Element) -> None:
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
        source = _volume_source(ctx, vol, vol_index)
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


__all__ = ["VOLUME_SOURCES", "letters", "render_disks"]
