"""Volume sources: where each volume of a VM comes from on a libvirt host.

Input: one entry of ``volumes`` of the expanded spec (plus ``dataVolumeTemplates``),
the host config (allowed directories, image map, pool) through the render context, and
the VM's ``Guest`` (the identity cloud-init hands the guest).
Output: a ``Source`` (how the volume appears in ``<disk>``: a file or a pool volume)
and the ``VolumeSpec`` records apply must provision, added to the context. Pure: every
host path is checked lexically against the allowed directories here; ``provision``
re-checks them with symlinks resolved before touching anything.

Source mapping (a named table, ``VOLUME_SOURCES``):
hostDisk -> the file; emptyDisk -> per-VM sparse qcow2, fresh each cold boot;
containerDisk -> per-VM qcow2 overlay over the image map's file (read-only base);
persistentVolumeClaim / dataVolume -> a volume in the host's storage pool;
cloudInitNoCloud / cloudInitConfigDrive, configMap / secret / sysprep -> a generated
ISO (``cloudinit``, ``configdisk``).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from reconciler.model import ConfigDigest, VMKey, VolumeSpec
from reconciler.model.imageref import parse_reference
from reconciler.render import configdisk
from reconciler.render.cloudinit import cloud_init_payload
from reconciler.render.context import SPEC, Guest, RenderContext
from reconciler.settings.host import path_inside
from reconciler.wording.escape import shortened

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import TypeAlias

    # A volume source's renderer: (context, guest, volume name, its source, field path).
    Handler: TypeAlias = Callable[[RenderContext, Guest, str, Mapping[str, Any], str], "Source"]

RAW_SUFFIXES = (".img", ".raw", ".iso")


class Source(NamedTuple):
    """How a volume appears in ``<disk>``: a file or a pool volume (a named tuple: one
    made per disk, cheaply)."""

    type: str  # "file" | "volume"
    format: str  # driver type; "" = leave it to the pool volume
    file: str = ""
    pool: str = ""
    volume: str = ""
    readonly: bool = False  # the volume itself is read-only (PVC readOnly)


def format_for(path: str) -> str:
    return "raw" if path.endswith(RAW_SUFFIXES) else "qcow2"


def _host_disk(ctx: RenderContext, guest: Guest, name: str, src: Mapping[str, Any], where: str) -> Source:
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


def _empty_disk(ctx: RenderContext, guest: Guest, name: str, src: Mapping[str, Any], where: str) -> Source:
    ctx.known(src, where, ("capacity",))
    capacity = ctx.capacity(src, "capacity", where)
    if not capacity:
        raise ctx.error(f"{where}.capacity", "emptyDisk needs a capacity")
    path = ctx.artefact_path(f"{name}.qcow2", where)
    ctx.add_volume(VolumeSpec(kind="file", path=path, capacity=capacity, format="qcow2", ephemeral=True))
    return Source("file", "qcow2", file=path)


def _image(ctx: RenderContext, key: str, where: str, registry: bool) -> tuple[str, str, str]:
    """(backing path, its format, digest) of an image reference: the host config's image
    map (a local file, or what the host's store resolved it to). Offline (no host
    resolved the revision) an unmapped reference is shown as written, with no file;
    on a host, resolution has said why one is missing (``images.resolve``). A
    ``registry`` reference the map does not hold must read as an image name."""
    local = ctx.host.images.get(key)
    if local is None and registry:
        try:
            parse_reference(key)
        except ValueError as err:
            raise ctx.error(where, f"{shortened(repr(key))}: {err}") from None
    if local is None:
        if not ctx.host.images_resolved:
            ctx.warn(where, f"image {key!r} is resolved by the host (pulled into its image store)")
        return "", "qcow2", ""
    return ctx.check_path(local.path, where), local.format, local.digest


def _container_disk(
    ctx: RenderContext, guest: Guest, name: str, src: Mapping[str, Any], where: str
) -> Source:
    ctx.known(src, where, ("image",), ("imagePullPolicy", "imagePullSecret", "path"))
    image = ctx.string(src, "image", where)
    if not image:
        raise ctx.error(f"{where}.image", "an image is required")
    if src.get("path") not in (None, ""):
        raise ctx.error(f"{where}.path", "a path inside the image is not supported; map the disk file itself")
    backing, backing_format, digest = _image(ctx, image, f"{where}.image", registry=True)
    path = ctx.artefact_path(f"{name}.overlay.qcow2", where)
    ctx.add_volume(
        VolumeSpec(
            kind="overlay",
            path=path,
            format="qcow2",
            backing=backing,
            backing_format=backing_format,
            ephemeral=True,
            image=image,
            digest=digest,
        )
    )
    # The base the overlay is made over at each cold boot: another digest (a moved tag)
    # is a restart-class change, as a new ISO payload is (offline: the reference itself).
    label = (
        f"image {image} {digest}"
        if digest
        else f"image {image}" + ("" if backing else " (the host resolves it)")
    )
    ctx.config.append(ConfigDigest(name, label, digest or (f"file:{backing}" if backing else f"ref:{image}")))
    return Source("file", "qcow2", file=path)


def _templates(ctx: RenderContext) -> dict[str, tuple[int, Mapping[str, Any]]]:
    spec = ctx.vm_spec
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
    namespace = ctx.string(ref, "namespace", where) or ctx.namespace
    return f"DataSource {namespace}/{name}"


def _pool_volume(ctx: RenderContext, claim: str, where: str, readonly: bool) -> Source:
    if not claim or "/" in claim or claim in (".", ".."):
        raise ctx.error(where, f"{claim!r} is not a valid claim name")
    volume = VMKey(ctx.namespace, claim).domain
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
    ctx.known(source, f"{twhere}.source", ("blank", "registry", "http", "pvc"))
    clone = _clone_of(ctx, source, twhere, volume)
    backing, backing_format, image, digest = _template_image(ctx, tspec, source, twhere)
    ctx.add_volume(
        VolumeSpec(
            kind="pool-volume",
            path=volume,
            pool=pool,
            capacity=capacity,
            format=fmt,
            backing=backing,
            backing_format=backing_format,
            image=image,
            digest=digest,
            clone=clone,
        )
    )
    return Source("volume", fmt, pool=pool, volume=volume, readonly=readonly)


def _clone_of(ctx: RenderContext, source: Mapping[str, Any], twhere: str, volume: str) -> str:
    """The pool volume a DataVolume template's ``source.pvc`` clones ("" for none)."""
    pvc = ctx.mapping(source, "pvc", f"{twhere}.source")
    if pvc is None:
        return ""
    ctx.known(pvc, f"{twhere}.source.pvc", ("name", "namespace"))
    other = ctx.string(pvc, "name", f"{twhere}.source.pvc")
    if not other or "/" in other or other in (".", ".."):
        raise ctx.error(f"{twhere}.source.pvc.name", "the claim to clone needs a valid name")
    clone = VMKey(ctx.string(pvc, "namespace", f"{twhere}.source.pvc") or ctx.namespace, other).domain
    if clone == volume:
        raise ctx.error(f"{twhere}.source.pvc.name", "a volume cannot be a clone of itself")
    return clone


def _template_image(
    ctx: RenderContext, tspec: Mapping[str, Any], source: Mapping[str, Any], twhere: str
) -> tuple[str, str, str, str]:
    """(backing path, its format, the image as written, digest) a DataVolume template's
    volume is imported from: its ``sourceRef`` (a DataSource of the image map), or its
    ``registry`` or ``http`` source; all empty for ``blank`` and clones."""
    backing = backing_format = image = digest = ""
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
        backing_format, image, digest = local.format, key, local.digest
    for kind in ("registry", "http"):
        s = ctx.mapping(source, kind, f"{twhere}.source")
        if s is None:
            continue
        url = ctx.string(s, "url", f"{twhere}.source.{kind}")
        if not url:
            raise ctx.error(f"{twhere}.source.{kind}.url", "a url is required")
        key = url.removeprefix("docker://") if kind == "registry" else url
        backing, backing_format, digest = _image(ctx, key, f"{twhere}.source.{kind}.url", kind == "registry")
        image = url
    return backing, backing_format, image, digest


def _pvc(ctx: RenderContext, guest: Guest, name: str, src: Mapping[str, Any], where: str) -> Source:
    ctx.known(src, where, ("claimName", "readOnly"), ("hotpluggable",))
    return _pool_volume(
        ctx, ctx.string(src, "claimName", where), f"{where}.claimName", bool(src.get("readOnly"))
    )


def _data_volume(ctx: RenderContext, guest: Guest, name: str, src: Mapping[str, Any], where: str) -> Source:
    ctx.known(src, where, ("name",), ("hotpluggable",))
    return _pool_volume(ctx, ctx.string(src, "name", where), f"{where}.name", False)


def _generated_iso(ctx: RenderContext, name: str, content: bytes, where: str) -> Source:
    """An ISO built from ``content`` at each cold boot (cloud-init, config disks); the
    build's Secrets it names go beside it, their digests into the payload."""
    path = ctx.artefact_path(f"{name}.iso", where)
    content, secrets, digest = configdisk.finish(ctx, name, content)
    ctx.add_volume(
        VolumeSpec(
            kind="cloudinit-iso", path=path, format="raw", content=content, ephemeral=True, secrets=secrets
        )
    )
    ctx.config.append(digest)
    return Source("file", "raw", file=path)


def _cloud_init(kind: str) -> Handler:
    def render(ctx: RenderContext, guest: Guest, name: str, src: Mapping[str, Any], where: str) -> Source:
        return _generated_iso(ctx, name, cloud_init_payload(ctx, guest, kind, src, where), where)

    return render


def _config_disk(
    payload: Callable[[RenderContext, Mapping[str, Any], str], bytes],
) -> Handler:
    def render(ctx: RenderContext, guest: Guest, name: str, src: Mapping[str, Any], where: str) -> Source:
        return _generated_iso(ctx, name, payload(ctx, src, where), where)

    return render


VOLUME_SOURCES: Mapping[str, Handler] = MappingProxyType(
    {
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
)


def volume_source(ctx: RenderContext, guest: Guest, vol: Mapping[str, Any], index: int) -> Source:
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
    return handler(ctx, guest, name, src, f"{where}.{kind}")


__all__ = ["VOLUME_SOURCES", "volume_source"]
