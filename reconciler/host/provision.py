"""Create the host resources a rendered domain needs (I/O, idempotent).

Input: a ``RenderedDomain`` (its ``volumes``), the ``Hypervisor`` (for storage-pool
volumes) and the ``HostConfig``. Output: files and pool volumes on the host, or a
``ProvisionError``. Before touching any path it is re-checked with symlinks
resolved (``os.path.realpath``) against the allowed directories, and only regular
files are accepted: render's lexical check cannot see a symlink planted inside an
allowed directory, this one can. Existing disks are never overwritten or shrunk.

- ``file``: a hostDisk (``must_exist``: only checked) or a sparse image of
  ``capacity`` (qcow2 via ``qemu-img``, raw via a sparse file), emptyDisks included;
- ``overlay``: a per-VM qcow2 overlay over a read-only base image (containerDisk);
- ``cloudinit-iso``: an ISO 9660 image (Joliet + Rock Ridge) built with pycdlib from
  a payload whose ConfigMaps and Secrets ``payload.resolve_payload`` reads;
- ``pool-volume``: a libvirt storage volume (blank, or cloned from an image);
- ``nvram``: only the NVRAM directory (libvirt copies the template on first start).

Against libvirt's test driver (``test:///...``) nothing is created: it runs no guest.

``discard_ephemeral`` removes emptyDisks, overlays, cloud-init ISOs and
non-persistent NVRAM so they are recreated fresh on the next cold boot;
``discard_provisioned`` (a pool's autohealing) also removes the disks made from a
source that outlive a boot: DataVolume template volumes and persistent NVRAM (never a
hostDisk, nor a volume the VM only refers to);
``remove_paths`` removes artefacts listed in an ownership mark on prune.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from reconciler.errors import ReconcilerError
from reconciler.host.payload import ProvisionError, carries_secrets, payload_files, resolve_payload
from reconciler.model.secretdata import NO_SECRETS, SecretData
from reconciler.settings.host import system_tree

if TYPE_CHECKING:
    from collections.abc import Iterable

    from reconciler.model import RenderedDomain, VolumeSpec
    from reconciler.settings.host import HostConfig

__all__ = ["ProvisionError", "build_iso", "provision", "read_iso", "resolve_payload"]

QEMU_IMG = "qemu-img"


class StoragePools(Protocol):
    """The storage part of ``reconciler.host.hypervisor.Hypervisor`` used here."""

    def pool_volume_exists(self, pool: str, name: str) -> bool: ...
    def create_pool_volume(self, pool: str, name: str, capacity: int, fmt: str) -> str: ...
    def upload_pool_volume(self, pool: str, name: str, source: str) -> None: ...
    def clone_pool_volume(self, pool: str, name: str, capacity: int, fmt: str, source: str) -> None: ...
    def pool_volume_format(self, pool: str, name: str) -> str: ...
    def delete_pool_volume(self, pool: str, name: str) -> None: ...
    def qemu_owner(self) -> tuple[int, int] | None: ...
    @property
    def runs_guests(self) -> bool: ...


# -- path checks --------------------------------------------------------------


def _real_dirs(host: HostConfig) -> tuple[str, ...]:
    """The allowed directories, resolved; one resolving to ``/`` or a system tree allows nothing."""
    real = (os.path.realpath(d) for d in host.allowed_dirs)
    return tuple(d for d in real if system_tree(d) is None)


def _inside(real: str, dirs: tuple[str, ...]) -> bool:
    return any(real == d or real.startswith(d.rstrip("/") + "/") for d in dirs)


def resolved_path(path: str, host: HostConfig, subject: str, dirs: tuple[str, ...] | None = None) -> str:
    """``path`` with symlinks resolved, refused unless inside the allowed directories."""
    allowed = dirs if dirs is not None else _real_dirs(host)
    if not path.startswith("/") or "\x00" in path:
        raise ProvisionError(subject, f"{path!r} is not an absolute path")
    real = os.path.realpath(path)
    if not _inside(real, allowed) or real in allowed:
        shown = f"{path} (-> {real})" if real != path else path
        raise ProvisionError(
            subject, f"{shown} is outside the allowed directories ({', '.join(host.allowed_dirs)})"
        )
    return real


def _regular_or_missing(real: str, subject: str, shown: str) -> bool:
    """True if a regular file exists, False if nothing exists; anything else is refused."""
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        raise ProvisionError(subject, f"{shown} exists and is not a regular file")
    return True


def _make_parent(real: str, host: HostConfig, subject: str) -> None:
    parent = Path(real).parent
    # Create missing parents one level at a time, re-checking each resolved level.
    missing = []
    p = parent
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        real_d = Path(os.path.realpath(d.parent)) / d.name
        if not _inside(str(real_d), _real_dirs(host)):
            raise ProvisionError(subject, f"{d} is outside the allowed directories")
        real_d.mkdir(mode=0o755)


# -- images -------------------------------------------------------------------


def _qemu_img(subject: str, *args: str) -> None:
    if shutil.which(QEMU_IMG) is None:
        raise ProvisionError(subject, "qemu-img (qemu-utils) is required to create qcow2 images")
    proc = subprocess.run([QEMU_IMG, *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ProvisionError(
            subject, f"qemu-img {args[0]} failed: {proc.stderr.strip() or proc.stdout.strip()}"
        )


def _create_image(real: str, capacity: int, fmt: str, subject: str) -> None:
    if fmt == "qcow2":
        tmp = f"{real}.tmp-{os.getpid()}"
        _qemu_img(subject, "create", "-q", "-f", "qcow2", tmp, str(capacity))
        Path(tmp).replace(real)
    elif fmt == "raw":
        fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.ftruncate(fd, capacity)  # sparse
        finally:
            os.close(fd)
    else:
        raise ProvisionError(subject, f"cannot create images of format {fmt!r}")


def _create_overlay(real: str, backing: str, backing_format: str, subject: str) -> None:
    tmp = f"{real}.tmp-{os.getpid()}"
    _qemu_img(subject, "create", "-q", "-f", "qcow2", "-F", backing_format or "qcow2", "-b", backing, tmp)
    Path(tmp).replace(real)


def _iso_name(name: str) -> str:
    """An ISO 9660 level-3 identifier for a file name (the real name is in Joliet/Rock Ridge)."""
    base, _, ext = name.rpartition(".") if "." in name else (name, "", "")

    def clean(s: str) -> str:
        return re.sub(r"[^A-Z0-9_]", "_", s.upper())

    return f"{clean(base)[:30]}.{clean(ext)[:3]};1"


def build_iso(
    content: bytes, host: HostConfig | None = None, subject: str = "", secrets: SecretData = NO_SECRETS
) -> bytes:
    """The ISO image of a payload made by ``render.cloudinit`` / ``render.configdisk``
    (the ConfigMaps and Secrets it names resolved by ``payload.resolve_payload``)."""
    if host is not None:
        label, files = resolve_payload(content, host, subject, secrets)
    else:
        label, files = payload_files(content)
    import pycdlib  # on first use: a daemon that builds no ISO never loads it (~2 MiB)

    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident=label)
    made: set[str] = set()
    for path in sorted(files):
        parts = path.split("/")
        for depth in range(1, len(parts)):
            d = "/".join(parts[:depth])
            if d not in made:
                made.add(d)
                iso_dir = "/" + "/".join(re.sub(r"[^A-Z0-9_]", "_", p.upper())[:8] for p in parts[:depth])
                iso.add_directory(iso_dir, rr_name=parts[depth - 1], joliet_path="/" + d)
        iso_dir = "/".join(re.sub(r"[^A-Z0-9_]", "_", p.upper())[:8] for p in parts[:-1])
        value = files[path]
        data = value if isinstance(value, bytes) else value.encode()
        iso.add_fp(
            io.BytesIO(data),
            len(data),
            ("/" + iso_dir if iso_dir else "") + "/" + _iso_name(parts[-1]),
            rr_name=parts[-1],
            joliet_path="/" + path,
        )
    out = io.BytesIO()
    iso.write_fp(out)
    iso.close()
    return out.getvalue()


def _qemu_owner(hypervisor: StoragePools | None) -> tuple[int, int]:
    """Who QEMU runs as (an ISO with Secrets is given to it alone); root when unknown."""
    try:
        owner = hypervisor.qemu_owner() if hypervisor is not None else None
    except ReconcilerError:
        owner = None
    return owner if owner is not None else (0, 0)


def _write_iso(real: str, data: bytes, owner: tuple[int, int] | None = None) -> None:
    """Write atomically. ``owner``: an ISO carrying Secrets belongs to QEMU's user and is
    readable by it alone (mode 0600); any other ISO is world-readable."""
    fd, name = tempfile.mkstemp(dir=Path(real).parent, prefix=".cidata-")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if owner is not None:
            os.chown(tmp, *owner)
        tmp.chmod(0o600 if owner is not None else 0o644)
        tmp.replace(real)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- the stage ----------------------------------------------------------------


def provision(rendered: RenderedDomain, hypervisor: StoragePools | None, host: HostConfig) -> None:
    """Create every volume ``rendered`` lists that does not exist yet. Idempotent.

    All checks run before anything is created, so a refused path leaves the host unchanged.
    """
    if hypervisor is not None and not hypervisor.runs_guests:
        return  # libvirt's test driver runs nothing: there is no host disk to create
    subject = rendered.subject
    dirs = _real_dirs(host)
    checked = [_checked(vol, hypervisor, host, subject, dirs) for vol in rendered.volumes]
    for vol, real, iso in checked:
        _create(vol, real, iso, hypervisor, host, subject)


def _checked(
    vol: VolumeSpec, hypervisor: StoragePools | None, host: HostConfig, subject: str, dirs: tuple[str, ...]
) -> tuple[VolumeSpec, str, bytes]:
    """``vol`` checked, nothing created: (``vol``, the real path of its file, a cloud-init
    ISO's bytes), or a ``ProvisionError``."""
    if vol.image and not vol.backing:
        raise ProvisionError(subject, f"image {vol.image} was not resolved into this host's image store")
    if vol.kind in ("file", "overlay", "cloudinit-iso"):
        real = resolved_path(vol.path, host, subject, dirs)
        exists = _regular_or_missing(real, subject, vol.path)
        if vol.must_exist and not exists:
            raise ProvisionError(subject, f"hostDisk {vol.path} does not exist (type Disk)")
        _check_backing(vol, host, subject, dirs)
        iso = build_iso(vol.content, host, subject, vol.secrets) if vol.kind == "cloudinit-iso" else b""
        return vol, real, iso
    if vol.kind == "pool-volume":
        if hypervisor is None:
            raise ProvisionError(
                subject, f"volume {vol.path} of storage pool {vol.pool} needs a libvirt connection"
            )
        _check_backing(vol, host, subject, dirs)
        _check_pool_volume(vol, hypervisor, subject)
        return vol, "", b""
    if vol.kind == "nvram":
        if Path(vol.path).parent != Path(host.nvram_dir):
            raise ProvisionError(subject, f"{vol.path} is outside the NVRAM directory {host.nvram_dir}")
        if vol.backing and not Path(vol.backing).is_file():
            raise ProvisionError(
                subject, f"EFI variables template {vol.backing} does not exist (install OVMF)"
            )
        return vol, "", b""
    raise ProvisionError(subject, f"unknown volume kind {vol.kind!r}")


def _check_backing(vol: VolumeSpec, host: HostConfig, subject: str, dirs: tuple[str, ...]) -> None:
    """The image ``vol`` is made from (if any) exists, inside the allowed directories."""
    if vol.backing:
        b = resolved_path(vol.backing, host, subject, dirs)
        if not _regular_or_missing(b, subject, vol.backing):
            raise ProvisionError(subject, f"image {vol.backing} does not exist")


def _check_pool_volume(vol: VolumeSpec, hypervisor: StoragePools, subject: str) -> None:
    """A pool volume can be made (its clone's source exists), or exists as the host
    config says (``must_exist``; its format)."""
    exists = hypervisor.pool_volume_exists(vol.pool, vol.path)
    if vol.clone and not exists and not hypervisor.pool_volume_exists(vol.pool, vol.clone):
        raise ProvisionError(
            subject, f"volume {vol.clone} to clone does not exist in storage pool {vol.pool}"
        )
    if vol.must_exist and not exists:
        raise ProvisionError(subject, f"volume {vol.path} does not exist in storage pool {vol.pool}")
    actual = hypervisor.pool_volume_format(vol.pool, vol.path) if exists else ""
    if actual and actual != vol.format:
        raise ProvisionError(
            subject,
            f"volume {vol.path} in storage pool {vol.pool} is {actual}, "
            f"but the host config says storagePoolFormat {vol.format}",
        )


def _create(
    vol: VolumeSpec, real: str, iso: bytes, hypervisor: StoragePools | None, host: HostConfig, subject: str
) -> None:
    """Create checked ``vol`` unless it exists (a cloud-init ISO: written again when its
    content differs)."""
    if vol.kind == "nvram":
        # libvirt copies the template into place on first start, into an existing directory.
        Path(host.nvram_dir).mkdir(mode=0o755, parents=True, exist_ok=True)
        return
    if vol.kind == "pool-volume" and hypervisor is not None:
        _provision_pool_volume(vol, hypervisor, subject)
        return
    if vol.kind == "cloudinit-iso":
        _make_parent(real, host, subject)
        label, files = resolve_payload(vol.content, host, subject, vol.secrets)
        wanted = (label, {k: v if isinstance(v, bytes) else v.encode() for k, v in files.items()})
        if not Path(real).exists() or _iso_contents(real) != wanted:
            owner = _qemu_owner(hypervisor) if carries_secrets(vol.content) else None
            _write_iso(real, iso, owner)
        return
    if Path(real).exists():
        return  # never overwrite or resize an existing disk
    _make_parent(real, host, subject)
    if vol.kind == "overlay":
        _create_overlay(real, os.path.realpath(vol.backing), vol.backing_format, subject)
    else:
        _create_image(real, vol.capacity, vol.format, subject)


def read_iso(path: str) -> tuple[str, dict[str, str]] | None:
    """(volume label, {path: text}) of an ISO written by ``build_iso``; None if unreadable."""
    got = _iso_contents(path)
    if got is None:
        return None
    return got[0], {k: v.decode(errors="replace") for k, v in got[1].items()}


def _iso_contents(path: str) -> tuple[str, dict[str, bytes]] | None:
    """(volume label, {path: bytes}) of an ISO; None if unreadable. ISO images carry
    build times, so an existing image is compared by content, not bytes."""
    import pycdlib

    iso = pycdlib.PyCdlib()
    try:
        iso.open(path)
    except (pycdlib.pycdlibexception.PyCdlibException, OSError):
        return None
    try:
        label = iso.pvd.volume_identifier.decode(errors="replace").strip()
        files: dict[str, bytes] = {}
        for dirname, _dirs, names in iso.walk(joliet_path="/"):
            for name in names:
                full = f"{dirname.rstrip('/')}/{name}"
                buf = io.BytesIO()
                iso.get_file_from_iso_fp(buf, joliet_path=full)
                files[full.lstrip("/")] = buf.getvalue()
        return label, files
    except (pycdlib.pycdlibexception.PyCdlibException, UnicodeError):
        return None
    finally:
        iso.close()


def _provision_pool_volume(vol: VolumeSpec, hypervisor: StoragePools, subject: str) -> None:
    if hypervisor.pool_volume_exists(vol.pool, vol.path):
        return
    fmt = vol.format or "qcow2"
    if vol.clone:
        hypervisor.clone_pool_volume(vol.pool, vol.path, vol.capacity, fmt, vol.clone)
        return
    if not vol.backing:
        hypervisor.create_pool_volume(vol.pool, vol.path, vol.capacity, fmt)
        return
    # Clone: convert the image to the pool's format at the requested size, then upload it.
    with tempfile.TemporaryDirectory(prefix="reconciler-clone-") as tmp:
        staged = str(Path(tmp) / f"clone.{fmt}")
        src_fmt = vol.backing_format or "qcow2"
        _qemu_img(subject, "convert", "-q", "-f", src_fmt, "-O", fmt, vol.backing, staged)
        _qemu_img(subject, "resize", "-q", "-f", fmt, staged, str(vol.capacity))
        hypervisor.create_pool_volume(vol.pool, vol.path, vol.capacity, fmt)
        hypervisor.upload_pool_volume(vol.pool, vol.path, staged)


def discard_ephemeral(rendered: RenderedDomain, host: HostConfig) -> list[str]:
    """Remove the per-boot artefacts (call on the way to a cold boot); returns removed paths."""
    removed = []
    nvram_dir = os.path.realpath(host.nvram_dir)
    for vol in rendered.volumes:
        if not vol.ephemeral:
            continue
        if vol.kind == "nvram":
            real = os.path.realpath(vol.path)
            if str(Path(real).parent) != nvram_dir:
                raise ProvisionError(rendered.subject, f"{vol.path} is outside the NVRAM directory")
        else:
            real = resolved_path(vol.path, host, rendered.subject)
        if _regular_or_missing(real, rendered.subject, vol.path):
            Path(real).unlink()
            removed.append(vol.path)
    return removed


def discard_provisioned(rendered: RenderedDomain, hypervisor: StoragePools, host: HostConfig) -> list[str]:
    """Autohealing, before the domain is defined anew: every disk provisioning makes from a
    source removed (the per-boot ones, DataVolume template volumes, persistent NVRAM), so
    ``provision`` makes them again; a hostDisk and a volume that must exist stay. Returns
    what was removed (nothing on libvirt's test driver, which runs no guest)."""
    if not hypervisor.runs_guests:
        return []
    removed = discard_ephemeral(rendered, host)
    for vol in rendered.volumes:
        if vol.ephemeral or vol.must_exist:
            continue
        if vol.kind == "pool-volume" and hypervisor.pool_volume_exists(vol.pool, vol.path):
            hypervisor.delete_pool_volume(vol.pool, vol.path)
            removed.append(f"{vol.pool}/{vol.path}")
        elif vol.kind == "nvram":
            real = os.path.realpath(vol.path)
            if str(Path(real).parent) != os.path.realpath(host.nvram_dir):
                raise ProvisionError(rendered.subject, f"{vol.path} is outside the NVRAM directory")
            if _regular_or_missing(real, rendered.subject, vol.path):
                Path(real).unlink()
                removed.append(vol.path)
    return removed


def remove_paths(paths: Iterable[str], host: HostConfig, subject: str) -> list[str]:
    """Remove artefacts named in an ownership mark (prune); each path is re-checked first."""
    removed = []
    nvram_dir = os.path.realpath(host.nvram_dir)
    for path in paths:
        real = os.path.realpath(path)
        if str(Path(real).parent) != nvram_dir:
            real = resolved_path(path, host, subject)
        if _regular_or_missing(real, subject, path):
            Path(real).unlink()
            removed.append(path)
        parent = Path(real).parent
        if str(parent.parent) == os.path.realpath(host.volume_dir):
            with contextlib.suppress(OSError):
                parent.rmdir()  # the per-VM directory, once empty
    return removed
