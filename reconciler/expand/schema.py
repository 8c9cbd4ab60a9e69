"""The known fields of instancetype and preference specs (instancetype.kubevirt.io v1beta1).

Input: a spec. Output: the paths of fields the API does not define; the expansion
reports them as ignored instead of dropping them silently (the API server would prune
or reject them). Alpha versions use the same names. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

# A nested mapping names the known sub-fields; None accepts any content (maps, lists, KubeVirt types).
Schema = Mapping[str, "Schema | None"]

INSTANCETYPE_SPEC: Schema = MappingProxyType(
    {
        "annotations": None,
        "cpu": MappingProxyType(
            {
                "guest": None,
                "model": None,
                "dedicatedCPUPlacement": None,
                "numa": None,
                "isolateEmulatorThread": None,
                "realtime": None,
                "maxSockets": None,
            }
        ),
        "memory": MappingProxyType(
            {"guest": None, "hugepages": None, "overcommitPercent": None, "maxGuest": None}
        ),
        "gpus": None,
        "hostDevices": None,
        "ioThreadsPolicy": None,
        "ioThreads": MappingProxyType({"supplementalPoolThreadCount": None}),
        "launchSecurity": None,
        "nodeSelector": None,
        "schedulerName": None,
    }
)

PREFERENCE_SPEC: Schema = MappingProxyType(
    {
        "annotations": None,
        "clock": MappingProxyType({"preferredClockOffset": None, "preferredTimer": None}),
        "cpu": MappingProxyType(
            {
                "preferredCPUTopology": None,
                "spreadOptions": MappingProxyType({"across": None, "ratio": None}),
                "preferredCPUFeatures": None,
            }
        ),
        "devices": MappingProxyType(
            dict.fromkeys(
                (
                    "preferredAutoattachGraphicsDevice",
                    "preferredAutoattachMemBalloon",
                    "preferredAutoattachPodInterface",
                    "preferredAutoattachSerialConsole",
                    "preferredAutoattachInputDevice",
                    "preferredDisableHotplug",
                    "preferredVirtualGPUOptions",
                    "preferredSoundModel",
                    "preferredUseVirtioTransitional",
                    "preferredInputBus",
                    "preferredInputType",
                    "preferredDiskBus",
                    "preferredLunBus",
                    "preferredCdromBus",
                    "preferredDiskDedicatedIoThread",
                    "preferredDiskCache",
                    "preferredDiskIO",
                    "preferredDiskBlockSize",
                    "preferredInterfaceModel",
                    "preferredRng",
                    "preferredBlockMultiQueue",
                    "preferredNetworkInterfaceMultiQueue",
                    "preferredTPM",
                    "preferredInterfaceMasquerade",
                    "preferredPanicDeviceModel",
                    "preferredVideoType",
                )
            )
        ),
        "features": MappingProxyType(
            dict.fromkeys(
                (
                    "preferredAcpi",
                    "preferredApic",
                    "preferredHyperv",
                    "preferredKvm",
                    "preferredPvspinlock",
                    "preferredSmm",
                )
            )
        ),
        "firmware": MappingProxyType(
            {
                "preferredUseBios": None,
                "preferredUseBiosSerial": None,
                "preferredUseEfi": None,
                "preferredUseSecureBoot": None,
                "preferredEfi": None,
            }
        ),
        "machine": MappingProxyType({"preferredMachineType": None}),
        "volumes": MappingProxyType({"preferredStorageClassName": None}),
        "preferredSubdomain": None,
        "preferredTerminationGracePeriodSeconds": None,
        "requirements": MappingProxyType(
            {
                "cpu": MappingProxyType({"guest": None}),
                "memory": MappingProxyType({"guest": None}),
                "architecture": None,
            }
        ),
        "preferSpreadSocketToCoreRatio": None,
        "preferredArchitecture": None,
        "preferredLaunchSecurity": None,
    }
)

# Defined by the API but applied by no KubeVirt code (kubevirt-semantics §c.3).
NOT_APPLIED = frozenset({("devices", "preferredVirtualGPUOptions")})


def unknown_fields(spec: Any, schema: Schema, prefix: str = "spec") -> list[str]:
    """Dotted paths of fields in ``spec`` that ``schema`` does not define."""
    out: list[str] = []
    if not isinstance(spec, dict):
        return out
    for key, value in spec.items():
        path = f"{prefix}.{key}"
        if key not in schema:
            out.append(path)
            continue
        sub = schema[key]
        if sub is not None:
            out.extend(unknown_fields(value, sub, path))
    return out


def unapplied_fields(spec: Any) -> list[str]:
    """Preference fields that are valid but have no effect anywhere."""
    out = []
    for section, name in sorted(NOT_APPLIED):
        if (
            isinstance(spec, dict)
            and isinstance(spec.get(section), dict)
            and spec[section].get(name) is not None
        ):
            out.append(f"spec.{section}.{name}")
    return out
