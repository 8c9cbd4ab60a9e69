"""The host configuration an import writes: what the imported domains use, merged.

Input: the ``HostAsk`` of each domain read back (``importer.domain``). Output: the host
config as the mapping its YAML file holds (``host_config_obj``), and per domain the
settings it asks for that the host config cannot give it (a host has one emulator, one
domain type, one storage pool, one VNC listen address, one set of OVMF files): the
value most domains ask for wins, the others are named. Pure.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.settings.cpuset import format_cpuset
from reconciler.settings.host import HostConfig

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from reconciler.importer.reading import Reading
    from reconciler.render.caps import HostCaps

# Host-config keys of the single-valued settings (``HostAsk.settings``), by path.
SETTING_PATHS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "domainType": ("domainType",),
        "emulator": ("emulator",),
        "storagePool": ("storagePool",),
        "storagePoolFormat": ("storagePoolFormat",),
        "nvramDirectory": ("nvramDirectory",),
        "graphicsListen": ("defaults", "graphicsListen"),
        "efiCode": ("firmware", "efiCode"),
        "efiVars": ("firmware", "efiVars"),
        "secureBootCode": ("firmware", "secureBootCode"),
        "secureBootVars": ("firmware", "secureBootVars"),
    }
)
# Generated files (emptyDisk, overlays, ISOs) of VMs created later: never a disk of
# the domains imported.
VOLUME_DIRECTORY = "/var/lib/reconciler/volumes"


def chosen_settings(readings: Sequence[Reading]) -> dict[str, str]:
    """Per setting, the value most domains ask for (ties: the smallest)."""
    counts: dict[str, Counter[str]] = {}
    for r in readings:
        for key, value in r.ask.settings:
            counts.setdefault(key, Counter())[value] += 1
    return {key: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for key, c in counts.items()}


def setting_conflicts(reading: Reading, chosen: dict[str, str]) -> tuple[str, ...]:
    """Why ``reading`` cannot share the host config's single-valued settings."""
    out = []
    for key, value in reading.ask.settings:
        if chosen.get(key, value) != value:
            out.append(
                f"host config {key}: this domain has {value!r}, the host config takes "
                f"{chosen[key]!r} (what most domains have)"
            )
    return tuple(out)


def _directories(paths: Sequence[str]) -> list[str]:
    """The directories, without those inside another one of them."""
    out: list[str] = []
    for d in sorted(set(paths), key=lambda p: (p.count("/"), p)):
        if not any(d == o or d.startswith(o.rstrip("/") + "/") for o in out):
            out.append(d)
    return sorted(out)


def host_defaults(caps: HostCaps) -> dict[str, str]:
    """What each setting is when the host config leaves it out (the host's own)."""
    d = HostConfig()
    return {
        "domainType": caps.domain_type,
        "emulator": caps.emulator,
        "storagePool": d.storage_pool,
        "storagePoolFormat": d.storage_pool_format,
        "nvramDirectory": d.nvram_dir,
        "graphicsListen": d.graphics_listen,
        "efiCode": caps.ovmf_code,
        "efiVars": caps.ovmf_vars,
        "secureBootCode": caps.ovmf_secure_code,
        "secureBootVars": caps.ovmf_secure_vars,
    }


def host_config_obj(readings: Sequence[Reading], name: str, defaults: dict[str, str]) -> dict[str, Any]:
    """The host config of the domains ``readings`` (those imported), as its YAML holds it;
    a setting equal to the host's own (``defaults``) is left out."""
    obj: dict[str, Any] = {"name": name, "claimUnselected": True}
    chosen = chosen_settings(readings)
    for key, value in sorted(chosen.items()):
        if defaults.get(key) == value:
            continue
        node = obj
        path = SETTING_PATHS[key]
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    dirs = [d for r in readings for d in r.ask.directories]
    obj["allowedDirectories"] = _directories([*dirs, posixpath.dirname(VOLUME_DIRECTORY)])
    obj["volumeDirectory"] = VOLUME_DIRECTORY
    networks: dict[str, Any] = {}
    pods = Counter(r.ask.pod for r in readings if r.ask.pod is not None)
    if pods:
        (kind, target), _ = min(pods.items(), key=lambda kv: (-kv[1], kv[0]))
        networks["pod"] = {kind: {} if kind == "user" else target}
    multus = {net: {kind: target} for r in readings for net, kind, target in r.ask.networks}
    if multus:
        networks["multus"] = dict(sorted(multus.items()))
    if networks:
        obj["networks"] = networks
    devices: dict[str, Any] = {
        n: {kind: {"uuids": [address]} if kind == "mdev" else address}
        for r in readings
        for n, kind, address in r.ask.host_devices
    }
    if devices:
        obj["hostDevices"] = dict(sorted(devices.items()))
    cpus = sorted({c for r in readings for c in r.ask.dedicated_cpus})
    if cpus:
        obj["dedicatedCpus"] = format_cpuset(cpus)
    images = {image: directory for r in readings for image, directory in r.ask.images}
    if images:
        obj["images"] = dict(sorted(images.items()))
    return obj


def pod_conflicts(reading: Reading, obj: dict[str, Any]) -> tuple[str, ...]:
    """Why ``reading``'s pod network is not the host config's."""
    if reading.ask.pod is None:
        return ()
    kind, target = reading.ask.pod
    pod = (obj.get("networks") or {}).get("pod") or {}
    if pod.get(kind) == ({} if kind == "user" else target):
        return ()
    return (
        f"host config networks.pod: this domain's first NIC is on {kind} {target!r}, the host's is {pod}",
    )
