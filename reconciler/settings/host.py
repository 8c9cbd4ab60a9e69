"""The host configuration as a record: how KubeVirt concepts map onto one libvirt host.

A frozen ``HostConfig`` (networks, images, directories, devices, defaults) and its parts,
the vocabularies its fields take, and the lexical path checks every stage shares. Pure
records: nothing here reads a file (``config.host`` reads the YAML into one).
``HostConfig()`` alone is a working demo configuration for ``test:///default``.
"""

from __future__ import annotations

import posixpath
from dataclasses import field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.records import dataclass
from reconciler.settings.images import ImageStoreConfig
from reconciler.settings.registries import Registries

if TYPE_CHECKING:
    from collections.abc import Mapping

NETWORK_KINDS = ("network", "bridge", "direct", "user")  # direct: macvtap on a host interface
# What a KubeVirt network binding plugin (``binding: {name: NAME}``) is on a libvirt host:
# bridge: plugged into the network the interface's network maps to (a tap device, as
# KubeVirt's ``domainAttachmentType: tap``/``managedTap``); passt: user-mode networking
# through libvirt's passt backend; slirp: user-mode networking through QEMU's slirp;
# macvtap: a direct interface on the host interface the network maps to.
BINDING_EQUIVALENTS = ("bridge", "passt", "slirp", "macvtap")
IMAGE_FORMATS = ("qcow2", "raw")
ROLLOUTS = ("Stage", "Restart")
REVISION_POLICIES = ("pin", "follow")
GRAPHICS = ("vnc", "none")
DOMAIN_TYPES = ("", "kvm", "qemu", "test")  # test: libvirt's test driver (its own domains)
# Trees of the host's own system, never a place for VM disks: an allowed directory there
# (or resolving there) would let a hostDisk read or overwrite the host itself.
SYSTEM_TREES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/root",
    "/sbin",
    "/sys",
    "/usr",
)


def system_tree(path: str) -> str | None:
    """``/`` or the system tree (``SYSTEM_TREES``) an absolute normalized path is in, if any."""
    if path.rstrip("/") == "":
        return "/"
    return next((t for t in SYSTEM_TREES if path == t or path.startswith(t + "/")), None)


@dataclass(frozen=True, slots=True)
class NetworkTarget:
    """Where an interface is plugged in: a libvirt network, a host bridge or user-mode."""

    kind: str  # "network" | "bridge" | "direct" (macvtap on a host interface) | "user"
    name: str = ""  # network, bridge or host interface name; "" for user


@dataclass(frozen=True, slots=True)
class ImageSource:
    """A local image file standing in for a containerDisk image or a DataVolume source."""

    path: str
    format: str = "qcow2"
    digest: str = ""  # "sha256:..." of an image the host resolved into its store ("" = a local file)


@dataclass(frozen=True, slots=True)
class HostDevice:
    """A host device a KubeVirt ``deviceName`` stands for: a PCI function, a USB device, or
    a pool of mediated devices (vGPUs) of which each VM asking for the name gets one."""

    kind: str  # "pci" | "usb" | "mdev"
    address: str  # pci: "0000:65:00.0"; usb: "vendor:product", e.g. "1d6b:0002"; mdev: its type or ""
    uuids: tuple[str, ...] = ()  # mdev: the instances of the pool, in the order they are handed out


def _frozen(d: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True, slots=True)
class HostConfig:
    name: str = "localhost"
    # The owner identity new MACs are derived with (set from the owner by config.targets;
    # "" for commands that have none: render, validate)
    mac_seed: str = ""
    claim_unselected: bool = True
    allowed_dirs: tuple[str, ...] = ("/var/lib/reconciler", "/var/lib/libvirt/images")
    volume_dir: str = "/var/lib/reconciler/volumes"
    nvram_dir: str = "/var/lib/libvirt/qemu/nvram"
    # Host-side Secrets, as KubeVirt mounts them: <secretsDirectory>/<namespace>/<name>/<key>.
    # Read at apply time only (never rendered, planned or logged); "" = none.
    secrets_dir: str = ""
    # Host-side ConfigMaps, same layout: <configMapsDirectory>/<namespace>/<name>/<key>.
    # Used for ConfigMaps the build does not hold; read when the ISO is built; "" = none.
    config_maps_dir: str = ""
    storage_pool: str = "default"
    storage_pool_format: str = "qcow2"  # format of PVC/dataVolume volumes in the pool
    images: Mapping[str, ImageSource] = field(default_factory=_frozen)
    image_store: ImageStoreConfig = field(default_factory=ImageStoreConfig)
    # Set by the host's image resolution (``images.resolve``): every reference is in
    # ``images``; False (offline: render, diff) shows an unmapped reference as written.
    images_resolved: bool = False
    # None: the libvirt network "default" where the host has it, else user-mode
    # networking (``render.interfaces.pod_target``).
    pod_network: NetworkTarget | None = None
    networks: Mapping[str, NetworkTarget] = field(default_factory=_frozen)
    # Site-specific network binding plugin names -> their libvirt equivalent (one of
    # BINDING_EQUIVALENTS); added to, and overriding, the plugins KubeVirt documents
    # (``render.interfaces.PLUGINS``).
    binding_plugins: Mapping[str, str] = field(default_factory=_frozen)
    ovmf_code: str = ""  # "" = from the host's domain capabilities, else the Debian path
    ovmf_vars: str = ""
    ovmf_secure_code: str = ""
    ovmf_secure_vars: str = ""
    domain_type: str = ""  # "" = kvm when the host offers it, else qemu
    emulator: str = ""  # "" = from the host's capabilities
    cpu_model: str = "host-model"  # used when a VM names no cpu.model
    graphics: str = "vnc"  # "vnc" | "none": device for VMs that keep autoattachGraphicsDevice
    graphics_listen: str = "127.0.0.1"
    rollout: str = "Stage"  # host-wide default for restart-class changes
    instancetype_revisions: str = "pin"  # "pin" | "follow"
    # The repository's copy of this host's facts (``reconciler host-facts -o``), a path
    # in the repository; the daemon warns when it no longer matches the host.
    facts_file: str = ""
    # KubeVirt deviceName (gpus[], hostDevices[]) -> the host device it passes through.
    host_devices: Mapping[str, HostDevice] = field(default_factory=_frozen)
    # Host CPUs that VMs with dedicatedCpuPlacement may have to themselves (a cpuset,
    # "2-7,10"), in order; () = none, and such a VM cannot run here.
    dedicated_cpus: tuple[int, ...] = ()
    # How images are pulled from registries (``config.registries``): insecure, mirrors, authFile.
    registries: Registries = field(default_factory=Registries)

    def __post_init__(self) -> None:
        # Accept plain dicts from Python callers but keep the record read-only.
        if not isinstance(self.images, MappingProxyType):
            object.__setattr__(self, "images", _frozen(self.images))
        if not isinstance(self.networks, MappingProxyType):
            object.__setattr__(self, "networks", _frozen(self.networks))
        if not isinstance(self.binding_plugins, MappingProxyType):
            object.__setattr__(self, "binding_plugins", _frozen(self.binding_plugins))
        if not isinstance(self.host_devices, MappingProxyType):
            object.__setattr__(self, "host_devices", _frozen(self.host_devices))

    def network_for(self, network_name: str, namespace: str) -> NetworkTarget | None:
        """The target of a multus ``networkName`` (``name`` or ``namespace/name``)."""
        if network_name in self.networks:
            return self.networks[network_name]
        if "/" not in network_name:
            return self.networks.get(f"{namespace}/{network_name}")
        return None


def path_inside(path: str, directories: tuple[str, ...]) -> bool:
    """Lexical check: ``path`` (absolute, normalized) lies below one of ``directories``."""
    if not path.startswith("/") or "\x00" in path:
        return False
    norm = posixpath.normpath(path)
    if norm != path.rstrip("/") and norm != path:
        return False  # "..", "//", "/./" are refused rather than interpreted
    return any(norm.startswith(d.rstrip("/") + "/") for d in directories)
