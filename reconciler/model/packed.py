"""A rendered domain as a daemon keeps it: packed (``RenderedDomain.packed``).

Input: a rendered domain (or the XML the renderer wrote). Output: the same record packed
(``pack_domain``), its packed fields read back (``cold_field``), and the XML text packed
and back (``pack_xml``, ``unpack_xml``). Pure. A daemon keeps every VM's rendered domain
for good, and a plan of an unchanged domain reads only a few of its fields (its key, its
digests, its run strategy, MACs, UUID, config digests, ...: what a warm cycle reads, see
``HOT`` below). The rest (its XML, its volumes, derived MACs, ...: what only a changed
domain's comparison, definition or creation reads) is packed into one blob: the XML,
then the other fields pickled, as raw deflate against a preset dictionary (a domain the
renderer wrote, most of any domain's text, after the pickled volumes of a common one). A
domain of bench/make-fleet packs to ~260 bytes (~80 microseconds, paid once per VM
rendered) from ~2.6 KB of text and ~0.85 KB of volume records; a field read back costs
~20 microseconds, the XML ~6. Deterministic (one level, window and dictionary, one
pickle protocol): equal records pack to equal bytes, so the blob is a key as good as the
text (``compare.cache``). Never written anywhere: only this process reads it back; the
Secrets its volumes hold (``SecretData``, which is never pickled) stay in the record,
held by reference.
"""

from __future__ import annotations

import io
import pickle
import sys
import zlib
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from reconciler.model.secretdata import NO_SECRETS, SecretData

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

# The records are ``model.RenderedDomain`` and ``model.VolumeSpec``; typed ``Any`` here so
# that ``model`` (which packs through this module) is not imported back.
RenderedDomain = Any
VolumeSpec = Any

# zlib's default level and hash table: a quarter smaller than its fastest (level 1, a
# small table) for a third more time (~35 microseconds a domain, paid once per VM rendered)
_LEVEL = 6
_WBITS = -13  # raw deflate (no header, no checksum), an 8 KiB window: the dictionary and a domain
_MEM_LEVEL = 8

# What the renderer writes (render/*): a domain of each common device, in its order.
_XML_DICTIONARY = b"""<domain type="kvm">
  <name></name>
  <uuid></uuid>
  <title></title>
  <description></description>
  <memory unit="b"></memory>
  <currentMemory unit="b"></currentMemory>
  <vcpu placement="static"></vcpu>
  <iothreads>1</iothreads>
  <os firmware="efi">
    <type arch="x86_64" machine="q35">hvm</type>
    <boot dev="hd" />
  </os>
  <features>
    <acpi />
    <apic />
    <smm state="on" />
  </features>
  <cpu mode="host-passthrough" check="none" migratable="on">
    <topology sockets="1" dies="1" cores="1" threads="1" />
  </cpu>
  <clock offset="utc">
    <timer name="rtc" tickpolicy="catchup" />
  </clock>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type="block" device="disk">
      <driver name="qemu" type="raw" cache="none" io="native" discard="unmap" />
      <source dev="/dev/" />
      <target dev="sda" bus="sata" />
      <readonly />
      <serial></serial>
    </disk>
    <disk type="file" device="cdrom">
      <driver name="qemu" type="raw" />
      <source file="/var/lib/reconciler/volumes//cloudinit.iso" />
      <target dev="sdb" bus="sata" />
      <readonly />
    </disk>
    <disk type="file" device="disk">
      <driver name="qemu" type="qcow2" />
      <source file="/var/lib/reconciler/images/-root.qcow2" />
      <target dev="vda" bus="virtio" />
      <boot order="1" />
    </disk>
    <disk type="file" device="disk">
      <driver name="qemu" type="qcow2" />
      <source file="/var/lib/reconciler/images/-data.qcow2" />
      <target dev="vdb" bus="virtio" />
    </disk>
    <disk type="file" device="disk">
      <driver name="qemu" type="raw" />
      <source file="/var/lib/reconciler/volumes//cloudinit.iso" />
      <target dev="vdc" bus="virtio" />
    </disk>
    <controller type="pci" index="0" model="pcie-root" />
    <controller type="pci" index="1" model="pcie-root-port" />
    <controller type="pci" index="2" model="pcie-root-port" />
    <controller type="pci" index="3" model="pcie-root-port" />
    <controller type="pci" index="4" model="pcie-root-port" />
    <controller type="pci" index="5" model="pcie-root-port" />
    <controller type="pci" index="6" model="pcie-root-port" />
    <controller type="pci" index="7" model="pcie-root-port" />
    <controller type="pci" index="8" model="pcie-root-port" />
    <controller type="pci" index="9" model="pcie-root-port" />
    <controller type="pci" index="10" model="pcie-root-port" />
    <interface type="bridge">
      <mac address="02:" />
      <source bridge="br0" />
      <model type="virtio" />
    </interface>
    <interface type="network">
      <mac address="02:" />
      <source network="default" />
      <model type="virtio" />
      <rom enabled="no" />
    </interface>
    <serial type="pty">
      <target port="0" />
    </serial>
    <console type="pty">
      <target type="serial" port="0" />
    </console>
    <channel type="unix">
      <target type="virtio" name="org.qemu.guest_agent.0" />
    </channel>
    <input type="tablet" bus="usb" />
    <graphics type="vnc" port="-1" autoport="yes">
      <listen type="address" address="127.0.0.1" />
    </graphics>
    <video>
      <model type="vga" />
    </video>
    <memballoon model="virtio" />
    <rng model="virtio">
      <backend model="random">/dev/urandom</backend>
    </rng>
  </devices>
</domain>
"""
# The other fields as ``pack_domain`` pickles them (the volumes of a common domain), before
# the XML (nearest to the text that comes first).
_DICTIONARY = (
    pickle.dumps(
        (
            tuple(
                (
                    kind,
                    f"/var/lib/reconciler/{where}",
                    size,
                    fmt,
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    content,
                    ephemeral,
                    False,
                    None,
                )
                for kind, where, size, fmt, content, ephemeral in (
                    ("file", "images/-root.qcow2", 10737418240, "qcow2", b"", False),
                    ("file", "images/-data.qcow2", 1073741824, "qcow2", b"", False),
                    ("overlay", "images/-root.qcow2", 0, "qcow2", b"", True),
                    (
                        "cloudinit-iso",
                        "volumes//cloudinit.iso",
                        0,
                        "raw",
                        b'{"files":{"meta-data":"instance-id: .default\\nlocal-hostname: \\n",'
                        b'"user-data":"#cloud-config\\nhostname: \\n"},"label":"cidata"}',
                        True,
                    ),
                )
            ),
            None,
            (),
            False,
            False,
            (),
            (),
            (("02:", "default"),),
        ),
        5,
    )
    + _XML_DICTIONARY
)


# The fields of a packed record kept as they are: what a plan, its placement checks, the
# pacing, the status rows and the prober read of every domain on every cycle. Every
# other field of ``RenderedDomain`` goes into the blob (``xml_data``) and is read back
# from it (``cold_field``) where it is read at all: on a changed domain.
HOT = frozenset(
    {
        "key",
        "uuid",
        "spec_hash",
        "run_strategy",
        "source_path",
        "adopt",
        "prune",
        "grace_period_s",
        "hostname",
        "revisions",
        "presets",
        "macs",
        "host_devices",
        "probes",
        "cpu_need",
        "mdev_needs",
        "config",
        "pace",
        "name",
        # (the expanded VM's, the same tuple as the pipeline cache keeps for the plan)
        "warnings",
    }
)
# The others but the XML (``RenderedDomain``'s fields are these, ``HOT`` and ``xml_data``),
# in the order they are pickled: read only where a domain changed.
COLD = (
    "volumes",
    "rollout",
    "restart_windows",
    "restart_now",
    "start_paused",
    "passthrough",
    "passthrough_omitted",
    "derived_macs",
)
# Kinds of disks made once with a size (the ownership mark records the size each was
# made with: ``ownership.SIZED_KINDS``, the same).
SIZED_KINDS = ("file", "pool-volume")
_PROTOCOL = 5
_NO_SECRETS_ID = -1


def pack_domain(d: RenderedDomain, same: dict[object, object]) -> RenderedDomain:
    """``d`` packed: its ``HOT`` fields kept, the others in one blob (``xml_data``), with
    what a plan reads of its volumes on every cycle (``RenderedDomain.ephemeral_paths``,
    ``images``, ``sizes_made``) and the Secrets its volumes hold (by reference). Its
    captured revisions (most VMs of a fleet share theirs) are the tuple ``same`` holds
    if it holds an equal one (else stored there)."""
    held: list[object] = []
    out = io.BytesIO()
    out.write(d.xml.encode())
    out.write(b"\0")
    values = [getattr(d, name) for name in COLD]
    # the volumes as their fields' values: no class named per volume
    values[0] = tuple(tuple(getattr(v, f.name) for f in fields(v)) for v in values[0])
    _Pickler(out, held).dump(tuple(values))
    packed = object.__new__(type(d))
    for name in HOT:
        object.__setattr__(packed, name, getattr(d, name))
    object.__setattr__(packed, "revisions", same.setdefault(d.revisions, d.revisions))
    object.__setattr__(packed, "xml_data", _deflate(out.getvalue()))
    volumes: tuple[VolumeSpec, ...] = d.volumes
    # the one path the mark read back also holds: one copy (the others rest in the blob only)
    object.__setattr__(packed, "_ephemeral", tuple(sys.intern(v.path) for v in volumes if v.ephemeral))
    object.__setattr__(packed, "_images", tuple((v.image, v.digest) for v in volumes if v.image))
    object.__setattr__(packed, "_sizes", hash(made_sizes(volumes)))
    object.__setattr__(packed, "_held", tuple(held))
    return packed


def cold_field(d: RenderedDomain, name: str, volume: Callable[..., VolumeSpec]) -> Any:
    """Field ``name`` of the packed record ``d``, read back from its blob (its volumes
    made ``volume`` records again); an ``AttributeError`` for any other name: the record
    has no such field."""
    data = d.xml_data
    if name not in COLD or d._held is None or not isinstance(data, bytes):
        raise AttributeError(name)
    pickled = _inflate(data).partition(b"\0")[2]
    at = COLD.index(name)
    value = _Unpickler(io.BytesIO(pickled), d._held).load()[at]
    return tuple(volume(*v) for v in value) if at == 0 else value


def made_sizes(volumes: Iterable[VolumeSpec]) -> tuple[tuple[str, int], ...]:
    """(path, bytes) of each disk made once with a size: what the ownership mark of a
    definition of these volumes records when no disk was made before
    (``ownership.created_sizes``)."""
    return tuple(
        (v.path, v.capacity)
        for v in volumes
        if v.kind in SIZED_KINDS and v.capacity > 0 and not v.ephemeral and not v.must_exist
    )


class _Pickler(pickle.Pickler):
    """Pickles a record's fields, the Secrets among them by reference (into ``held``)."""

    def __init__(self, out: io.BytesIO, held: list[object]) -> None:
        super().__init__(out, _PROTOCOL)
        self.held = held

    def persistent_id(self, obj: object) -> int | None:
        if not isinstance(obj, SecretData):
            return None
        if obj is NO_SECRETS:
            return _NO_SECRETS_ID
        self.held.append(obj)
        return len(self.held) - 1


class _Unpickler(pickle.Unpickler):
    """Reads what ``_Pickler`` wrote, the Secrets from ``held``."""

    def __init__(self, data: io.BytesIO, held: tuple[object, ...]) -> None:
        super().__init__(data)
        self.held = held

    def persistent_load(self, pid: Any) -> object:
        return NO_SECRETS if pid == _NO_SECRETS_ID else self.held[pid]


def _deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, _DICTIONARY)
    return packer.compress(data) + packer.flush()


def _inflate(packed: bytes) -> bytes:
    unpacker = zlib.decompressobj(_WBITS, _DICTIONARY)
    return unpacker.decompress(packed) + unpacker.flush()


def pack_xml(xml: str) -> bytes:
    """``xml`` packed (``b""`` for ``""``: a draft's domain before its placement)."""
    return _deflate(xml.encode()) if xml else b""


def unpack_xml(packed: bytes) -> str:
    """The text ``pack_xml`` packed (the XML of a record ``pack_domain`` packed)."""
    if not packed:
        return ""
    return _inflate(packed).partition(b"\0")[0].decode()
