"""Apply a preference spec to a VMI spec and template metadata (kubevirt-semantics §c).

Input: the preference ``spec`` and the template spec/metadata, edited in place
(the caller passes its own copy). A preferred value only fills a field the VM
left unset; ``preferredAcpi`` and ``preferredDisableHotplug`` overwrite, as in
KubeVirt. The CPU topology and its admission checks (§c.2) are in
``expand.topology``, the ``requirements`` check (§c.7) in ``expand.requirements``.
Never touches the preference it is given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.expand.tree import clone, dig, ensure, ensure_list

if TYPE_CHECKING:
    from reconciler.model import Obj


# --- application ----------------------------------------------------------------------

AUTOATTACH = (
    ("preferredAutoattachGraphicsDevice", "autoattachGraphicsDevice"),
    ("preferredAutoattachMemBalloon", "autoattachMemBalloon"),
    ("preferredAutoattachPodInterface", "autoattachPodInterface"),
    ("preferredAutoattachSerialConsole", "autoattachSerialConsole"),
    ("preferredAutoattachInputDevice", "autoattachInputDevice"),
)
DEVICE_BOOLS = (
    ("preferredUseVirtioTransitional", "useVirtioTransitional"),
    ("preferredBlockMultiQueue", "blockMultiQueue"),
    ("preferredNetworkInterfaceMultiQueue", "networkInterfaceMultiqueue"),
)
HYPERV_FEATURES = (
    "evmcs",
    "frequencies",
    "ipi",
    "reenlightenment",
    "relaxed",
    "reset",
    "runtime",
    "spinlocks",
    "synic",
    "synictimer",
    "tlbflush",
    "vapic",
    "vpindex",
    "vendorid",
)
# Interface binding methods (InterfaceBindingMethod) plus the plugin ``binding``.
BINDINGS = ("bridge", "slirp", "masquerade", "sriov", "macvtap", "passt", "passtBinding", "binding")


def apply_autoattach(pref: Obj | None, spec: Obj) -> None:
    """The five ``preferredAutoattach*`` fields (§0.3 step 7)."""
    prefs = (pref or {}).get("devices")
    if not isinstance(prefs, dict):
        return
    devices = ensure(ensure(spec, "domain"), "devices")
    for src, dst in AUTOATTACH:
        if prefs.get(src) is not None and devices.get(dst) is None:
            devices[dst] = bool(prefs[src])


def _apply_disks(prefs: Obj, devices: Obj) -> None:
    for disk in devices.get("disks") or []:
        if not isinstance(disk, dict):
            continue
        if disk.get("disk") is None and disk.get("cdrom") is None and disk.get("lun") is None:
            disk["disk"] = {}
        if disk.get("disk") is not None:
            target = disk["disk"]
            if prefs.get("preferredDiskBus") and not target.get("bus"):
                target["bus"] = prefs["preferredDiskBus"]
            if prefs.get("preferredDiskBlockSize") is not None and disk.get("blockSize") is None:
                disk["blockSize"] = clone(prefs["preferredDiskBlockSize"])
            if prefs.get("preferredDiskCache") and not disk.get("cache"):
                disk["cache"] = prefs["preferredDiskCache"]
            if prefs.get("preferredDiskIO") and not disk.get("io"):
                disk["io"] = prefs["preferredDiskIO"]
            if (
                prefs.get("preferredDiskDedicatedIoThread") is not None
                and disk.get("dedicatedIOThread") is None
                and target.get("bus") == "virtio"
            ):
                disk["dedicatedIOThread"] = bool(prefs["preferredDiskDedicatedIoThread"])
        elif disk.get("cdrom") is not None:
            if prefs.get("preferredCdromBus") and not disk["cdrom"].get("bus"):
                disk["cdrom"]["bus"] = prefs["preferredCdromBus"]
        elif prefs.get("preferredLunBus") and not disk["lun"].get("bus"):
            disk["lun"]["bus"] = prefs["preferredLunBus"]


def _on_pod_network(name: str, spec: Obj) -> bool:
    for network in spec.get("networks") or []:
        if isinstance(network, dict) and network.get("name") == name:
            return network.get("pod") is not None
    return False


def _apply_interfaces(prefs: Obj, devices: Obj, spec: Obj) -> None:
    for iface in devices.get("interfaces") or []:
        if not isinstance(iface, dict):
            continue
        if prefs.get("preferredInterfaceModel") and not iface.get("model"):
            iface["model"] = prefs["preferredInterfaceModel"]
        if (
            prefs.get("preferredInterfaceMasquerade") is not None
            and all(iface.get(b) is None for b in BINDINGS)
            and _on_pod_network(str(iface.get("name") or ""), spec)
        ):
            iface["masquerade"] = clone(prefs["preferredInterfaceMasquerade"])


def _apply_devices(prefs: Obj, spec: Obj) -> None:
    devices = ensure(ensure(spec, "domain"), "devices")
    for src, dst in DEVICE_BOOLS:
        if prefs.get(src) is not None and devices.get(dst) is None:
            devices[dst] = bool(prefs[src])
    if prefs.get("preferredDisableHotplug") is not None:
        devices["disableHotplug"] = bool(prefs["preferredDisableHotplug"])
    sound = devices.get("sound")
    if prefs.get("preferredSoundModel") and isinstance(sound, dict) and not sound.get("model"):
        sound["model"] = prefs["preferredSoundModel"]
    if prefs.get("preferredRng") is not None and devices.get("rng") is None:
        devices["rng"] = clone(prefs["preferredRng"])
    if prefs.get("preferredTPM") is not None and devices.get("tpm") is None:
        devices["tpm"] = clone(prefs["preferredTPM"])
    if prefs.get("preferredVideoType"):
        video = ensure(devices, "video")
        if not video.get("type"):
            video["type"] = prefs["preferredVideoType"]
    apply_autoattach({"devices": prefs}, spec)
    _apply_disks(prefs, devices)
    _apply_interfaces(prefs, devices, spec)
    for item in devices.get("inputs") or []:
        if not isinstance(item, dict):
            continue
        if prefs.get("preferredInputBus") and not item.get("bus"):
            item["bus"] = prefs["preferredInputBus"]
        if prefs.get("preferredInputType") and not item.get("type"):
            item["type"] = prefs["preferredInputType"]
    model = prefs.get("preferredPanicDeviceModel")
    if model is not None:
        panic = ensure_list(devices, "panicDevices")
        if not panic:
            panic.append({"model": model})
        else:
            for dev in panic:
                if isinstance(dev, dict) and dev.get("model") is None:
                    dev["model"] = model


def _apply_features(prefs: Obj, domain: Obj) -> None:
    features = ensure(domain, "features")
    if prefs.get("preferredAcpi") is not None:
        features["acpi"] = clone(prefs["preferredAcpi"])
    if prefs.get("preferredApic") is not None and features.get("apic") is None:
        features["apic"] = clone(prefs["preferredApic"])
    hyperv = prefs.get("preferredHyperv")
    passthrough = dig(features, "hypervPassthrough", "enabled")
    if isinstance(hyperv, dict) and passthrough is not True:
        target = ensure(features, "hyperv")
        for name in HYPERV_FEATURES:
            if hyperv.get(name) is not None and target.get(name) is None:
                target[name] = clone(hyperv[name])
    for src, dst in (("preferredKvm", "kvm"), ("preferredPvspinlock", "pvspinlock"), ("preferredSmm", "smm")):
        if prefs.get(src) is not None and features.get(dst) is None:
            features[dst] = clone(prefs[src])


def _apply_firmware(prefs: Obj, domain: Obj) -> None:
    firmware = ensure(domain, "firmware")
    bl = ensure(firmware, "bootloader")
    if prefs.get("preferredUseBios") is True and bl.get("bios") is None and bl.get("efi") is None:
        bl["bios"] = {}
    bios = bl.get("bios")
    if (
        prefs.get("preferredUseBiosSerial") is not None
        and isinstance(bios, dict)
        and bios.get("useSerial") is None
    ):
        bios["useSerial"] = bool(prefs["preferredUseBiosSerial"])
    if bl.get("efi") is None and bl.get("bios") is None and prefs.get("preferredEfi") is not None:
        bl["efi"] = clone(prefs["preferredEfi"])
        return
    if prefs.get("preferredUseEfi") is True and bl.get("efi") is None and bl.get("bios") is None:
        bl["efi"] = {}
    efi = bl.get("efi")
    if (
        prefs.get("preferredUseSecureBoot") is not None
        and isinstance(efi, dict)
        and efi.get("secureBoot") is None
    ):
        efi["secureBoot"] = bool(prefs["preferredUseSecureBoot"])


def _apply_clock(prefs: Obj, domain: Obj) -> None:
    clock = ensure(domain, "clock")
    offset = prefs.get("preferredClockOffset")
    if isinstance(offset, dict) and clock.get("utc") is None and clock.get("timezone") is None:
        for key in ("utc", "timezone"):
            if offset.get(key) is not None:
                clock[key] = clone(offset[key])
    if prefs.get("preferredTimer") is not None and clock.get("timer") is None:
        clock["timer"] = clone(prefs["preferredTimer"])


def apply_preference(pref: Obj | None, spec: Obj, meta: Obj) -> None:
    """Apply every preference field to ``spec``/``meta`` in place (KubeVirt's order, §c)."""
    if pref is None:
        return
    domain = ensure(spec, "domain")
    features_wanted = dig(pref, "cpu", "preferredCPUFeatures")
    if features_wanted:
        cpu = ensure(domain, "cpu")
        existing = {f.get("name") for f in cpu.get("features") or [] if isinstance(f, dict)}
        for feature in features_wanted:
            if isinstance(feature, dict) and feature.get("name") not in existing:
                ensure_list(cpu, "features").append(clone(feature))
    if isinstance(pref.get("devices"), dict):
        _apply_devices(pref["devices"], spec)
    if isinstance(pref.get("features"), dict):
        _apply_features(pref["features"], domain)
    if isinstance(pref.get("firmware"), dict):
        _apply_firmware(pref["firmware"], domain)
    machine_type = dig(pref, "machine", "preferredMachineType")
    if machine_type and not dig(domain, "machine", "type"):
        ensure(domain, "machine")["type"] = machine_type
    if isinstance(pref.get("clock"), dict):
        _apply_clock(pref["clock"], domain)
    if pref.get("preferredSubdomain") and not spec.get("subdomain"):
        spec["subdomain"] = pref["preferredSubdomain"]
    if (
        pref.get("preferredTerminationGracePeriodSeconds") is not None
        and spec.get("terminationGracePeriodSeconds") is None
    ):
        spec["terminationGracePeriodSeconds"] = pref["preferredTerminationGracePeriodSeconds"]
    if pref.get("preferredArchitecture") and not spec.get("architecture"):
        spec["architecture"] = pref["preferredArchitecture"]
    annotations = pref.get("annotations")
    if isinstance(annotations, dict) and annotations:
        target = ensure(meta, "annotations")
        for key, val in annotations.items():
            target.setdefault(key, val)
    if pref.get("preferredLaunchSecurity") is not None and domain.get("launchSecurity") is None:
        domain["launchSecurity"] = clone(pref["preferredLaunchSecurity"])


def apply_storage_class(pref: Obj | None, vm_spec: Obj) -> None:
    """``volumes.preferredStorageClassName`` -> dataVolumeTemplates without one (VM admission)."""
    name = dig(pref, "volumes", "preferredStorageClassName")
    if not name:
        return
    for dvt in vm_spec.get("dataVolumeTemplates") or []:
        spec = dig(dvt, "spec")
        if not isinstance(spec, dict):
            continue
        for key in ("pvc", "storage"):
            target = spec.get(key)
            if isinstance(target, dict) and not target.get("storageClassName"):
                target["storageClassName"] = name


__all__ = ["apply_autoattach", "apply_preference", "apply_storage_class"]
