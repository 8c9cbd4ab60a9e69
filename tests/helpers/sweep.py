"""Remove ``rtest-*`` domains (and their NVRAM) left by an interrupted integration run
(``__main__`` also the test guest's ``rtbr-*`` bridges).

Usage: ``python -m tests.helpers.sweep [URI]`` (``make sweep``).
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import libvirt

from tests.helpers.guest import sweep_bridges

if TYPE_CHECKING:
    from collections.abc import Sequence

PREFIX = "rtest-"


def remove(dom: libvirt.virDomain) -> None:
    """Destroy and undefine one domain, its NVRAM, managed save and snapshot metadata included."""
    if dom.isActive():
        dom.destroy()
    try:
        dom.undefineFlags(
            libvirt.VIR_DOMAIN_UNDEFINE_NVRAM
            | libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
            | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA
        )
    except libvirt.libvirtError:
        dom.undefine()


def remove_all(doms: Sequence[libvirt.virDomain]) -> None:
    """``remove`` of each, side by side (a destroy waits for its QEMU to exit, seconds on a
    busy machine; libvirtd ends them in parallel). The first error is raised."""
    if len(doms) <= 1:
        for dom in doms:
            remove(dom)
        return
    with ThreadPoolExecutor(max_workers=min(8, len(doms))) as pool:
        for done in [pool.submit(remove, dom) for dom in doms]:
            done.result()


def remove_prefixed(uri: str, prefix: str) -> list[str]:
    """Remove the domains of ``uri`` whose names start with ``prefix``; their names."""
    conn = libvirt.open(uri)
    try:
        doms = [dom for dom in conn.listAllDomains(0) if dom.name().startswith(prefix)]
        remove_all(doms)
    finally:
        conn.close()
    return [dom.name() for dom in doms]


def sweep(uri: str = "qemu:///system") -> list[str]:
    return remove_prefixed(uri, PREFIX)


if __name__ == "__main__":
    for name in sweep(sys.argv[1] if len(sys.argv) > 1 else "qemu:///system"):
        print(f"removed {name}")
    for name in sweep_bridges():
        print(f"removed bridge {name}")
