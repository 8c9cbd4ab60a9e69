"""Machine and firmware: ``<os>`` (arch, machine type, BIOS or EFI, secure boot, NVRAM).

Input: ``architecture``, ``domain.machine`` and ``domain.firmware`` of the expanded
spec, host OVMF paths (host config first, then host capabilities). Output: the
``<os>`` element (with ``kernelBoot``: the kernel, initrd and command line of a direct
kernel boot, from a host directory the image map names), and for EFI a per-VM NVRAM file recorded as a volume (ephemeral
unless ``efi.persistent``). Pure. EFI secure boot (KubeVirt's default for EFI)
requires SMM, as KubeVirt validates.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from reconciler.model import VolumeSpec
from reconciler.render.caps import ARCH_TO_LIBVIRT
from reconciler.render.context import DOMAIN, SPEC, RenderContext
from reconciler.render.xml import sub

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Mapping

FIRMWARE_KEYS = ("uuid", "serial", "bootloader", "kernelBoot")
FIRMWARE_UNSUPPORTED = ("acpi",)
DEFAULT_MACHINE = "q35"


def smm_enabled(ctx: RenderContext) -> bool:
    features = ctx.mapping(ctx.domain, "features", DOMAIN) or {}
    smm = ctx.mapping(features, "smm", f"{DOMAIN}.features")
    return smm is not None and smm.get("enabled") is not False


def render_os(ctx: RenderContext, domain: ET.Element) -> None:
    os_el = sub(domain, "os")
    sub(os_el, "type", "hvm", arch=_arch(ctx), machine=_machine(ctx))
    fw_where = f"{DOMAIN}.firmware"
    fw = ctx.mapping(ctx.domain, "firmware", DOMAIN) or {}
    for key in FIRMWARE_UNSUPPORTED:
        if fw.get(key) not in (None, {}):
            raise ctx.error(f"{fw_where}.{key}", "not supported on a libvirt host")
    ctx.known(fw, fw_where, FIRMWARE_KEYS, FIRMWARE_UNSUPPORTED)
    bl_where = f"{fw_where}.bootloader"
    bl = ctx.mapping(fw, "bootloader", fw_where) or {}
    ctx.known(bl, bl_where, ("bios", "efi"))
    bios = ctx.mapping(bl, "bios", bl_where)
    efi = ctx.mapping(bl, "efi", bl_where)
    if bios is not None and efi is not None:
        raise ctx.error(bl_where, "EFI and BIOS cannot be used together")
    if efi is not None:
        _efi(ctx, os_el, efi, f"{bl_where}.efi")
    _kernel_boot(ctx, fw, fw_where, os_el)
    if fw.get("serial"):
        sub(os_el, "smbios", mode="sysinfo")
    if bios is not None:
        ctx.known(bios, f"{bl_where}.bios", ("useSerial",))
        if ctx.boolean(bios, "useSerial", f"{bl_where}.bios"):
            sub(os_el, "bios", useserial="yes")


def _arch(ctx: RenderContext) -> str:
    """The guest's libvirt architecture: the spec's, which must be the host's."""
    arch_name = ctx.string(ctx.spec, "architecture", SPEC)
    if arch_name:
        arch = ARCH_TO_LIBVIRT.get(arch_name)
        if arch is None:
            raise ctx.error(f"{SPEC}.architecture", f"unknown architecture {arch_name!r}")
    else:
        arch = ctx.caps.arch
    if arch != ctx.caps.arch:
        raise ctx.error(
            f"{SPEC}.architecture", f"{arch_name} guests are not offered by this host ({ctx.caps.arch})"
        )
    return arch


def _machine(ctx: RenderContext) -> str:
    """The machine type (q35 unless given): one the host offers, for as many vCPUs as the VM has."""
    machine_spec = ctx.mapping(ctx.domain, "machine", DOMAIN) or {}
    ctx.known(machine_spec, f"{DOMAIN}.machine", ("type",))
    machine = ctx.string(machine_spec, "type", f"{DOMAIN}.machine") or DEFAULT_MACHINE
    if ctx.caps.machines and machine not in ctx.caps.machines:
        raise ctx.error(f"{DOMAIN}.machine.type", f"machine type {machine!r} is not offered by this host")
    most = dict(ctx.caps.max_cpus).get(machine)
    if most is not None and ctx.max_vcpus > most:
        raise ctx.error(
            f"{DOMAIN}.cpu",
            f"{ctx.max_vcpus} vCPUs: machine type {machine!r} on this host takes at most {most}",
        )
    return machine


def _efi(ctx: RenderContext, os_el: ET.Element, efi: Mapping[str, Any], where: str) -> None:
    """EFI: the OVMF loader (secure boot unless turned off, which needs SMM) and the
    domain's NVRAM file, made from the host's template (kept across boots when persistent)."""
    ctx.known(efi, where, ("secureBoot", "persistent"))
    secure = ctx.boolean(efi, "secureBoot", where)
    secure = True if secure is None else secure
    persistent = bool(ctx.boolean(efi, "persistent", where))
    if secure and not smm_enabled(ctx):
        raise ctx.error(
            f"{where}.secureBoot",
            "has EFI SecureBoot enabled. SecureBoot requires SMM, which is currently disabled.",
        )
    h, c = ctx.host, ctx.caps
    code = (h.ovmf_secure_code or c.ovmf_secure_code) if secure else (h.ovmf_code or c.ovmf_code)
    template = (h.ovmf_secure_vars or c.ovmf_secure_vars) if secure else (h.ovmf_vars or c.ovmf_vars)
    nvram = ctx.nvram_file
    sub(os_el, "loader", code, readonly="yes", secure="yes" if secure else "no", type="pflash")
    sub(os_el, "nvram", nvram, template=template)
    ctx.add_volume(
        VolumeSpec(kind="nvram", path=nvram, format="raw", backing=template, ephemeral=not persistent)
    )


def _kernel_boot(ctx: RenderContext, fw: Mapping[str, Any], fw_where: str, os_el: ET.Element) -> None:
    """``kernelBoot``: direct kernel boot, ``<kernel>``, ``<initrd>``, ``<cmdline>``. The
    container image names a host directory in the host config's image map (the image's
    files, unpacked); ``kernelPath`` and ``initrdPath`` are files inside it."""
    kb_where = f"{fw_where}.kernelBoot"
    kb = ctx.mapping(fw, "kernelBoot", fw_where)
    if kb is None:
        return
    ctx.known(kb, kb_where, ("container", "kernelArgs"))
    args = ctx.string(kb, "kernelArgs", kb_where)
    container = ctx.mapping(kb, "container", kb_where)
    if container is None:
        if args:
            raise ctx.error(f"{kb_where}.kernelArgs", "kernelArgs need a kernel: set kernelBoot.container")
        return
    c_where = f"{kb_where}.container"
    ctx.known(
        container, c_where, ("image", "kernelPath", "initrdPath"), ("imagePullPolicy", "imagePullSecret")
    )
    image = ctx.string(container, "image", c_where)
    kernel = ctx.string(container, "kernelPath", c_where)
    initrd = ctx.string(container, "initrdPath", c_where)
    if not image:
        raise ctx.error(f"{c_where}.image", "kernelBoot.container needs the image holding the kernel")
    if not kernel and not initrd:
        raise ctx.error(c_where, "give kernelPath, initrdPath or both (as KubeVirt requires)")
    if args and not kernel:
        raise ctx.error(f"{kb_where}.kernelArgs", "kernelArgs need kernelPath")
    local = ctx.host.images.get(image)
    if local is None:
        raise ctx.error(
            f"{c_where}.image",
            f"image {image!r} is not in the host config's image map (map it to the directory holding its files)",
        )
    for tag, inner, field in (("kernel", kernel, "kernelPath"), ("initrd", initrd, "initrdPath")):
        if not inner:
            continue
        if not inner.startswith("/") or ".." in inner.split("/"):
            raise ctx.error(f"{c_where}.{field}", f"{inner!r}: an absolute path inside the image")
        sub(os_el, tag, ctx.check_path(posixpath.join(local.path, inner.lstrip("/")), f"{c_where}.{field}"))
    if args:
        sub(os_el, "cmdline", args)
