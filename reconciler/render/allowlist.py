"""The pass-through allowlist: what a fragment may hold, element by element.

Input: an element path of a pass-through fragment (``devices/graphics/listen``, tags
from ``<domain>``'s children down), the element and the host config. Output: the
``Rule`` at that path (its attributes with a value check each, its text, whether it
may be added or omit the rendered element), and the reasons an element cannot be kept
(``check_element``); the allowlist as the table of docs/passthrough.md
(``python -m reconciler.render.allowlist``). Pure data and checks: no host, no files.

Never allows what could let a commit reach the host: nothing listed names a host path,
host device, socket, emulator, password or network of the host; disks and interfaces
are only merged into (``render.passthrough`` merges, ``render.fragment`` parses).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import field
from types import MappingProxyType
from typing import TYPE_CHECKING

from reconciler.model.devices import ADD, DEVICE_KINDS, KINDS, MERGE
from reconciler.records import dataclass

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Mapping

    from reconciler.settings.host import HostConfig

NS = "http://reconciler.kubevirt.io/xmlns/passthrough/v1"
OMIT = f"{{{NS}}}omit"
# The ownership mark's namespace (ownership.inventory): never written by a fragment.
OWNER_NS = "http://reconciler.kubevirt.io/xmlns/domain/v1"

Check = Callable[[str, "HostConfig"], bool]

_WORD = re.compile(r"[A-Za-z0-9_.:+-]{1,64}")
_INT = re.compile(r"-?[0-9]{1,12}")


def _one_of(*values: str) -> Check:
    return lambda v, host: v in values


def _word(v: str, host: HostConfig) -> bool:
    return bool(_WORD.fullmatch(v))


def _int(v: str, host: HostConfig) -> bool:
    return bool(_INT.fullmatch(v))


_CPUSET = re.compile(r"[0-9,^-]{1,128}")


def _cpuset(v: str, host: HostConfig) -> bool:
    return bool(_CPUSET.fullmatch(v))


def _listen(v: str, host: HostConfig) -> bool:
    # A graphics console listens where the host config says, and nowhere else.
    return v == host.graphics_listen


def _any(v: str, host: HostConfig) -> bool:
    return True


_CHECKS: Mapping[str, Check] = MappingProxyType(
    {"int": _int, "word": _word, "cpuset": _cpuset, "listen": _listen, "any": _any}
)


@dataclass(frozen=True, slots=True)
class Rule:
    """What a fragment may hold at one element path: its attributes (name -> value
    check), its text (None: none), whether it may be added where the rendered domain
    has none (``add``) and whether it may omit the rendered one (``omit``)."""

    attrs: Mapping[str, Check] = field(default_factory=dict)
    text: Check | None = None
    add: bool = True
    omit: bool = False
    spec: str = ""  # the attributes as written in RULES (for the docs)
    add_if: Callable[[ET.Element], bool] | None = None  # ``add`` false: yet this one may be added


def _rule(
    spec: str = "",
    text: str = "",
    add: bool = True,
    omit: bool = False,
    add_if: Callable[[ET.Element], bool] | None = None,
) -> Rule:
    """``"state=on|off retries:int"``: an attribute with its values, or with a check."""
    attrs: dict[str, Check] = {}
    for item in spec.split():
        if "=" in item:
            name, values = item.split("=", 1)
            attrs[name] = _one_of(*values.split("|"))
        else:
            name, kind = item.split(":", 1)
            attrs[name] = _CHECKS[kind]
    check = None
    if text:
        check = _CHECKS[text] if text in _CHECKS else _one_of(*text.split("|"))
    return Rule(MappingProxyType(attrs), check, add, omit, spec + (f" text:{text}" if text else ""), add_if)


def _device(
    element: str, spec: str = "", omit: bool = False, add_if: Callable[[ET.Element], bool] | None = None
) -> Rule:
    """The rule of a device kind's element: whether a fragment may add one or only merge
    into a rendered one is its descriptor's (``model.devices``: ``passthrough``), which
    must let a fragment hold one at all."""
    kind = KINDS[element]
    if kind.passthrough not in (ADD, MERGE):
        raise ValueError(f"devices/{element}: its descriptor keeps it out of a pass-through")
    return _rule(spec, add=kind.passthrough == ADD, omit=omit, add_if=add_if)


def _empty_drive(el: ET.Element) -> bool:
    """A CD-ROM or floppy drive without media: it names nothing on the host."""
    return el.get("device") in ("cdrom", "floppy") and el.find("source") is None


ONOFF = "on|off"
YESNO = "yes|no"
_STATE = _rule(f"state={ONOFF}")
_HYPERV = "relaxed vapic vpindex runtime synic reset frequencies reenlightenment ipi evmcs avic emsr_bitmap xmm_input"
_LIFECYCLE = "destroy|restart|preserve|rename-restart"
_SOUND = "ich9|ich6|ich7|ac97|sb16|es1370|usb|pcspk"
_ADDRESS = _rule(
    "type:word domain:word bus:word slot:word function:word multifunction=on|off controller:int "
    "target:int unit:int port:word"
)

# The allowlist: element path (tags from <domain>'s children down) -> Rule. A path not
# listed is refused. Nothing listed names a host path, host device, socket, network of
# the host, emulator or password.
RULES: Mapping[str, Rule] = MappingProxyType(
    {
        # Descriptive: namespaced elements of other applications (libosinfo, ...).
        "metadata": _rule(),
        "features": _rule(add=True),
        "features/acpi": _rule(),
        "features/apic": _rule(f"eoi={ONOFF}"),
        "features/pae": _rule(),
        "features/hap": _STATE,
        "features/viridian": _rule(),
        "features/privnet": _rule(),
        "features/pvspinlock": _STATE,
        "features/pmu": _STATE,
        "features/vmport": _STATE,
        "features/vmcoreinfo": _STATE,
        "features/htm": _STATE,
        "features/nested-hv": _STATE,
        "features/ccf-assist": _STATE,
        "features/ps2": _STATE,
        "features/gic": _rule("version:word"),
        "features/ioapic": _rule("driver=kvm|qemu"),
        "features/msrs": _rule("unknown=ignore|fault"),
        "features/async-teardown": _rule(f"enabled={YESNO}"),
        "features/smm": _STATE,
        "features/smm/tseg": _rule("unit:word", text="int"),
        "features/kvm": _rule(),
        "features/kvm/hidden": _STATE,
        "features/kvm/hint-dedicated": _STATE,
        "features/kvm/poll-control": _STATE,
        "features/kvm/pv-ipi": _STATE,
        "features/kvm/dirty-ring": _rule(f"state={ONOFF} size:int"),
        "features/hyperv": _rule("mode=custom|passthrough"),
        **MappingProxyType({f"features/hyperv/{name}": _STATE for name in _HYPERV.split()}),
        "features/hyperv/spinlocks": _rule(f"state={ONOFF} retries:int"),
        "features/hyperv/vendor_id": _rule(f"state={ONOFF} value:word"),
        "features/hyperv/stimer": _STATE,
        "features/hyperv/stimer/direct": _STATE,
        "features/hyperv/tlbflush": _STATE,
        "features/hyperv/tlbflush/direct": _STATE,
        "features/hyperv/tlbflush/extended": _STATE,
        "features/tcg": _rule(),
        "features/tcg/tb-cache": _rule("unit:word", text="int"),
        "pm": _rule(),
        "pm/suspend-to-mem": _rule(f"enabled={YESNO}"),
        "pm/suspend-to-disk": _rule(f"enabled={YESNO}"),
        "clock": _rule(
            "offset=utc|localtime|timezone|variable timezone:word adjustment:word basis=utc|localtime"
        ),
        "clock/timer": _rule(
            f"name=platform|pit|rtc|hpet|tsc|kvmclock|hypervclock|armvtimer present={YESNO} "
            "tickpolicy=delay|catchup|merge|discard track=boot|guest|wall|realtime frequency:int "
            "mode=auto|native|emulate|paravirt|smpsafe"
        ),
        "clock/timer/catchup": _rule("threshold:int slew:int limit:int"),
        "cpu": _rule(add=False),
        "cpu/cache": _rule("level:int mode=emulate|passthrough|disable"),
        "cpu/maxphysaddr": _rule("mode=emulate|passthrough bits:int limit:int"),
        "cpu/feature": _rule("policy=force|require|optional|disable|forbid name:word"),
        # Guest NUMA cells: the guest's topology (KubeVirt writes cells only for NUMA passthrough).
        "cpu/numa": _rule(),
        "cpu/numa/cell": _rule(
            f"id:int cpus:cpuset memory:int unit:word memAccess=shared|private discard={YESNO}"
        ),
        "cpu/numa/cell/distances": _rule(),
        "cpu/numa/cell/distances/sibling": _rule("id:int value:int"),
        "os": _rule("firmware=efi|bios", add=False),
        "os/boot": _rule("dev=hd|cdrom|network|fd"),
        "os/bootmenu": _rule(f"enable={YESNO} timeout:int"),
        "os/bios": _rule(f"useserial={YESNO} rebootTimeout:int"),
        "os/smbios": _rule("mode=emulate|sysinfo"),
        "os/firmware": _rule(),
        "os/firmware/feature": _rule(f"enabled={YESNO} name=enrolled-keys|secure-boot"),
        "on_poweroff": _rule(text=_LIFECYCLE),
        "on_reboot": _rule(text=_LIFECYCLE),
        "on_crash": _rule(text=_LIFECYCLE),
        "on_lockfailure": _rule(text="poweroff|restart|pause|ignore"),
        "memtune": _rule(),
        **MappingProxyType(
            {
                f"memtune/{t}": _rule("unit:word", text="int")
                for t in ("hard_limit", "soft_limit", "swap_hard_limit")
            }
        ),
        "devices": _rule(add=False),
        # Disks and interfaces: merged into the rendered ones only (their sources are the spec's).
        "devices/disk": _device("disk", "type=file|block device=disk|cdrom|floppy|lun", add_if=_empty_drive),
        "devices/disk/target": _rule("dev:word bus:word tray=open|closed"),
        "devices/disk/readonly": _rule(),
        "devices/disk/boot": _rule("order:int"),
        "devices/disk/address": _ADDRESS,
        "devices/disk/driver": _rule(
            "name=qemu type:word discard=unmap|ignore detect_zeroes=off|on|unmap copy_on_read=on|off "
            "queues:int queue_size:int"
        ),
        "devices/disk/wwn": _rule(text="word"),
        "devices/disk/vendor": _rule(text="word"),
        "devices/disk/product": _rule(text="word"),
        "devices/interface": _device("interface"),
        "devices/interface/mac": _rule("address:word"),
        "devices/interface/rom": _rule(f"bar={ONOFF} enabled={YESNO}", omit=True),
        "devices/interface/mtu": _rule("size:int"),
        "devices/controller": _device(
            "controller",
            "type=usb|virtio-serial|scsi|sata|pci|ccid|ide|fdc|xenbus index:int model:word ports:int vectors:int",
        ),
        "devices/controller/model": _rule("name:word"),
        "devices/controller/target": _rule(
            "chassisNr:int chassis:int port:word busNr:int index:int hotplug=on|off"
        ),
        "devices/controller/driver": _rule("queues:int cmd_per_lun:int max_sectors:int ioeventfd=on|off"),
        "devices/controller/master": _rule("startport:int"),
        "devices/controller/pcihole64": _rule("unit:word", text="int"),
        "devices/controller/address": _ADDRESS,
        "devices/serial": _device("serial", "type=pty"),
        "devices/serial/target": _rule("type:word port:int"),
        "devices/serial/target/model": _rule("name:word"),
        "devices/serial/address": _ADDRESS,
        "devices/console": _device("console", "type=pty"),
        "devices/console/target": _rule("type:word port:int"),
        # A unix channel's socket is libvirt's choice (no path): spice and vdagent channels.
        "devices/channel": _device("channel", "type=spicevmc|qemu-vdagent|unix", omit=True),
        "devices/channel/target": _rule("type=virtio name:word state=connected|disconnected"),
        "devices/channel/source": _rule("mode=bind"),
        "devices/channel/source/clipboard": _rule(f"copypaste={YESNO}"),
        "devices/channel/source/mouse": _rule("mode=client|server"),
        "devices/channel/address": _ADDRESS,
        "devices/input": _device("input", "type=mouse|keyboard|tablet bus=ps2|usb|virtio"),
        "devices/input/address": _ADDRESS,
        "devices/graphics": _device(
            "graphics",
            f"type=spice|vnc autoport={YESNO} port:int tlsPort:int websocket:int listen:listen "
            "defaultMode=any|secure|insecure keymap:word sharePolicy=allow-exclusive|force-shared|ignore",
        ),
        "devices/graphics/listen": _rule("type=address|none address:listen"),
        "devices/graphics/image": _rule("compression=auto_glz|auto_lz|quic|glz|lz|off"),
        "devices/graphics/jpeg": _rule("compression=auto|never|always"),
        "devices/graphics/zlib": _rule("compression=auto|never|always"),
        "devices/graphics/playback": _rule(f"compression={ONOFF}"),
        "devices/graphics/streaming": _rule("mode=filter|all|off"),
        "devices/graphics/mouse": _rule("mode=server|client"),
        "devices/graphics/clipboard": _rule(f"copypaste={YESNO}"),
        "devices/graphics/filetransfer": _rule(f"enable={YESNO}"),
        "devices/graphics/gl": _rule(f"enable={YESNO}"),
        "devices/graphics/channel": _rule("name:word mode=any|secure|insecure"),
        "devices/graphics/audio": _rule("id:int"),
        "devices/sound": _device("sound", f"model={_SOUND}"),
        "devices/sound/codec": _rule("type=duplex|micro|output"),
        "devices/sound/audio": _rule("id:int"),
        "devices/sound/address": _ADDRESS,
        "devices/audio": _device("audio", "id:int type=spice|none"),
        "devices/video": _device("video"),
        "devices/video/model": _rule(
            f"type=qxl|vga|cirrus|virtio|bochs|ramfb|vmvga|none ram:int vram:int vram64:int vgamem:int "
            f"heads:int primary={YESNO}"
        ),
        "devices/video/model/acceleration": _rule(f"accel3d={YESNO} accel2d={YESNO}"),
        "devices/video/model/resolution": _rule("x:int y:int"),
        "devices/video/address": _ADDRESS,
        "devices/redirdev": _device("redirdev", "bus=usb type=spicevmc"),
        "devices/redirdev/address": _ADDRESS,
        "devices/redirfilter": _device("redirfilter"),
        "devices/redirfilter/usbdev": _rule(
            f"class:word vendor:word product:word version:word allow={YESNO}"
        ),
        "devices/smartcard": _device("smartcard", "mode=passthrough type=spicevmc"),
        "devices/smartcard/address": _ADDRESS,
        "devices/hub": _device("hub", "type=usb"),
        "devices/hub/address": _ADDRESS,
        "devices/memballoon": _device(
            "memballoon",
            f"model=virtio|virtio-transitional|virtio-non-transitional|none autodeflate={ONOFF} "
            f"freePageReporting={ONOFF}",
        ),
        "devices/memballoon/stats": _rule("period:int"),
        "devices/memballoon/address": _ADDRESS,
        # A TPM emulated by swtpm, its state kept by libvirt (no host TPM, no secret).
        "devices/tpm": _device("tpm", "model=tpm-tis|tpm-crb"),
        "devices/tpm/backend": _rule(f"type=emulator version=1.2|2.0 persistent_state={YESNO}"),
        "devices/tpm/address": _ADDRESS,
        "devices/iommu": _device("iommu", "model=intel|virtio|smmuv3"),
        "devices/iommu/driver": _rule(
            f"intremap={ONOFF} caching_mode={ONOFF} eim={ONOFF} iotlb={ONOFF} aw_bits:int"
        ),
        "devices/iommu/address": _ADDRESS,
        "devices/watchdog": _device("watchdog", "model=i6300esb|ib700|itco|diag288 action:word"),
        "devices/watchdog/address": _ADDRESS,
        "devices/panic": _device("panic", "model=isa|hyperv|pvpanic|pseries|s390"),
        "devices/panic/address": _ADDRESS,
    }
)

# Why a path is refused, where a reason helps (everything not in RULES is refused).
REFUSED: Mapping[str, str] = MappingProxyType(
    {
        **{f"devices/{k.element}": k.refused for k in DEVICE_KINDS if k.refused},
        "devices/disk/source": "a disk's source is the spec's volume",
        "devices/interface/source": "an interface's network is the host config's",
        "os/loader": "firmware files are the host config's",
        "os/nvram": "firmware files are the host config's",
        "os/kernel": "kernel images come from the host config's images",
        "os/initrd": "kernel images come from the host config's images",
        "devices/graphics@passwd": "a password would be printed in plans and diffs",
    }
)


def rule_for(path: str) -> Rule | None:
    """The allowlist's rule at an element path (``devices/graphics/listen``); a
    namespaced element inside ``<metadata>`` is any other application's data."""
    if path.startswith("metadata/"):
        head = path.split("/", 1)[1]
        if head.startswith("{") and not head.startswith(f"{{{OWNER_NS}}}"):
            return Rule(attrs={}, text=_any, add=True)
        return None
    return RULES.get(path)


# -- where an element is, in words -----------------------------------------------------


def describe(el: ET.Element) -> str:
    """``<graphics type='spice'>``: the tag and its identifying attribute."""
    tag = el.tag.split("}", 1)[-1]
    for attr in ("type", "name", "dev", "model", "firmware"):
        if el.get(attr):
            return f"<{tag} {attr}='{el.get(attr)}'>"
    target = el.find("target")
    if target is not None and (target.get("dev") or target.get("name")):
        key = "dev" if target.get("dev") else "name"
        return f"<{tag} target {key}='{target.get(key)}'>"
    mac = el.find("mac")
    if mac is not None and mac.get("address"):
        return f"<{tag} mac='{mac.get('address')}'>"
    return f"<{tag}>"


def check_element(path: str, el: ET.Element, host: HostConfig, merge: bool = False) -> list[str]:
    """Why ``el`` (at element path ``path``) cannot be kept, all of it (empty: it can).
    ``merge``: it is merged into a rendered element, so ``add`` is not needed."""
    rule = rule_for(path)
    if rule is None or (not merge and not rule.add and not (rule.add_if is not None and rule.add_if(el))):
        hint = REFUSED.get(path, "not in the pass-through allowlist (docs/passthrough.md)")
        return [f"{describe(el)}: {hint}"]
    if path.startswith("metadata/"):
        return []
    out = []
    for name, value in el.attrib.items():
        if name == OMIT or name.startswith("xmlns"):
            continue
        check = rule.attrs.get(name)
        if check is None:
            hint = REFUSED.get(f"{path}@{name}", "not in the pass-through allowlist")
            out.append(f"{describe(el)} attribute {name}: {hint}")
        elif not check(value, host):
            out.append(f"{describe(el)} attribute {name}={value!r}: not a value a pass-through may hold")
    if el.text is not None and el.text.strip():
        if rule.text is None:
            out.append(f"{describe(el)}: holds no text here")
        elif not rule.text(el.text, host):
            out.append(f"{describe(el)}: {el.text[:40]!r} is not a value a pass-through may hold")
    for child in el:
        out += check_element(f"{path}/{child.tag}", child, host)
    return out


# -- docs/passthrough.md ---------------------------------------------------------------

ALLOWLIST_BEGIN = "<!-- allowlist: generated from reconciler/render/allowlist.py (python -m reconciler.render.allowlist) -->"
ALLOWLIST_END = "<!-- end of allowlist -->"


def allowlist_table() -> str:
    """The allowlist of docs/passthrough.md, between its markers."""
    rows = [
        ALLOWLIST_BEGIN,
        "| Element | Attributes (values) | Added | Omitted |",
        "|---|---|---|---|",
        "| `metadata/*` | any element of another application's namespace, as it is | yes | — |",
    ]
    for path, rule in RULES.items():
        attrs = ", ".join(f"`{a}`".replace("|", "\\|") for a in rule.spec.split()) or "—"
        added = (
            "yes" if rule.add else ("an empty CD-ROM or floppy drive" if rule.add_if else "merged into only")
        )
        rows.append(f"| `{path}` | {attrs} | {added} | {'yes' if rule.omit else '—'} |")
    rows.append(ALLOWLIST_END)
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(allowlist_table(), end="")
