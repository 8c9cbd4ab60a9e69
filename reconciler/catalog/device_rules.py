"""KubeVirt's admission rules for the devices: devices, networks and bindings, volumes
and disks.

Input: nothing. Output: the rows of ``catalog.admission.RULES`` for these areas, one
tuple per area, each row citing its KubeVirt source file at the pinned commit
(``catalog.admission.KUBEVIRT_COMMIT``) and the stage of ours that enforces it. Pure
data: never reads files, checks nothing itself.
"""

from __future__ import annotations

from reconciler.catalog.rules import ADM, NET, VMI, Ours, Rule, rendered_by

DEVICE_RULES: tuple[Rule, ...] = (
    # devices
    Rule(
        "machine-type",
        "devices",
        VMI,
        "machine type outside the cluster's emulatedMachines (q35*, pc-q35* by default)",
        Ours.WARN,
        "catalog/admission.py: any machine type the host's QEMU offers runs (host-facts check)",
    ),
    Rule(
        "input",
        "devices",
        VMI,
        "input bus other than virtio/usb, type other than tablet",
        Ours.SAME,
        rendered_by("input"),
    ),
    Rule("sound", "devices", VMI, "sound model other than ich9/ac97", Ours.SAME, rendered_by("sound")),
    Rule(
        "required-fields",
        "devices",
        "api (OpenAPI required)",
        "a field KubeVirt's types require (e.g. sound.name)",
        Ours.WARN,
        "catalog/schema.py: the field has no meaning on a libvirt host",
    ),
    Rule(
        "video",
        "devices",
        VMI,
        "video type unsupported on the architecture; video with autoattachGraphicsDevice false",
        Ours.SAME,
        rendered_by("video", ", catalog/admission.py"),
    ),
    Rule(
        "watchdog",
        "devices",
        VMI,
        "watchdog model not of the architecture (diag288 on amd64)",
        Ours.SAME,
        rendered_by("watchdog"),
    ),
    Rule(
        "panic-devices",
        "devices",
        VMI,
        "panic device model outside isa/hyperv/pvpanic",
        Ours.SAME,
        rendered_by("panic"),
    ),
    Rule(
        "hyperv-passthrough",
        "devices",
        VMI,
        "hyperv features together with hypervPassthrough",
        Ours.SAME,
        "render/features.py",
    ),
    Rule(
        "boot-order",
        "devices",
        VMI,
        "boot order 0, or one used by two devices",
        Ours.SAME,
        "render/context.py",
    ),
)

NETWORK_RULES: tuple[Rule, ...] = (
    # networks and bindings
    Rule(
        "one-binding",
        "networks",
        NET + "binding.go",
        "not exactly one binding method or plugin",
        Ours.SAME,
        rendered_by("interface"),
    ),
    Rule(
        "binding-plugin",
        "networks",
        NET + "binding.go",
        "(accepted) a network binding plugin",
        Ours.SAME,
        rendered_by("interface"),
    ),
    Rule(
        "masquerade-pod",
        "networks",
        NET + "binding.go",
        "masquerade on a network other than pod",
        Ours.SAME,
        "catalog/admission.py",
    ),
    Rule(
        "masquerade-mac",
        "networks",
        NET + "binding.go",
        "masquerade with the MAC reserved for the in-pod bridge",
        Ours.SAME,
        "catalog/admission.py",
    ),
    Rule(
        "passt-binding-pod",
        "networks",
        NET + "passt.go",
        "passtBinding on a network other than pod",
        Ours.SAME,
        rendered_by("interface"),
    ),
    Rule(
        "discontinued-bindings",
        "networks",
        NET + "discontinued.go",
        "the core slirp, passt and macvtap bindings (discontinued in v1.3)",
        Ours.WARN,
        rendered_by("interface", ": rendered as their current form, whose name the warning gives"),
    ),
    Rule(
        "iface-network-pairs",
        "networks",
        NET + "netiface.go",
        "a network without interface, an interface without network, a name used twice",
        Ours.SAME,
        rendered_by("interface", ", catalog/admission.py"),
    ),
    Rule(
        "iface-name",
        "networks",
        NET + "netiface.go",
        "interface name outside [A-Za-z0-9-_]",
        Ours.SAME,
        "catalog/admission.py",
    ),
    Rule(
        "iface-model",
        "networks",
        NET + "netiface.go",
        "unsupported interface model",
        Ours.SAME,
        rendered_by("interface"),
    ),
    Rule(
        "iface-mac",
        "networks",
        NET + "netiface.go",
        "malformed MAC address",
        Ours.SAME,
        rendered_by("interface"),
    ),
    Rule(
        "iface-pci", "networks", NET + "netiface.go", "malformed PCI address", Ours.SAME, "render/context.py"
    ),
    Rule(
        "iface-ports",
        "networks",
        NET + "netiface.go",
        "forward port 0 or out of range, unknown protocol, duplicate name",
        Ours.SAME,
        "catalog/admission.py (ports have no effect here, bad ones are still refused)",
    ),
    Rule(
        "iface-dhcp",
        "networks",
        NET + "netiface.go",
        "DHCP private option outside 224-254; NTP server not IPv4",
        Ours.SAME,
        "catalog/admission.py",
    ),
    Rule(
        "network-source",
        "networks",
        NET + "netsource.go",
        "more than one pod network; none or two network types; multus without networkName",
        Ours.SAME,
        rendered_by("interface", ", catalog/admission.py"),
    ),
    Rule(
        "iface-state",
        "networks",
        NET + "admit.go",
        "unknown state; absent on a non-bridge binding or the default network; SR-IOV link state",
        Ours.SAME,
        rendered_by("interface", ", catalog/admission.py"),
    ),
    Rule(
        "dns",
        "networks",
        VMI,
        "unknown dnsPolicy; None without one to three valid nameservers",
        Ours.SAME,
        "catalog/admission.py",
    ),
    Rule("hostname", "networks", VMI, "hostname not a DNS label", Ours.SAME, "catalog/admission.py"),
    Rule("subdomain", "networks", VMI, "subdomain not a DNS subdomain", Ours.SAME, "catalog/admission.py"),
    Rule(
        "probes",
        "networks",
        VMI,
        "probe without exactly one action; network probe without the pod network",
        Ours.SAME,
        "catalog/admission.py",
    ),
)

VOLUME_RULES: tuple[Rule, ...] = (
    # volumes and disks
    Rule(
        "disk-volume",
        "volumes",
        VMI,
        "a disk without its volume, or two disks on one volume",
        Ours.SAME,
        rendered_by("disk"),
    ),
    Rule(
        "volume-source",
        "volumes",
        ADM + "vms-admitter.go",
        "a volume with no or several sources, duplicate names, missing names of its object",
        Ours.SAME,
        "render/volumes.py",
    ),
    Rule(
        "lun-source",
        "volumes",
        VMI,
        "a lun on a volume other than PVC or DataVolume",
        Ours.SAME,
        rendered_by("disk"),
    ),
    Rule(
        "cloud-init",
        "volumes",
        ADM + "vms-admitter.go",
        "cloud-init without data, invalid base64, two sources of one data",
        Ours.SAME,
        "render/cloudinit.py",
    ),
    Rule(
        "host-disk",
        "volumes",
        ADM + "vms-admitter.go",
        "hostDisk without path, with an unknown type, capacity with type Disk",
        Ours.SAME,
        "render/volumes.py, catalog/admission.py",
    ),
    Rule(
        "host-disk-gate",
        "volumes",
        VMI,
        "hostDisk without the HostDisk feature gate",
        Ours.NA,
        "feature gates are cluster configuration; hostDisk is how a libvirt host names its files",
    ),
    Rule(
        "container-disk-path",
        "volumes",
        VMI,
        "containerDisk path not absolute or root",
        Ours.UNSUPPORTED,
        "render/volumes.py: a path inside an image is not supported; the host maps the disk file itself",
    ),
    Rule(
        "access-credentials",
        "volumes",
        VMI,
        "no source or propagation method; noCloud/configDrive without its volume",
        Ours.SAME,
        "render/cloudinit.py",
    ),
    Rule(
        "access-credentials-agent",
        "volumes",
        VMI,
        "(accepted) qemuGuestAgent propagation",
        Ours.UNSUPPORTED,
        "render/cloudinit.py: the guest agent propagation is not driven on a libvirt host",
    ),
)
