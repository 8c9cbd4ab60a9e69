"""A rendered domain's XML as a daemon keeps it: packed (``RenderedDomain.packed``).

Input: the XML the renderer wrote. Output: the same text, packed (``pack_xml``) and back
(``unpack_xml``). Pure. A daemon keeps every VM's rendered domain for good and reads its
text only where a changed domain is compared or defined, so its pipeline cache keeps
the text as raw deflate against a preset dictionary: a domain the renderer wrote, most
of any domain's text. A 2.6 KB domain of bench/make-fleet packs to ~250 bytes (a few
tens of microseconds, paid once per VM rendered) and unpacks in a few. Deterministic
(one level, window and dictionary): equal texts pack to equal bytes, so the packed form
is a key as good as the text (``compare.cache``). Never written anywhere: only this
process reads it back.
"""

from __future__ import annotations

import zlib

_LEVEL = 1  # fastest; the dictionary does most of the work
_WBITS = -13  # raw deflate (no header, no checksum), an 8 KiB window: the dictionary and a domain
_MEM_LEVEL = 5  # a small hash table: allocated and cleared per call, it is most of a call's cost

# What the renderer writes (render/*): a domain of each common device, in its order.
_DICTIONARY = b"""<domain type="kvm">
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


def pack_xml(xml: str) -> bytes:
    """``xml`` packed (``b""`` for ``""``: a draft's domain before its placement)."""
    if not xml:
        return b""
    packer = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, _DICTIONARY)
    return packer.compress(xml.encode()) + packer.flush()


def unpack_xml(packed: bytes) -> str:
    """The text ``pack_xml`` packed."""
    if not packed:
        return ""
    unpacker = zlib.decompressobj(_WBITS, _DICTIONARY)
    return (unpacker.decompress(packed) + unpacker.flush()).decode()
