"""The remaining devices of a live domain read back, one reader per device kind: the
emulator, serial console, inputs, TPM, display (graphics and video), sound, watchdog,
memory balloon, rng, panic devices and vsock.

Input: the parsed ``<devices>``, what the readers fill in (``importer.reading.Found``)
and the read's state (``importer.reading.DomainRead``). Output: the ``devices`` fields
of ``spec.template.spec.domain`` each kind is rendered from (``render/devices.py``),
the elements kept for a pass-through and the reasons a device cannot be imported.
``importer.devices.READERS`` calls them in the order of the device kinds
(``model.devices``). Pure: no libvirt, no files; never guesses a value the XML does
not hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.render.devices import PANIC_MODELS, SOUND_MODELS, VIDEO_TYPES, WATCHDOG_ACTIONS

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

    from reconciler.importer.reading import DomainRead, Found


def read_emulator(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    emulator = dev_el.find("emulator")
    if emulator is not None and emulator.text:
        r.setting("emulator", emulator.text.strip())


def read_serial_console(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    """``<serial>`` and ``<console>`` both: ``autoattachSerialConsole`` says them together."""
    if dev_el.find("serial") is None and dev_el.find("console") is None:
        found.devices["autoattachSerialConsole"] = False


def read_inputs(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    inputs: list[dict[str, Any]] = []
    for el in dev_el.findall("input"):
        if el.get("type") == "tablet" and el.get("bus") in ("usb", "virtio"):
            inputs.append({"name": f"tablet{len(inputs)}", "type": "tablet", "bus": el.get("bus")})
    if inputs:
        found.devices["inputs"] = inputs


def read_tpm(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    tpm = dev_el.find("tpm")
    if tpm is None:
        return
    backend = tpm.find("backend")
    persistent = backend is not None and backend.get("persistent_state") == "yes"
    # KubeVirt's TPM: tpm-tis, or tpm-crb when its state persists.
    if r.keep and tpm.get("model", "tpm-tis") != ("tpm-crb" if persistent else "tpm-tis"):
        r.kept.append((("devices",), tpm))
    else:
        found.devices["tpm"] = {"persistent": True} if persistent else {}


def read_display(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    """``<graphics>`` and ``<video>`` both: kept together, or read together."""
    devices = found.devices
    graphics = dev_el.findall("graphics")
    video = dev_el.find("video/model")
    vtype = video.get("type", "") if video is not None else ""
    native = all(g.get("type") == "vnc" for g in graphics[:1]) and (video is None or vtype in VIDEO_TYPES)
    if r.keep and not native:
        # SPICE, or a video model KubeVirt lacks: every display device is kept as it is.
        devices["autoattachGraphicsDevice"] = False
        r.kept.extend((("devices",), el) for el in (*graphics, *dev_el.findall("video")))
        return
    if not graphics:
        devices["autoattachGraphicsDevice"] = False
    else:
        g = graphics[0]
        if g.get("type") != "vnc":
            r.refuse(f"<graphics type={g.get('type')!r}>", "graphics are VNC here")
        listen = g.find("listen")
        address = (listen.get("address") if listen is not None else None) or g.get("listen")
        if address:
            r.setting("graphicsListen", address)
    if video is not None:
        if vtype not in VIDEO_TYPES:
            r.refuse(f"<video><model type={vtype!r}>", f"video models here: {', '.join(VIDEO_TYPES)}")
        elif vtype != "vga" or not graphics:
            devices["video"] = {"type": vtype}


def read_sound(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    sound = dev_el.find("sound")
    if sound is None:
        return
    model = sound.get("model", "")
    if model not in SOUND_MODELS:
        r.keep_or_refuse(
            f"<sound model={model!r}>", f"sound models here: {', '.join(SOUND_MODELS)}", ("devices",), sound
        )
    else:
        found.devices["sound"] = {"name": "sound", "model": model}


def read_watchdog(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    wd = dev_el.find("watchdog")
    if wd is None:
        return
    action = wd.get("action", "reset")
    if wd.get("model") != "i6300esb" or action not in WATCHDOG_ACTIONS:
        r.keep_or_refuse(
            f"<watchdog model={wd.get('model')!r}>", "the watchdog is an i6300esb here", ("devices",), wd
        )
    else:
        found.devices["watchdog"] = {"name": "watchdog", "i6300esb": {"action": action}}


def read_balloon(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    balloon = dev_el.find("memballoon")
    if balloon is not None and balloon.get("model") == "none":
        found.devices["autoattachMemBalloon"] = False


def read_rng(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    if dev_el.find("rng") is not None:
        found.devices["rng"] = {}


def read_panics(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    panics = []
    for p in dev_el.findall("panic"):
        model = p.get("model", "isa")
        if model not in PANIC_MODELS:
            r.keep_or_refuse(
                f"<panic model={model!r}>", f"panic models here: {', '.join(PANIC_MODELS)}", ("devices",), p
            )
        else:
            panics.append({"model": model})
    if panics:
        found.devices["panicDevices"] = panics


def read_vsock(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    if dev_el.find("vsock") is not None:
        found.devices["autoattachVSOCK"] = True


def read_elsewhere(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    """A kind another reader reads with its own (``<console>`` with ``<serial>``,
    ``<video>`` with ``<graphics>``), or none reads: the guest agent channel (its absence
    becomes an omission in ``importer.domain``) and the controllers (libvirt's own, or
    written by render from the fields of the devices on them)."""
