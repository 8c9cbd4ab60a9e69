"""virt-install's domains, the import yardstick: OS variants and device mixes.

Input: a libvirt URI (a QEMU host, whose capabilities virt-install reads), a domain name
and a variant. Output: the domain XML ``virt-install --print-xml`` writes for it (Debian's
``virtinst``, installed by scripts/setup); ``VARIANTS`` lists the 24 mixes the bench
(``bench/import-virtinst``), the QEMU test (``tests/integration/test_import_virtinst.py``)
and the pinned outputs (``tests/data/virtinst/``, for the test driver) use. Runs
virt-install only; defines nothing.
"""

from __future__ import annotations

import subprocess

# virt-install's disk image for variant ``name``: 10 MiB, created by virt-install on the host.
DISK = "--disk=path=/var/lib/libvirt/images/{name}.qcow2,size=0.01,format=qcow2"
# (OS variant, extra virt-install arguments): 24 variants over OS families and devices.
VARIANTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("linux2022", ()),
    ("linux2022", ("--network=none", "--graphics=none", "--console=pty")),
    ("fedora37", ()),
    ("fedora37", ("--boot=uefi",)),
    ("debian11", ()),
    ("debian11", ("--cpu=host-model",)),
    ("ubuntu22.04", ()),
    ("ubuntu22.04", ("--tpm=emulator,model=tpm-crb,version=2.0",)),
    ("centos-stream9", ()),
    ("centos-stream9", ("--watchdog=i6300esb,action=reset",)),
    ("rhel9.0", ()),
    ("rhel9.0", ("--rng=/dev/urandom",)),
    ("opensuse15.4", ()),
    ("alpinelinux3.17", ()),
    ("archlinux", ()),
    ("freebsd13.1", ()),
    ("win10", ()),
    ("win11", ()),
    ("win2k19", ()),
    ("linux2022", ("--cpu=host-model", "--pm=suspend_to_mem.enabled=no", "--memballoon=none")),
    ("linux2022", ("--cpu=host-model", "--channel=none", "--network=user,rom.bar=off")),
    ("linux2022", ("--cpu=host-model,topology.sockets=1,topology.cores=2,topology.threads=1", "--vcpus=2")),
    ("linux2022", ("--cpu=host-passthrough", "--sound=ich9", "--disk=device=cdrom,bus=sata")),
    ("generic", ("--machine=pc",)),
)


def print_xml(uri: str, name: str, variant: str, extra: tuple[str, ...]) -> str:
    """``virt-install --print-xml`` for one variant: 256 MiB, TCG (``--virt-type qemu``),
    user-mode networking unless the variant names one (a test host need not have the
    network ``default``), a 10 MiB disk unless the variant has its own."""
    own_disk = any(a.startswith("--disk") for a in extra)
    cmd = [
        "virt-install",
        f"--connect={uri}",
        "--print-xml",
        f"--name={name}",
        "--memory=256",
        "--virt-type=qemu",
        f"--osinfo={variant}",
        "--noautoconsole",
        "--import",
        *(() if any(a.startswith("--network") for a in extra) else ("--network=user",)),
        *(() if own_disk else (DISK.format(name=name),)),
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout
