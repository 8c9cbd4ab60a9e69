"""Shared state of one render: the VM's spec, the host, and collected results.

Input: an ``ExpandedVM``, a ``HostConfig`` and ``HostCaps``. Output: helpers the
area modules use to read fields (with their KubeVirt path for errors), reject
what cannot be rendered (``RenderError``, never a silent drop), and collect the
volumes apply must provision. Pure; never touches the host.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.config.host import HostConfig, path_inside
from reconciler.errors import RenderError
from reconciler.manifests import limits
from reconciler.model import ConfigDigest, CpuNeed, ExpandedVM, Problem, Severity, VMKey, VolumeSpec
from reconciler.model.identifiers import PCI_FORM, parse_pci
from reconciler.model.units import quantity_bytes, quantity_count

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from reconciler.render.caps import HostCaps

SPEC = "spec.template.spec"
DOMAIN = f"{SPEC}.domain"
DEVICES = f"{DOMAIN}.devices"


@dataclass(slots=True)
class RenderContext:
    vm: ExpandedVM
    host: HostConfig
    caps: HostCaps
    warnings: list[Problem] = field(default_factory=list)
    volumes: list[VolumeSpec] = field(default_factory=list)
    vcpus: int = 1  # set by the cpu module, read by disk/interface queues
    max_vcpus: int = 1  # the vCPU maximum (with maxSockets), set by the cpu module
    cpu_need: CpuNeed | None = None  # dedicatedCpuPlacement, set by the cpu module
    uuid: str = ""  # set first by render_domain
    macs: list[tuple[str, str]] = field(default_factory=list)  # (MAC, field path), set by interfaces
    host_devices: list[tuple[str, str]] = field(default_factory=list)  # ("pci 0000:65:00.0", field path)
    mdev_needs: list[tuple[str, str]] = field(default_factory=list)  # (deviceName, field path) per mdev
    config: list[ConfigDigest] = field(default_factory=list)  # generated ISOs, set by disks
    artefacts: dict[str, str] = field(default_factory=dict)  # generated file name -> field path
    key: VMKey = field(init=False)  # the VM's
    spec: Mapping[str, Any] = field(init=False)  # spec.template.spec
    domain: Mapping[str, Any] = field(init=False)  # spec.template.spec.domain
    devices: Mapping[str, Any] = field(init=False)  # spec.template.spec.domain.devices

    def __post_init__(self) -> None:
        self.key = self.vm.key
        tmpl = (self.vm.vm.get("spec") or {}).get("template") or {}
        spec = tmpl.get("spec") if isinstance(tmpl, dict) else None
        self.spec = spec if isinstance(spec, dict) else {}
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

    # -- identity ---------------------------------------------------------
    @property
    def name(self) -> str:
        return self.key.domain

    @property
    def subject(self) -> str:
        return self.key.subject

    # -- errors -----------------------------------------------------------
    def error(self, field_path: str, message: str) -> RenderError:
        """The caller adds the VM's file and line (``render.placement.render_problem``)."""
        return RenderError(self.key, message, field_path)

    def warn(self, field_path: str, message: str) -> None:
        self.warnings.append(Problem(message, vm=self.key, field=field_path, severity=Severity.WARNING))

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
        if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
            raise self.error(f"{where}.{key}", "expected a list of mappings")
        return v

    def string(self, node: Mapping[str, Any], key: str, where: str, choices: Iterable[str] = ()) -> str:
        v = node.get(key)
        if v is None:
            return ""
        if not isinstance(v, str):
            raise self.error(f"{where}.{key}", f"expected a string, got {type(v).__name__}")
        ch = tuple(choices)
        if ch and v and v not in ch:
            raise self.error(f"{where}.{key}", f"unsupported value {v!r} (supported: {', '.join(ch)})")
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
        self, node: Mapping[str, Any], where: str, supported: Iterable[str], no_effect: Iterable[str] = ()
    ) -> None:
        """Reject keys that have no mapping (RenderError), so nothing is dropped silently.

        ``no_effect`` keys are accepted because they mean nothing on a libvirt host
        (scheduling hints, Kubernetes-only knobs); docs/mapping.md lists them.
        """
        ok = set(supported) | set(no_effect)
        for k in node:
            if k not in ok:
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
        return posixpath.normpath(path)

    def artefact_path(self, filename: str, owner: str = f"{SPEC}.volumes") -> str:
        """Where generated per-VM files live: ``<volumeDirectory>/<domain>/<file>``; two
        volumes (``owner``: the field of each) never share one file (an emptyDisk
        ``root.overlay`` and a containerDisk ``root`` would both be ``root.overlay.qcow2``)."""
        for where, part in (("metadata.name", self.name), (f"{SPEC}.volumes", filename)):
            if "/" in part or part in ("", ".", "..") or "\x00" in part:
                raise self.error(where, f"{part!r} cannot be used in a file name")
            if len(part.encode()) > limits.MAX_FILE_NAME:
                raise self.error(where, f"{part[:40]!r}... is too long for a file name on the host")
        other = self.artefacts.setdefault(filename, owner)
        if other != owner:
            raise self.error(
                owner,
                f"its generated file {filename!r} is also the file of {other}: rename one of the volumes",
            )
        return self.check_path(posixpath.join(self.host.volume_dir, self.name, filename), "volumes")

    def add_volume(self, vol: VolumeSpec) -> None:
        if all(v != vol for v in self.volumes):
            self.volumes.append(vol)
