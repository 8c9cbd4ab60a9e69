"""Storage pools: the volumes ``host.provision`` creates for PVC and DataVolume disks.

Input: pool and volume names, sizes, formats, local image files. Output: volumes in a
libvirt storage pool (uploads work over remote connections too). I/O.
"""

from __future__ import annotations

from typing import Any

from reconciler.errors import HypervisorError
from reconciler.host.connection import Connection


class Storage(Connection):
    """The storage pool part of a host connection."""

    def _pool(self, pool: str) -> Any:
        with self._call("storage pool lookup", f"pool/{pool}"):
            p = self._conn.storagePoolLookupByName(pool)
            if not p.isActive():
                raise HypervisorError(f"storage pool {pool} is not active", 0, f"pool/{pool}")
            p.refresh(0)
            return p

    def pool_volume_exists(self, pool: str, name: str) -> bool:
        p = self._pool(pool)
        with self._call("volume list", f"pool/{pool}"):
            return name in p.listVolumes()

    def pool_volume_format(self, pool: str, name: str) -> str:
        """The volume's format as the pool reports it ("qcow2", "raw", ...; "" if none)."""
        import xml.etree.ElementTree as ET

        p = self._pool(pool)
        with self._call("volume lookup", f"pool/{pool}"):
            xml = p.storageVolLookupByName(name).XMLDesc(0)
        fmt = ET.fromstring(xml).find("target/format")
        return (fmt.get("type") or "") if fmt is not None else ""

    def create_pool_volume(self, pool: str, name: str, capacity: int, fmt: str) -> str:
        """Create a sparse volume; returns its path."""
        from xml.sax.saxutils import escape

        xml = (
            f"<volume><name>{escape(name)}</name><capacity unit='bytes'>{int(capacity)}</capacity>"
            f"<allocation unit='bytes'>0</allocation><target><format type='{escape(fmt)}'/></target></volume>"
        )
        p = self._pool(pool)
        with self._call("volume create", f"pool/{pool}"):
            vol = p.createXML(xml, 0)
            return str(vol.path())

    def clone_pool_volume(self, pool: str, name: str, capacity: int, fmt: str, source: str) -> None:
        """Create ``name`` as a copy of the volume ``source`` of the same pool, at ``capacity``
        (libvirt copies it: works over remote connections too)."""
        from xml.sax.saxutils import escape

        xml = (
            f"<volume><name>{escape(name)}</name><capacity unit='bytes'>{int(capacity)}</capacity>"
            f"<target><format type='{escape(fmt)}'/></target></volume>"
        )
        p = self._pool(pool)
        with self._call("volume clone", f"pool/{pool}"):
            vol = p.createXMLFrom(xml, p.storageVolLookupByName(source), 0)
            if vol.info()[1] < capacity:  # the copy keeps the source's size: grown to the request
                vol.resize(int(capacity), 0)

    def upload_pool_volume(self, pool: str, name: str, source: str) -> None:
        """Write the bytes of a local file into a volume (works over remote connections too)."""
        from pathlib import Path

        p = self._pool(pool)
        src = Path(source)
        size = src.stat().st_size
        with self._call("volume upload", f"pool/{pool}"), src.open("rb") as f:
            vol = p.storageVolLookupByName(name)
            stream = self._conn.newStream(0)
            vol.upload(stream, 0, size, 0)
            stream.sendAll(lambda _st, nbytes, fh: fh.read(nbytes), f)
            stream.finish()

    def delete_pool_volume(self, pool: str, name: str) -> None:
        """Delete a volume (a reprovision makes it again from its source)."""
        p = self._pool(pool)
        with self._call("volume delete", f"pool/{pool}"):
            p.storageVolLookupByName(name).delete(0)
