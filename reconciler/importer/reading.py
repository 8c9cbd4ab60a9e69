"""The values of one live domain read back, and the state of one read.

Input: nothing but what the readers of ``importer.domain``, ``importer.machine`` and
``importer.devices`` record. Output: ``Reading`` (the VM a domain would be, what it asks
of the host, the reasons it cannot be imported), ``HostAsk``, and ``DomainRead`` and
``Found``, the mutable state one read fills in; small helpers shared by the readers. Pure: no libvirt,
no files; never guesses a value the XML does not hold.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any

from reconciler.records import dataclass

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Mapping


@dataclass(frozen=True, slots=True)
class HostAsk:
    """What one domain needs the host configuration to say.

    ``settings``: host-wide values (``domainType``, ``emulator``, ``graphicsListen``,
    ``nvramDirectory``, ``storagePool``, ``storagePoolFormat``, the four ``firmware``
    paths): one value per host, so domains that disagree cannot all be imported.
    The rest are entries the host config lists, merged over all domains.
    """

    settings: tuple[tuple[str, str], ...] = ()
    directories: tuple[str, ...] = ()  # allowedDirectories (the directories of disk files)
    networks: tuple[tuple[str, str, str], ...] = ()  # (multus name, kind, target)
    pod: tuple[str, str] | None = None  # (kind, target) of the pod network
    host_devices: tuple[tuple[str, str, str], ...] = ()  # (deviceName, kind, address)
    dedicated_cpus: tuple[int, ...] = ()
    images: tuple[tuple[str, str], ...] = ()  # (image name, directory): kernelBoot


@dataclass(frozen=True, slots=True)
class Reading:
    """One domain read back: the VM it would be, what it asks of the host, why not."""

    domain: str
    name: str  # the VM's name ("" when the domain name maps to none)
    namespace: str
    vm: dict[str, Any]
    ask: HostAsk
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # adjustments made (a name mapped, ...)
    # The pass-through (a <domain> fragment, render.passthrough) keeping what the YAML
    # cannot express, when the import was asked to keep it; None: none.
    fragment: ET.Element | None = None
    prefixes: Mapping[str, str] = field(default_factory=dict)  # namespace URI -> prefix

    @property
    def ok(self) -> bool:
        return not self.reasons


@dataclass(slots=True)
class Found:
    """What the readers of the device kinds fill in (``importer.devices.READERS``): the
    ``devices`` of ``spec.template.spec.domain`` and the template's volumes and networks
    (of a VM in ``namespace``)."""

    namespace: str
    devices: dict[str, Any] = field(default_factory=dict)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    networks: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class DomainRead:
    """Mutable state while one domain is read (the readers add to it)."""

    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)
    directories: list[str] = field(default_factory=list)
    networks: list[tuple[str, str, str]] = field(default_factory=list)
    pod: tuple[str, str] | None = None
    host_devices: list[tuple[str, str, str]] = field(default_factory=list)
    dedicated: list[int] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)
    keep: bool = False  # keep what the YAML cannot express in a pass-through
    kept: list[tuple[tuple[str, ...], ET.Element]] = field(default_factory=list)  # (container, element)

    def refuse(self, where: str, why: str) -> None:
        self.reasons.append(f"{where}: {why}")

    def keep_or_refuse(self, where: str, why: str, container: tuple[str, ...], *els: ET.Element) -> None:
        """Keep ``els`` (whole, under the fragment's ``container``) when asked to, else refuse."""
        if not self.keep:
            self.refuse(where, why)
            return
        self.kept.extend((container, el) for el in els)

    def setting(self, key: str, value: str) -> None:
        self.settings[key] = value


def quantity_kib(kib: int) -> str:
    """KiB as the shortest exact binary quantity: 1048576 -> ``1Gi``."""
    for suffix, power in (("Ti", 3), ("Gi", 2), ("Mi", 1)):
        if kib % (1024**power) == 0:
            return f"{kib // 1024**power}{suffix}"
    return f"{kib}Ki"


def int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def turned_on(el: ET.Element | None) -> bool | None:
    """``state="on"|"off"`` (absent: on) of a feature element; None when there is none."""
    if el is None:
        return None
    return el.get("state", "on") != "off"
