"""KubeVirt's defaults as Stage E applies them (kubevirt-semantics §d.1–§d.4).

Input: a template spec, edited in place (the caller passes its own copy).
Assumes KubeVirt's default cluster configuration on an amd64 host: architecture
``amd64``, machine type per architecture, ``bridge`` as the default pod interface
binding, eviction strategy ``None``. Pure and idempotent.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from reconciler.expand.tree import dig, empty, ensure, ensure_list
from reconciler.model import units

if TYPE_CHECKING:
    from reconciler.model import Obj

DEFAULT_ARCHITECTURE = "amd64"
MACHINE_TYPES = MappingProxyType(
    {"amd64": "q35", "arm64": "virt", "s390x": "s390-ccw-virtio", "ppc64le": "pseries"}
)
DEFAULT_INTERFACE_BINDING = "bridge"
DEFAULT_EVICTION_STRATEGY = "None"
DEFAULT_INPUT_NAME = "default-0"
DEFAULT_NETWORK_NAME = "default"


def add_volume_disks(spec: Obj) -> None:
    """§d.1: ``{name: <volume>}`` for each volume without a disk or filesystem of that name."""
    volumes = spec.get("volumes") or []
    if not volumes:
        return
    devices = ensure(ensure(spec, "domain"), "devices")
    taken = {d.get("name") for d in devices.get("disks") or [] if isinstance(d, dict)}
    taken |= {f.get("name") for f in devices.get("filesystems") or [] if isinstance(f, dict)}
    for volume in volumes:
        name = volume.get("name") if isinstance(volume, dict) else None
        if name and name not in taken:
            ensure_list(devices, "disks").append({"name": name})
            taken.add(name)


def add_input_device(spec: Obj) -> None:
    """§d.2: ``autoattachInputDevice: true`` and no inputs -> one unnamed-bus input."""
    devices = dig(spec, "domain", "devices")
    if not isinstance(devices, dict) or devices.get("autoattachInputDevice") is not True:
        return
    if devices.get("inputs"):
        return
    ensure_list(devices, "inputs").append({"name": DEFAULT_INPUT_NAME})


def add_default_network(spec: Obj) -> None:
    """§d.3: the pod network and a ``bridge`` interface when none are given."""
    devices = ensure(ensure(spec, "domain"), "devices")
    if devices.get("autoattachPodInterface") is False:
        return
    if spec.get("networks") or devices.get("interfaces"):
        return
    devices["interfaces"] = [{"name": DEFAULT_NETWORK_NAME, DEFAULT_INTERFACE_BINDING: {}}]
    spec["networks"] = [{"name": DEFAULT_NETWORK_NAME, "pod": {}}]


def _pull_policy(image: str) -> str:
    # KubeVirt: strings.HasSuffix(image, ":latest") || !strings.ContainsAny(image, ":@")
    if image.endswith(":latest") or (":" not in image and "@" not in image):
        return "Always"
    return "IfNotPresent"


def _nonzero(resources: Obj, name: str) -> bool:
    """A resource is given and not zero (``Quantity.IsZero``)."""
    if resources.get(name) is None:
        return False
    try:
        return units.quantity_value(resources[name]) != 0
    except units.QuantityError:
        return True  # not ours to judge; validation rejects it later


def _vcpus(value: object) -> int:
    try:
        return units.quantity_ceil(value)
    except units.QuantityError:
        return 1


def apply_spec_defaults(spec: Obj, default_arch: str = DEFAULT_ARCHITECTURE) -> None:
    """§d.4, in KubeVirt's order."""
    if not spec.get("architecture"):
        spec["architecture"] = default_arch
    domain = ensure(spec, "domain")
    machine = ensure(domain, "machine")
    if not machine.get("type"):
        machine["type"] = MACHINE_TYPES.get(str(spec["architecture"]), MACHINE_TYPES[DEFAULT_ARCHITECTURE])
    resources = ensure(domain, "resources")
    limits: Obj = resources["limits"] if isinstance(resources.get("limits"), dict) else {}
    requests: Obj = resources["requests"] if isinstance(resources.get("requests"), dict) else {}
    if _nonzero(limits, "cpu") and not _nonzero(requests, "cpu"):
        requests = ensure(resources, "requests")
        requests["cpu"] = limits["cpu"]
    memory = ensure(domain, "memory")
    if memory.get("guest") is None:
        if _nonzero(requests, "memory"):
            memory["guest"] = requests["memory"]
        elif _nonzero(limits, "memory"):
            memory["guest"] = limits["memory"]
        elif isinstance(memory.get("hugepages"), dict) and units.is_quantity(
            memory["hugepages"].get("pageSize")
        ):
            memory["guest"] = memory["hugepages"]["pageSize"]
    cpu = ensure(domain, "cpu")
    if all(empty(cpu.get(k)) for k in ("sockets", "cores", "threads")):
        # KubeVirt: sockets from limits.cpu, else requests.cpu (rounded up), else 1
        sockets = 1
        if "cpu" in limits:
            sockets = _vcpus(limits["cpu"])
        elif "cpu" in requests:
            sockets = _vcpus(requests["cpu"])
        cpu["sockets"], cpu["cores"], cpu["threads"] = sockets, 1, 1
    for volume in spec.get("volumes") or []:
        disk = volume.get("containerDisk") if isinstance(volume, dict) else None
        if isinstance(disk, dict) and not disk.get("imagePullPolicy") and disk.get("image"):
            disk["imagePullPolicy"] = _pull_policy(str(disk["image"]))
    if spec.get("evictionStrategy") is None:
        spec["evictionStrategy"] = DEFAULT_EVICTION_STRATEGY
    add_default_network(spec)
    add_volume_disks(spec)
