"""Remove ``rtest-*`` domains (and their NVRAM) left by an interrupted integration run
(``__main__`` also the test guest's ``rtbr-*`` bridges).

Usage: ``python -m tests.helpers.sweep [URI]`` (``make sweep``).
"""

from __future__ import annotations

import sys

import libvirt

from tests.helpers.guest import sweep_bridges

PREFIX = "rtest-"


def remove(dom: libvirt.virDomain) -> None:
    """Destroy and undefine one domain, its NVRAM and managed save included."""
    if dom.isActive():
        dom.destroy()
    try:
        dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM | libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE)
    except libvirt.libvirtError:
        dom.undefine()


def sweep(uri: str = "qemu:///system") -> list[str]:
    conn = libvirt.open(uri)
    removed = []
    try:
        for dom in conn.listAllDomains(0):
            if not dom.name().startswith(PREFIX):
                continue
            remove(dom)
            removed.append(dom.name())
    finally:
        conn.close()
    return removed


if __name__ == "__main__":
    for name in sweep(sys.argv[1] if len(sys.argv) > 1 else "qemu:///system"):
        print(f"removed {name}")
    for name in sweep_bridges():
        print(f"removed bridge {name}")
