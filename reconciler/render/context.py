"""Shared state of one render: the parts of the VM's spec, the host, and collected results.

Input: the parts of one expanded VM the area modules render (its template spec, domain
and devices, its template's annotations, its own spec for ``dataVolumeTemplates``, the
namespace its references resolve in, the ConfigMaps and Secrets of the build it names
and the generated names it refers to without their hash), where its files go on the
host (derived from its identity by ``render.identity``), a ``HostConfig`` and
``HostCaps``. Output: helpers the area modules use to read fields
(with their KubeVirt path for errors), reject what cannot be rendered (``SpecError``,
never a silent drop; ``render_draft`` names the VM in the ``RenderError`` it becomes),
and collect the volumes apply must provision. The context holds no VM identity: a
module that renders identity (the domain's name, MAC addresses, the guest's hostname)
is handed the ``Guest`` explicitly. Pure; never touches the host.
"""

from __future__ import annotations

import posixpath
from dataclasses import field
from typing import TYPE_CHECKING, Any

from reconciler.manifests import limits
from reconciler.model.identifiers import PCI_FORM, parse_pci
from reconciler.model.secretdata import SecretData
from reconciler.model.units import quantity_bytes, quantity_count
from reconciler.records import dataclass
from reconciler.settings.host import HostConfig, path_inside

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from reconciler.model import ConfigDigest, CpuNeed, VMKey, VolumeSpec
    from reconciler.render.caps import HostCaps

SPEC = "spec.template.spec"
DOMAIN = f"{SPEC}.domain"
DEVICES = f"{DOMAIN}.devices"


class SpecError(Exception):
    """A field of the VM's spec that cannot be rendered (``field``: its KubeVirt path).
    ``render_draft`` turns it into the ``RenderError`` naming the VM."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class Guest:
    """The VM's identity as its guest and its host see it: the key (the domain's name,
    the guest's hostname) and the domain's UUID. Handed to the modules that render
    identity (MAC addresses, cloud-init's instance id and hostname), never kept in the
    context."""

    key: VMKey
    uuid: str

    @property
    def hostname(self) -> str:
        return self.key.name

    @property
    def instance_id(self) -> str:
        return f"{self.key.name}.{self.key.namespace}"


@dataclass(slots=True)
class RenderContext:
    spec: Mapping[str, Any]  # spec.template.spec
    host: HostConfig
    caps: HostCaps
    namespace: str = "default"  # where the VM's references (Secrets, networks, claims) resolve
    annotations: Mapping[str, Any] = field(default_factory=dict)  # spec.template.metadata.annotations
    vm_spec: Mapping[str, Any] = field(default_factory=dict)  # the VM's spec (dataVolumeTemplates)
    config_maps: tuple[tuple[str, tuple[tuple[str, str, bool], ...]], ...] = ()  # ExpandedVM's
    # Names the VM refers to that the build holds only with a hash suffix (ExpandedVM's).
    hashed_names: tuple[tuple[str, str, str], ...] = ()
    secrets: SecretData = field(default_factory=SecretData)  # the build's Secrets the VM names (ExpandedVM's)
    artefact_dir: str = ""  # where generated per-VM files live: ``<volumeDirectory>/<domain>``
    nvram_file: str = ""  # the domain's EFI variable store: ``<nvramDirectory>/<domain>_VARS.fd``
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (field path, message)
    volumes: list[VolumeSpec] = field(default_factory=list)
    vcpus: int = 1  # set by the cpu module, read by disk/interface queues
    max_vcpus: int = 1  # the vCPU maximum (with maxSockets), set by the cpu module
    cpu_need: CpuNeed | None = None  # dedicatedCpuPlacement, set by the cpu module
    uuid: str = ""  # set first by render_draft
    macs: list[tuple[str, str]] = field(default_factory=list)  # (MAC, field path), set by interfaces
    derived_macs: list[tuple[str, str]] = field(default_factory=list)  # (MAC, interface) not given
    host_devices: list[tuple[str, str]] = field(default_factory=list)  # ("pci 0000:65:00.0", field path)
    mdev_needs: list[tuple[str, str]] = field(default_factory=list)  # (deviceName, field path) per mdev
    config: list[ConfigDigest] = field(default_factory=list)  # generated ISOs, set by disks
    artefacts: dict[str, str] = field(default_factory=dict)  # generated file name -> field path
    domain: Mapping[str, Any] = field(init=False)  # spec.template.spec.domain
    devices: Mapping[str, Any] = field(init=False)  # spec.template.spec.domain.devices

    def __post_init__(self) -> None:
        domain = self.spec.get("domain")
        self.domain = domain if isinstance(domain, dict) else {}
        devices = self.domain.get("devices")
        self.devices = devices if isinstance(devices, dict) else {}

    boot_orders: dict[int, str] = field(default_factory=dict)  # order -> field path

    def boot_order(self, node: Mapping[str, Any], where: str) -> str | None:
        """``bootOrder`` as text; > 0 and unique across disks and interfaces."""
        order = self.integer(node, "bootOrder", where, minimum=1)
        if order is None:
            return None
        if order in self.boot_orders:
            raise self.error(
                f"{where}.bootOrder", f"boot order {order} is also used by {self.boot_orders[order]}"
            )
        self.boot_orders[order] = where
        return str(order)

    # -- errors -----------------------------------------------------------
    def error(self, field_path: str, message: str) -> SpecError:
        """``render_draft`` adds the VM; its caller the VM's file and line
        (``render.placement.render_problem``)."""
        return SpecError(field_path, message)

    def warn(self, field_path: str, message: str) -> None:
        self.warnings.append((field_path, message))

    # -- typed readers ----------------------------------------------------
    def mapping(self, node: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any] | None:
        v = node.get(key)
        if v is None:
            return None
        if not isinstance(v, dict):
            raise self.error(f"{where}.{key}", "expected a mapping")
        return v

    def items(self, node: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
        v = node.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self.error(f"{where}.{key}", "expected a list of mappings")
        for x in v:  # a loop, not all() over a generator: called some 20 times per VM
            if not isinstance(x, dict):
                raise self.error(f"{where}.{key}", "expected a list of mappings")
        return v

    def string(self, node: Mapping[str, Any], key: str, where: str, choices: Collection[str] = ()) -> str:
        v = node.get(key)
        if v is None:
            return ""
        if not isinstance(v, str):
            raise self.error(f"{where}.{key}", f"expected a string, got {type(v).__name__}")
        if v and choices and v not in choices:
            raise self.error(f"{where}.{key}", f"unsupported value {v!r} (supported: {', '.join(choices)})")
        return v

    def boolean(self, node: Mapping[str, Any], key: str, where: str) -> bool | None:
        v = node.get(key)
        if v is None:
            return None
        if not isinstance(v, bool):
            raise self.error(f"{where}.{key}", "expected true or false")
        return v

    def integer(
        self, node: Mapping[str, Any], key: str, where: str, minimum: int = 0, maximum: int = limits.MAX_INT
    ) -> int | None:
        v = node.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise self.error(f"{where}.{key}", f"expected an integer >= {minimum}")
        if v > maximum:
            raise self.error(f"{where}.{key}", f"{v} is more than {maximum}, the most libvirt takes here")
        return v

    def pci_address(self, node: Mapping[str, Any], key: str, where: str) -> dict[str, str] | None:
        """``0000:81:01.0`` -> attributes of ``<address type="pci">``."""
        text = self.string(node, key, where)
        if not text:
            return None
        address = parse_pci(text)
        if address is None:
            raise self.error(f"{where}.{key}", f"{text!r} is not a PCI address ({PCI_FORM})")
        return {"type": "pci", **address.attributes()}

    def quantity(self, node: Mapping[str, Any], key: str, where: str) -> int | None:
        v = node.get(key)
        if v is None:
            return None
        try:
            return quantity_bytes(v)
        except ValueError as err:
            raise self.error(f"{where}.{key}", str(err)) from err

    def capacity(self, node: Mapping[str, Any], key: str, where: str) -> int | None:
        """A disk size in bytes: a quantity > 0 that a disk image can hold (``limits``)."""
        v = self.quantity(node, key, where)
        if v is not None and v < 0:
            raise self.error(f"{where}.{key}", "a size must be positive")
        problem = limits.disk_problem(v or 0)
        if problem:
            raise self.error(f"{where}.{key}", problem)
        return v

    def count(self, node: Mapping[str, Any], key: str, where: str) -> int | None:
        v = node.get(key)
        if v is None:
            return None
        try:
            return quantity_count(v)
        except ValueError as err:
            raise self.error(f"{where}.{key}", str(err)) from err

    def known(
        self, node: Mapping[str, Any], where: str, supported: Collection[str], no_effect: Collection[str] = ()
    ) -> None:
        """Reject keys that have no mapping (``SpecError``), so nothing is dropped silently.

        ``no_effect`` keys are accepted because they mean nothing on a libvirt host
        (scheduling hints, Kubernetes-only knobs); docs/mapping.md lists them.
        """
        for k in node:
            if k not in supported and k not in no_effect:
                raise self.error(f"{where}.{k}", "not supported on a libvirt host")

    # -- paths ------------------------------------------------------------
    def check_path(self, path: str, where: str) -> str:
        """Lexical check that a host path lies inside the allowed directories."""
        if not path:
            raise self.error(where, "a path is required")
        if not path_inside(path, self.host.allowed_dirs):
            raise self.error(
                where,
                f"path {path!r} is outside the allowed directories ({', '.join(self.host.allowed_dirs)})",
            )
        # ``path_inside`` takes a path only when it is its own normal form, but for trailing
        # slashes: ``posixpath.normpath`` of it, without running it again.
        return path.rstrip("/") or path

    def artefact_path(self, filename: str, owner: str = f"{SPEC}.volumes") -> str:
        """Where generated per-VM files live: ``<volumeDirectory>/<domain>/<file>`` (the
        domain's name is a DNS name no longer than a file name: ``model.keys``); two
        volumes (``owner``: the field of each) never share one file (an emptyDisk
        ``root.overlay`` and a containerDisk ``root`` would both be ``root.overlay.qcow2``)."""
        where = f"{SPEC}.volumes"
        if "/" in filename or filename in ("", ".", "..") or "\x00" in filename:
            raise self.error(where, f"{filename!r} cannot be used in a file name")
        if len(filename.encode()) > limits.MAX_FILE_NAME:
            raise self.error(where, f"{filename[:40]!r}... is too long for a file name on the host")
        other = self.artefacts.setdefault(filename, owner)
        if other != owner:
            raise self.error(
                owner,
                f"its generated file {filename!r} is also the file of {other}: rename one of the volumes",
            )
        return self.check_path(posixpath.join(self.artefact_dir, filename), "volumes")

    def add_volume(self, vol: VolumeSpec) -> None:
        if vol not in self.volumes:
            self.volumes.append(vol)
