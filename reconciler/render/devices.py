"""The remaining devices: host devices (GPUs, PCI, USB, mediated devices), rng, inputs,
serial console, graphics and video, memory balloon, guest agent channel, watchdog, TPM,
sound, panic, vsock.

Input: ``domain.devices`` of the expanded spec (autoattach switches included) and
host config (graphics, the ``hostDevices`` map a ``deviceName`` is looked up in).
Output: elements under ``<devices>`` (a mediated device without its instance yet:
``render.mdev`` hands those out per host). Pure. Devices with no meaning on a plain
libvirt host (filesystems, downward metrics, ...) are rejected, not dropped.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from reconciler.model.devices import DEVICE_KINDS
from reconciler.model.identifiers import parse_pci, parse_usb
from reconciler.render.context import DEVICES, RenderContext
from reconciler.render.xml import sub

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

# The keys of domain.devices: those each device kind is written from (``model.devices``),
# and one that changes several kinds.
DEVICE_KEYS = (*dict.fromkeys(key for kind in DEVICE_KINDS for key in kind.spec), "useVirtioTransitional")
# Accepted, no effect on a libvirt host (documented in docs/mapping.md).
DEVICE_NO_EFFECT = ("disableHotplug", "logSerialConsole")
DEVICE_UNSUPPORTED = ("filesystems", "clientPassthrough", "downwardMetrics")
# Enabled by an empty mapping (``clientPassthrough: {}``): present means on, so refused
# when present at all, never dropped as "empty".
DEVICE_ENABLE_FORMS = MappingProxyType(
    {
        "clientPassthrough": "USB redirection from a client (virtctl usbredir) goes through KubeVirt's API; "
        "a libvirt host does not offer it yet",
        "downwardMetrics": "downward metrics need KubeVirt's metrics collector (vhostmd); a libvirt host does "
        "not offer them",
    }
)
ANNOTATION_PCI_HOLE64 = "kubevirt.io/disablePCIHole64"
ANNOTATION_HOOK_SIDECARS = "hooks.kubevirt.io/hookSidecars"
VIDEO_TYPES = ("vga", "cirrus", "virtio", "ramfb", "bochs")
SOUND_MODELS = ("ich9", "ac97", "ich6", "ich7", "sb16", "es1370", "usb")
PANIC_MODELS = ("isa", "hyperv", "pvpanic")
WATCHDOG_ACTIONS = ("poweroff", "reset", "shutdown", "pause", "dump", "inject-nmi", "none")


def render_host_devices(ctx: RenderContext, devices: ET.Element) -> None:
    """``gpus`` and ``hostDevices``: each ``deviceName`` passed through as the host device
    the host config's ``hostDevices`` maps it to (a PCI function, managed by libvirt, a
    USB device by vendor:product, or one mediated device of a pool: its instance is
    handed out per host afterwards, ``render.mdev``)."""
    displays = _vgpu_displays(ctx)
    for key in ("gpus", "hostDevices"):
        for i, item in enumerate(ctx.items(ctx.devices, key, DEVICES)):
            where = f"{DEVICES}.{key}[{i}]"
            extra = ("virtualGPUOptions",) if key == "gpus" else ()
            ctx.known(item, where, ("name", "deviceName", *extra), ("tag",))
            name = ctx.string(item, "deviceName", where)
            if not name:
                raise ctx.error(f"{where}.deviceName", "a deviceName is required")
            target = ctx.host.host_devices.get(name)
            if target is None:
                raise ctx.error(
                    f"{where}.deviceName",
                    f"device {name!r} is not in the host config's hostDevices map (hostDevices: "
                    "{NAME: {pci: 0000:65:00.0}, {usb: vendor:product} or {mdev: {uuids: [...]}}})",
                )
            if target.kind == "mdev":
                display = displays.get(i) if key == "gpus" else None
                el = sub(
                    devices,
                    "hostdev",
                    mode="subsystem",
                    type="mdev",
                    managed="no",
                    model="vfio-pci",
                    display="on" if display else None,
                    ramfb="on" if display == "ramfb" else None,
                )
                sub(el, "source")  # <address uuid> once the host's pool has handed one out
                ctx.mdev_needs.append((name, f"{where}.deviceName"))
                continue
            if key == "gpus" and ctx.mapping(item, "virtualGPUOptions", where) is not None:
                ctx.warn(
                    f"{where}.virtualGPUOptions", "has no effect: display options are for mediated devices"
                )
            ctx.host_devices.append((f"{target.kind} {target.address}", f"{where}.deviceName"))
            el = sub(devices, "hostdev", mode="subsystem", type=target.kind, managed="yes")
            source = sub(el, "source")
            if target.kind == "pci":
                pci = parse_pci(target.address)
                if pci is not None:  # the host config has checked it
                    sub(source, "address", **pci.attributes())
            else:
                usb = parse_usb(target.address)
                if usb is not None:
                    sub(source, "vendor", id=f"0x{usb.vendor:04x}")
                    sub(source, "product", id=f"0x{usb.product:04x}")


def _vgpu_displays(ctx: RenderContext) -> dict[int, str]:
    """Which ``gpus[i]`` (mediated ones) drive a display, as KubeVirt decides: with
    ``virtualGPUOptions.display`` set, that GPU's display is on unless ``enabled: false``
    ("ramfb": with the boot framebuffer, unless ``ramFB.enabled: false``); with no GPU
    setting it, the first mediated GPU's display and framebuffer are on, when the VM has
    a graphics device to show them. At most one framebuffer."""
    gpus = ctx.items(ctx.devices, "gpus", DEVICES)
    mdev = [
        i
        for i, g in enumerate(gpus)
        if getattr(ctx.host.host_devices.get(str(g.get("deviceName") or "")), "kind", "") == "mdev"
    ]
    graphics = ctx.devices.get("autoattachGraphicsDevice") is not False and ctx.host.graphics != "none"
    out: dict[int, str] = {}
    explicit = False
    for i in mdev:
        where = f"{DEVICES}.gpus[{i}].virtualGPUOptions"
        options = ctx.mapping(gpus[i], "virtualGPUOptions", f"{DEVICES}.gpus[{i}]")
        display = ctx.mapping(options, "display", where) if options is not None else None
        if display is None:
            continue
        explicit = True
        ctx.known(display, f"{where}.display", ("enabled", "ramFB"))
        if ctx.boolean(display, "enabled", f"{where}.display") is False:
            continue
        if not graphics:
            raise ctx.error(
                f"{where}.display",
                "a vGPU display needs a graphics device (autoattachGraphicsDevice and the host's graphics)",
            )
        ramfb = ctx.mapping(display, "ramFB", f"{where}.display")
        if ramfb is not None:
            ctx.known(ramfb, f"{where}.display.ramFB", ("enabled",))
        off = ramfb is not None and ctx.boolean(ramfb, "enabled", f"{where}.display.ramFB") is False
        out[i] = "on" if off else "ramfb"
    if not explicit and mdev and graphics:
        out[mdev[0]] = "ramfb"
    if sum(1 for v in out.values() if v == "ramfb") > 1:
        raise ctx.error(f"{DEVICES}.gpus", "configuring multiple displays with ramfb is not valid")
    return out


def render_devices(ctx: RenderContext, devices: ET.Element) -> None:
    """The devices but disks and interfaces: host devices, rng, inputs, consoles, the
    guest agent channel, graphics and video, balloon, watchdog, TPM, sound, panic, vsock."""
    dev = ctx.devices
    _refuse_forms(ctx)
    _pci_hole64(ctx, devices)
    for key in DEVICE_UNSUPPORTED:
        if dev.get(key) not in (None, [], {}, False):
            raise ctx.error(f"{DEVICES}.{key}", "not supported on a libvirt host")
    render_host_devices(ctx, devices)
    ctx.known(dev, DEVICES, DEVICE_KEYS, DEVICE_NO_EFFECT + DEVICE_UNSUPPORTED)
    virtio = "virtio-transitional" if dev.get("useVirtioTransitional") else "virtio"
    _rng_and_inputs(ctx, devices, virtio)
    _consoles(ctx, devices)
    _graphics(ctx, devices)
    if ctx.boolean(dev, "autoattachMemBalloon", DEVICES) is False:
        sub(devices, "memballoon", model="none")
    _watchdog(ctx, devices)
    _tpm(ctx, devices)
    _sound_and_panic(ctx, devices)
    if ctx.boolean(dev, "autoattachVSOCK", DEVICES):
        vsock = sub(devices, "vsock", model=virtio)
        sub(vsock, "cid", auto="yes")


def _refuse_forms(ctx: RenderContext) -> None:
    """Hook sidecars, and the device switches KubeVirt spells otherwise here."""
    if ANNOTATION_HOOK_SIDECARS in ctx.annotations:
        raise ctx.error(
            f"spec.template.metadata.annotations[{ANNOTATION_HOOK_SIDECARS}]",
            "hook sidecars are containers beside KubeVirt's virt-launcher; a libvirt host runs none: "
            "express the change in the VM spec or the host config",
        )
    for key, why in DEVICE_ENABLE_FORMS.items():
        if ctx.devices.get(key) is not None:
            raise ctx.error(f"{DEVICES}.{key}", why)


def _pci_hole64(ctx: RenderContext, devices: ET.Element) -> None:
    """The PCI root with no 64-bit PCI hole, as the VM's annotation asks."""
    if str(ctx.annotations.get(ANNOTATION_PCI_HOLE64, "")).lower() != "true":
        return
    machine = str(((ctx.domain.get("machine") or {}).get("type")) or "q35")
    root = "pci-root" if machine == "pc" or machine.startswith("pc-i440fx") else "pcie-root"
    controller = sub(devices, "controller", type="pci", index="0", model=root)
    sub(controller, "pcihole64", "0", unit="KiB")


def _rng_and_inputs(ctx: RenderContext, devices: ET.Element, virtio: str) -> None:
    """The random number generator and the tablets."""
    dev = ctx.devices
    rng = ctx.mapping(dev, "rng", DEVICES)
    if rng is not None:
        ctx.known(rng, f"{DEVICES}.rng", ())
        el = sub(devices, "rng", model=virtio)
        sub(el, "backend", "/dev/urandom", model="random")
    for i, inp in enumerate(ctx.items(dev, "inputs", DEVICES)):
        where = f"{DEVICES}.inputs[{i}]"
        ctx.known(inp, where, ("name", "type", "bus"))
        itype = ctx.string(inp, "type", where) or "tablet"
        if itype != "tablet":
            raise ctx.error(f"{where}.type", f"input type {itype!r} is not supported (only tablet)")
        bus = ctx.string(inp, "bus", where) or "usb"
        if bus not in ("usb", "virtio"):
            raise ctx.error(f"{where}.bus", f"input bus {bus!r} is not supported (usb or virtio)")
        sub(devices, "input", type=itype, bus=bus)


def _consoles(ctx: RenderContext, devices: ET.Element) -> None:
    """The serial console (unless turned off) and the guest agent's channel."""
    if ctx.boolean(ctx.devices, "autoattachSerialConsole", DEVICES) is not False:
        serial = sub(devices, "serial", type="pty")
        sub(serial, "target", port="0")
        console = sub(devices, "console", type="pty")
        sub(console, "target", type="serial", port="0")
    # The QEMU guest agent channel, as KubeVirt always attaches it.
    channel = sub(devices, "channel", type="unix")
    sub(channel, "target", type="virtio", name="org.qemu.guest_agent.0")


def _graphics(ctx: RenderContext, devices: ET.Element) -> None:
    """VNC graphics and its video card (when the VM and the host want graphics), or the
    video card the VM names alone."""
    dev = ctx.devices
    video = ctx.mapping(dev, "video", DEVICES)
    if video is not None:
        ctx.known(video, f"{DEVICES}.video", ("type",))
    graphics = ctx.boolean(dev, "autoattachGraphicsDevice", DEVICES)
    if graphics is not False and ctx.host.graphics != "none":
        g = sub(devices, "graphics", type="vnc", port="-1", autoport="yes")
        sub(g, "listen", type="address", address=ctx.host.graphics_listen)
        vtype = (ctx.string(video, "type", f"{DEVICES}.video", VIDEO_TYPES) if video else "") or "vga"
        sub(sub(devices, "video"), "model", type=vtype)
    elif video is not None and ctx.string(video, "type", f"{DEVICES}.video", VIDEO_TYPES):
        sub(sub(devices, "video"), "model", type=ctx.string(video, "type", f"{DEVICES}.video"))


def _watchdog(ctx: RenderContext, devices: ET.Element) -> None:
    """The i6300esb watchdog and its action."""
    wd = ctx.mapping(ctx.devices, "watchdog", DEVICES)
    if wd is None:
        return
    where = f"{DEVICES}.watchdog"
    ctx.known(wd, where, ("name", "i6300esb"))
    esb = ctx.mapping(wd, "i6300esb", where)
    if esb is None:
        raise ctx.error(where, "only the i6300esb watchdog is supported")
    ctx.known(esb, f"{where}.i6300esb", ("action",))
    action = ctx.string(esb, "action", f"{where}.i6300esb", WATCHDOG_ACTIONS) or "reset"
    sub(devices, "watchdog", model="i6300esb", action=action)


def _tpm(ctx: RenderContext, devices: ET.Element) -> None:
    """An emulated TPM 2.0 (CRB with persistent state, else TIS)."""
    tpm = ctx.mapping(ctx.devices, "tpm", DEVICES)
    if tpm is None:
        return
    where = f"{DEVICES}.tpm"
    ctx.known(tpm, where, ("persistent", "enabled"))
    if ctx.boolean(tpm, "enabled", where) is not False:
        persistent = bool(ctx.boolean(tpm, "persistent", where))
        el = sub(devices, "tpm", model="tpm-crb" if persistent else "tpm-tis")
        sub(el, "backend", type="emulator", version="2.0", persistent_state="yes" if persistent else None)


def _sound_and_panic(ctx: RenderContext, devices: ET.Element) -> None:
    """The sound card and the panic devices."""
    dev = ctx.devices
    sound = ctx.mapping(dev, "sound", DEVICES)
    if sound is not None:
        ctx.known(sound, f"{DEVICES}.sound", ("name", "model"))
        sub(devices, "sound", model=ctx.string(sound, "model", f"{DEVICES}.sound", SOUND_MODELS) or "ich9")
    for i, p in enumerate(ctx.items(dev, "panicDevices", DEVICES)):
        where = f"{DEVICES}.panicDevices[{i}]"
        ctx.known(p, where, ("model",))
        sub(devices, "panic", model=ctx.string(p, "model", where, PANIC_MODELS) or "isa")
