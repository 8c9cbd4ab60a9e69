"""Apply a preference spec to a VMI spec and template metadata (kubevirt-semantics §c).

Input: the preference ``spec`` and the template spec/metadata, edited in place
(the caller passes its own copy). A preferred value only fills a field the VM
left unset; ``preferredAcpi`` and ``preferredDisableHotplug`` overwrite, as in
KubeVirt. Also: CPU topology from an instancetype's ``cpu.guest`` (§c.2),
the spread divisibility check (§c.2.4), preference admission checks and the
``requirements`` check (§c.7). Never touches the preference it is given.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from reconciler.expand.tree import RuleError, clone, dig, ensure, ensure_list
from reconciler.model import units

if TYPE_CHECKING:
    from fractions import Fraction

    from reconciler.model import Obj

SOCKETS, CORES, THREADS, SPREAD, ANY = "sockets", "cores", "threads", "spread", "any"
TOPOLOGIES = MappingProxyType(
    {
        SOCKETS: SOCKETS,
        "preferSockets": SOCKETS,
        CORES: CORES,
        "preferCores": CORES,
        THREADS: THREADS,
        "preferThreads": THREADS,
        SPREAD: SPREAD,
        "preferSpread": SPREAD,
        ANY: ANY,
        "preferAny": ANY,
    }
)
DEPRECATED_TOPOLOGIES = frozenset(
    {"preferSockets", "preferCores", "preferThreads", "preferSpread", "preferAny"}
)
SOCKETS_CORES, CORES_THREADS, SOCKETS_CORES_THREADS = "SocketsCores", "CoresThreads", "SocketsCoresThreads"
ACROSS = (SOCKETS_CORES, CORES_THREADS, SOCKETS_CORES_THREADS)

REQUIREMENTS_PREFIX = "failure checking preference requirements: "
CPU_FIELD = ("spec", "template", "spec", "domain", "cpu")


class PreferenceError(RuleError):
    """A preference rule rejects the VM."""


# --- CPU topology -------------------------------------------------------------------


def preferred_topology(pref: Obj | None) -> str:
    """The topology name as written (``sockets`` when absent)."""
    value = dig(pref, "cpu", "preferredCPUTopology")
    return str(value) if value else SOCKETS


def spread_options(pref: Obj | None) -> tuple[int, str]:
    ratio = 2
    if pref and pref.get("preferSpreadSocketToCoreRatio"):
        ratio = int(pref["preferSpreadSocketToCoreRatio"])
    across = SOCKETS_CORES
    options = dig(pref, "cpu", "spreadOptions")
    if isinstance(options, dict):
        if options.get("across") is not None:
            across = str(options["across"])
        if options.get("ratio") is not None:
            ratio = int(options["ratio"])
    return ratio, across


def guest_topology(vcpus: int, pref: Obj | None) -> tuple[int, int, int]:
    """(sockets, cores, threads) for ``vcpus`` under the preference's topology (§c.2)."""
    sockets = cores = threads = 1
    if vcpus == 1:
        return sockets, cores, threads
    topology = TOPOLOGIES.get(preferred_topology(pref))
    if topology == CORES:
        cores = vcpus
    elif topology in (SOCKETS, ANY):
        sockets = vcpus
    elif topology == THREADS:
        threads = vcpus
    elif topology == SPREAD:
        ratio, across = spread_options(pref)
        ratio = ratio or 1
        if across == SOCKETS_CORES:
            cores, sockets = ratio, vcpus // ratio
        elif across == CORES_THREADS:
            threads, cores = ratio, vcpus // ratio
        elif across == SOCKETS_CORES_THREADS:
            threads, cores, sockets = 2, ratio, vcpus // 2 // ratio
    return sockets, cores, threads


def validate_preference(pref: Obj) -> list[str]:
    """Preference admission (§c.2.4): raises on an invalid topology; returns deprecation warnings."""
    warnings = []
    value = dig(pref, "cpu", "preferredCPUTopology")
    if value:
        if value not in TOPOLOGIES:
            raise PreferenceError(f"unknown preferredCPUTopology {value}")
        if value in DEPRECATED_TOPOLOGIES:
            warnings.append(
                f"PreferredCPUTopology {value} is deprecated for removal in a future release, "
                f"please use {TOPOLOGIES[value]} instead"
            )
        if TOPOLOGIES[value] == SPREAD:
            ratio, across = spread_options(pref)
            if across not in ACROSS:
                raise PreferenceError(f"across {across} is not supported")
            if across == CORES_THREADS and ratio != 2:
                raise PreferenceError(
                    "only a ratio of 2 (1 core 2 threads) is allowed when spreading vCPUs over cores and threads"
                )
            if ratio <= 0:
                raise PreferenceError(f"spread ratio {ratio} must be positive")
    return warnings


def check_spread(it: Obj | None, pref: Obj | None) -> None:
    """VM admission: the instancetype's vCPUs must divide by the spread ratio (§c.2.4)."""
    if it is None or pref is None or TOPOLOGIES.get(preferred_topology(pref)) != SPREAD:
        return
    guest = int(dig(it, "cpu", "guest") or 0)
    ratio, across = spread_options(pref)
    if ratio <= 0:
        raise PreferenceError(f"spread ratio {ratio} must be positive")
    if across == SOCKETS_CORES and guest % ratio != 0:
        raise PreferenceError(
            f"{guest} vCPUs provided by the instance type are not divisible by the "
            f"Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of {ratio} provided by the preference"
        )
    if across == CORES_THREADS and guest % ratio != 0:
        raise PreferenceError(
            f"{guest} vCPUs provided by the instance type are not divisible by the number of threads per core {ratio}"
        )
    if across == SOCKETS_CORES_THREADS and (guest % 2 != 0 or (guest // 2) % ratio != 0):
        raise PreferenceError(
            f"{guest} vCPUs provided by the instance type are not divisible by the number of threads per core 2 "
            f"and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of {ratio}"
        )


# --- requirements (§c.7) --------------------------------------------------------------


def check_requirements(it: Obj | None, pref: Obj | None, spec: Obj, default_arch: str) -> None:
    """Raise PreferenceError when the VM (after instancetype + defaults) misses a requirement."""
    req = (pref or {}).get("requirements")
    if not isinstance(req, dict):
        return
    need_cpu = int(dig(req, "cpu", "guest") or 0)
    if dig(req, "cpu") is not None:
        _check_cpu(it, pref, spec, need_cpu)
    if dig(req, "memory") is not None and dig(req, "memory", "guest") is not None:
        _check_memory(it, spec, req["memory"]["guest"])
    arch = req.get("architecture")
    if arch is not None:
        have = spec.get("architecture") or default_arch
        if have != arch:
            raise PreferenceError(
                f"{REQUIREMENTS_PREFIX}preference requires architecture {arch} but {have} is being requested",
                ("spec", "template", "spec", "architecture"),
            )


def _check_cpu(it: Obj | None, pref: Obj | None, spec: Obj, need: int) -> None:
    if it is not None:
        have = int(dig(it, "cpu", "guest") or 0)
        if have < need:
            raise PreferenceError(
                f"{REQUIREMENTS_PREFIX}insufficient CPU resources of {have} vCPU provided by instance type, "
                f"preference requires {need} vCPU",
                ("spec", "instancetype"),
            )
        return
    cpu = dig(spec, "domain", "cpu")
    if cpu is None:
        raise PreferenceError(
            f"{REQUIREMENTS_PREFIX}no CPU resources provided by VirtualMachine, preference requires {need} vCPU",
            CPU_FIELD,
        )
    sockets, cores, threads = (int(cpu.get(k) or 0) for k in ("sockets", "cores", "threads"))
    topology = TOPOLOGIES.get(preferred_topology(pref))
    if topology == THREADS:
        have, what = threads, "threads"
    elif topology == CORES:
        have, what = cores, "cores"
    elif topology == SOCKETS:
        have, what = sockets, "sockets"
    elif topology == ANY:
        have, what = cores * sockets * threads, "cores, sockets and threads"
    elif topology == SPREAD:
        _, what = spread_options(pref)
        if what == SOCKETS_CORES:
            have = sockets * cores
        elif what == CORES_THREADS:
            have = cores * threads
        else:
            have = sockets * cores * threads
    else:
        return
    if have < need:
        raise PreferenceError(
            f"{REQUIREMENTS_PREFIX}insufficient CPU resources of {have} vCPU provided by VirtualMachine, "
            f"preference requires {need} vCPU provided as {what}",
            CPU_FIELD,
        )


def _amount(value: object, what: str, field: tuple[str, ...]) -> Fraction:
    """A quantity's amount; one that is not a quantity is a rule error at ``field``."""
    try:
        return units.quantity_value(value)
    except units.QuantityError as err:
        raise PreferenceError(f"{what}: {err}", field) from err


def _check_memory(it: Obj | None, spec: Obj, need: object) -> None:
    need_bytes = _amount(need, "requirements.memory.guest of the preference", ("spec", "preference"))
    if it is not None:
        have = dig(it, "memory", "guest")
        if (
            have is not None
            and _amount(have, "instancetype memory.guest", ("spec", "instancetype")) < need_bytes
        ):
            raise PreferenceError(
                f"{REQUIREMENTS_PREFIX}insufficient Memory resources of {units.normalized(have)} provided by "
                f"instance type, preference requires {units.normalized(need)}",
                ("spec", "instancetype"),
            )
        return
    memory = dig(spec, "domain", "memory")
    if memory is None:
        return
    have = memory.get("guest")
    field = ("spec", "template", "spec", "domain", "memory")
    have_bytes = (
        _amount(have, "spec.template.spec.domain.memory.guest", (*field, "guest")) if have is not None else 0
    )
    if have_bytes < need_bytes:
        shown = units.normalized(have) if have is not None else "0"
        raise PreferenceError(
            f"{REQUIREMENTS_PREFIX}insufficient Memory resources of {shown} provided by VirtualMachine, "
            f"preference requires {units.normalized(need)}",
            field,
        )


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


__all__ = [
    "PreferenceError",
    "apply_autoattach",
    "apply_preference",
    "apply_storage_class",
    "check_requirements",
    "check_spread",
    "guest_topology",
    "validate_preference",
]
