"""Pass-through: domain XML a VM keeps beside what its spec renders.

Input: the annotation ``reconciler.kubevirt.io/domain-xml-passthrough`` of
``spec.template.metadata.annotations`` (the VMI's annotations: KubeVirt keeps and
ignores it, so the YAML stays valid KubeVirt YAML), an XML document whose root is
``<domain>``; and the ``<domain>`` tree the area modules built. Output: that tree with
the fragment merged in, and the essence paths (``model.xmlpaths``) the fragment wrote
and omitted, so compare, the plan and the PR diff name them. Pure: no host, no files.

Merge rules (docs/passthrough.md):

- a child of the fragment the rendered element lacks is added (``<pm>``, a SPICE
  ``<graphics>``, ``<features><vmport>``); one it has is merged into: attributes and
  text the rendered element lacks are added, one it has must be equal (a pass-through
  never changes what the spec renders: the error names both values);
- children of ``<devices>`` are matched by identity (a disk by its target, an interface
  by its MAC, a controller by type and index, an input by type and bus, a channel by
  its target name); any other device is added;
- ``p:omit="yes"`` (``xmlns:p="http://reconciler.kubevirt.io/xmlns/passthrough/v1"``)
  removes the rendered element it matches, only where ``RULES`` allows it (the guest
  agent channel, an interface's ``<rom>``); with attributes of its own, the element
  (with its children) is written instead of the rendered one.

Never lets a commit reach the host through it: every element and attribute of a
fragment is checked against ``RULES`` (an allowlist; a value check per attribute), so
no host path, host device, socket, emulator, password or network of the host can be
named; disks and interfaces are only merged into (their sources come from the spec and
the host config). A fragment with a DOCTYPE or an entity is refused.
"""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING
from xml.parsers import expat

from reconciler.model import annotation_names
from reconciler.model.xmlpaths import element_paths

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.config.host import HostConfig
    from reconciler.render.context import RenderContext

ANNOTATION = annotation_names.DOMAIN_XML_PASSTHROUGH
NS = "http://reconciler.kubevirt.io/xmlns/passthrough/v1"
OMIT = f"{{{NS}}}omit"
WHERE = f"spec.template.metadata.annotations[{ANNOTATION}]"
# The ownership mark's namespace (ownership.inventory): never written by a fragment.
OWNER_NS = "http://reconciler.kubevirt.io/xmlns/domain/v1"
MAX_FRAGMENT = 256 * 1024


class FragmentError(ValueError):
    """A fragment that cannot be kept: the message names the element and its line."""


# -- values ----------------------------------------------------------------------------

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
        "devices/disk": _rule("type=file|block device=disk|cdrom|floppy|lun", add=False, add_if=_empty_drive),
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
        "devices/interface": _rule(add=False),
        "devices/interface/mac": _rule("address:word"),
        "devices/interface/rom": _rule(f"bar={ONOFF} enabled={YESNO}", omit=True),
        "devices/interface/mtu": _rule("size:int"),
        "devices/controller": _rule(
            "type=usb|virtio-serial|scsi|sata|pci|ccid|ide|fdc|xenbus index:int model:word ports:int vectors:int"
        ),
        "devices/controller/model": _rule("name:word"),
        "devices/controller/target": _rule(
            "chassisNr:int chassis:int port:word busNr:int index:int hotplug=on|off"
        ),
        "devices/controller/driver": _rule("queues:int cmd_per_lun:int max_sectors:int ioeventfd=on|off"),
        "devices/controller/master": _rule("startport:int"),
        "devices/controller/pcihole64": _rule("unit:word", text="int"),
        "devices/controller/address": _ADDRESS,
        "devices/serial": _rule("type=pty"),
        "devices/serial/target": _rule("type:word port:int"),
        "devices/serial/target/model": _rule("name:word"),
        "devices/serial/address": _ADDRESS,
        "devices/console": _rule("type=pty"),
        "devices/console/target": _rule("type:word port:int"),
        # A unix channel's socket is libvirt's choice (no path): spice and vdagent channels.
        "devices/channel": _rule("type=spicevmc|qemu-vdagent|unix", omit=True),
        "devices/channel/target": _rule("type=virtio name:word state=connected|disconnected"),
        "devices/channel/source": _rule("mode=bind"),
        "devices/channel/source/clipboard": _rule(f"copypaste={YESNO}"),
        "devices/channel/source/mouse": _rule("mode=client|server"),
        "devices/channel/address": _ADDRESS,
        "devices/input": _rule("type=mouse|keyboard|tablet bus=ps2|usb|virtio"),
        "devices/input/address": _ADDRESS,
        "devices/graphics": _rule(
            f"type=spice|vnc autoport={YESNO} port:int tlsPort:int websocket:int listen:listen "
            "defaultMode=any|secure|insecure keymap:word sharePolicy=allow-exclusive|force-shared|ignore"
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
        "devices/sound": _rule(f"model={_SOUND}"),
        "devices/sound/codec": _rule("type=duplex|micro|output"),
        "devices/sound/audio": _rule("id:int"),
        "devices/sound/address": _ADDRESS,
        "devices/audio": _rule("id:int type=spice|none"),
        "devices/video": _rule(),
        "devices/video/model": _rule(
            f"type=qxl|vga|cirrus|virtio|bochs|ramfb|vmvga|none ram:int vram:int vram64:int vgamem:int "
            f"heads:int primary={YESNO}"
        ),
        "devices/video/model/acceleration": _rule(f"accel3d={YESNO} accel2d={YESNO}"),
        "devices/video/model/resolution": _rule("x:int y:int"),
        "devices/video/address": _ADDRESS,
        "devices/redirdev": _rule("bus=usb type=spicevmc"),
        "devices/redirdev/address": _ADDRESS,
        "devices/redirfilter": _rule(),
        "devices/redirfilter/usbdev": _rule(
            f"class:word vendor:word product:word version:word allow={YESNO}"
        ),
        "devices/smartcard": _rule("mode=passthrough type=spicevmc"),
        "devices/smartcard/address": _ADDRESS,
        "devices/hub": _rule("type=usb"),
        "devices/hub/address": _ADDRESS,
        "devices/memballoon": _rule(
            f"model=virtio|virtio-transitional|virtio-non-transitional|none autodeflate={ONOFF} "
            f"freePageReporting={ONOFF}"
        ),
        "devices/memballoon/stats": _rule("period:int"),
        "devices/memballoon/address": _ADDRESS,
        # A TPM emulated by swtpm, its state kept by libvirt (no host TPM, no secret).
        "devices/tpm": _rule("model=tpm-tis|tpm-crb"),
        "devices/tpm/backend": _rule(f"type=emulator version=1.2|2.0 persistent_state={YESNO}"),
        "devices/tpm/address": _ADDRESS,
        "devices/iommu": _rule("model=intel|virtio|smmuv3"),
        "devices/iommu/driver": _rule(
            f"intremap={ONOFF} caching_mode={ONOFF} eim={ONOFF} iotlb={ONOFF} aw_bits:int"
        ),
        "devices/iommu/address": _ADDRESS,
        "devices/watchdog": _rule("model=i6300esb|ib700|itco|diag288 action:word"),
        "devices/watchdog/address": _ADDRESS,
        "devices/panic": _rule("model=isa|hyperv|pvpanic|pseries|s390"),
        "devices/panic/address": _ADDRESS,
    }
)

# Why a path is refused, where a reason helps (everything not in RULES is refused).
REFUSED: Mapping[str, str] = MappingProxyType(
    {
        "devices/disk": "disks come from the spec's volumes (inside allowedDirectories); only merged into, "
        "or an empty CD-ROM or floppy drive added",
        "devices/interface": "interfaces come from the spec's networks and the host config; only merged into",
        "devices/hostdev": "host devices come from devices.hostDevices and the host config's hostDevices",
        "devices/filesystem": "a host directory is never passed through",
        "devices/emulator": "the emulator is the host config's",
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


# -- parsing ---------------------------------------------------------------------------


@dataclass(slots=True)
class Fragment:
    """A parsed fragment: the ``<domain>`` tree (``{uri}name`` tags), the prefix its
    text gave each namespace, and the line of each element."""

    root: ET.Element
    prefixes: dict[str, str] = field(default_factory=dict)
    lines: dict[int, int] = field(default_factory=dict)

    def line(self, el: ET.Element) -> int:
        return self.lines.get(id(el), 0)


def parse_fragment(text: str) -> Fragment:
    """Parse a fragment; ``FragmentError`` for anything but a plain ``<domain>`` document."""
    if len(text) > MAX_FRAGMENT:
        raise FragmentError(f"is {len(text)} characters; a pass-through holds at most {MAX_FRAGMENT}")
    parser = expat.ParserCreate(namespace_separator="}")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    frag = Fragment(ET.Element("domain"))
    stack: list[ET.Element] = []
    roots: list[ET.Element] = []

    def name(raw: str) -> str:
        return "{" + raw if "}" in raw else raw

    def start(tag: str, attrs: dict[str, str]) -> None:
        el = ET.Element(name(tag), {name(k): v for k, v in attrs.items()})
        frag.lines[id(el)] = parser.CurrentLineNumber
        if stack:
            stack[-1].append(el)
        else:
            roots.append(el)
        stack.append(el)

    def end(tag: str) -> None:
        el = stack.pop()
        if el.text is not None and not el.text.strip():
            el.text = None
        elif el.text is not None:
            el.text = el.text.strip()

    def chars(data: str) -> None:
        el = stack[-1] if stack else None
        if el is None:
            return
        if len(el):  # text between children: only whitespace is allowed
            if data.strip():
                raise FragmentError(f"line {parser.CurrentLineNumber}: text between elements")
            return
        el.text = (el.text or "") + data

    def refuse(*_: object) -> None:
        raise FragmentError(f"line {parser.CurrentLineNumber}: a DOCTYPE or entity is not allowed")

    def namespace(prefix: str | None, uri: str) -> None:
        if prefix:
            frag.prefixes.setdefault(uri, prefix)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.StartNamespaceDeclHandler = namespace
    try:
        parser.Parse(text, True)
    except expat.ExpatError as err:
        raise FragmentError(f"line {err.lineno}: not XML ({expat.errors.messages[err.code]})") from err
    if len(roots) != 1 or roots[0].tag != "domain":
        raise FragmentError("the root element must be <domain>")
    frag.root = roots[0]
    if frag.root.attrib:
        raise FragmentError("line 1: <domain> takes no attributes here (the spec renders them)")
    return frag


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


# -- merging ---------------------------------------------------------------------------


def identity(el: ET.Element) -> str | None:
    """A device's identity for matching a rendered one; None: it is always added."""
    tag = el.tag
    if tag == "disk":
        target = el.find("target")
        return target.get("dev") if target is not None else None
    if tag == "interface":
        mac = el.find("mac")
        return (mac.get("address") or "").lower() or None if mac is not None else None
    if tag == "controller":
        master = el.find("master")
        port = f"+{master.get('startport')}" if master is not None else ""
        return f"{el.get('type')}:{el.get('index')}{port}" if el.get("index") is not None else None
    if tag == "input":
        return f"{el.get('type')}:{el.get('bus')}"
    if tag == "channel":
        target = el.find("target")
        return target.get("name") if target is not None and target.get("name") else None
    return None


def match_child(parent: ET.Element, child: ET.Element, devices: bool) -> ET.Element | None:
    if devices:
        key = identity(child)
        if key is None:
            return None
        return next((el for el in parent if el.tag == child.tag and identity(el) == key), None)
    name = child.get("name")
    same = [el for el in parent if el.tag == child.tag and (name is None or el.get("name") == name)]
    if len(same) > 1:
        raise FragmentError(f"{describe(child)} matches {len(same)} elements; give it a name")
    return same[0] if same else None


@dataclass(slots=True)
class _Merge:
    host: HostConfig
    frag: Fragment
    root: ET.Element  # the rendered <domain>
    added: list[tuple[ET.Element, str | None]] = field(default_factory=list)  # (element, attribute)
    omitted: list[str] = field(default_factory=list)

    def fail(self, el: ET.Element, message: str) -> FragmentError:
        line = self.frag.line(el)
        return FragmentError(f"line {line}: {message}" if line else message)

    def merge(self, frag: ET.Element, target: ET.Element, path: str) -> None:
        rule = rule_for(path) if path else Rule()
        assert rule is not None
        for name, value in frag.attrib.items():
            if name == OMIT:
                continue
            check = rule.attrs.get(name)
            if check is None or not check(value, self.host):
                raise self.fail(frag, check_element(path, frag, self.host, merge=True)[0])
            have = target.get(name)
            if have is None:
                target.set(name, value)
                self.added.append((target, name))
            elif have != value:
                raise self.fail(
                    frag,
                    f"{describe(frag)} sets {name}={value!r} where the spec renders {have!r}: "
                    "a pass-through never changes what the spec renders; change the spec",
                )
        if frag.text is not None:
            if rule.text is None or not rule.text(frag.text, self.host):
                raise self.fail(frag, check_element(path, frag, self.host, merge=True)[0])
            if target.text is None:
                target.text = frag.text
                self.added.append((target, ""))
            elif target.text != frag.text:
                raise self.fail(
                    frag, f"{describe(frag)} holds {frag.text!r} where the spec renders {target.text!r}"
                )
        for child in frag:
            self.child(child, target, f"{path}/{child.tag}" if path else str(child.tag), path == "devices")

    def child(self, child: ET.Element, target: ET.Element, path: str, devices: bool) -> None:
        rule = rule_for(path)
        if rule is None:
            raise self.fail(child, check_element(path, child, self.host, merge=True)[0])
        try:
            match = match_child(target, child, devices)
        except FragmentError as err:
            raise self.fail(child, str(err)) from None
        if child.get(OMIT) is not None:
            if child.get(OMIT) != "yes" or not rule.omit:
                raise self.fail(child, f"{describe(child)} cannot be omitted (only: {', '.join(OMITTABLE)})")
            if match is None:
                raise self.fail(child, f"{describe(child)}: the spec renders no such element to omit")
            if path == "devices/channel" and identity(match) != "org.qemu.guest_agent.0":
                raise self.fail(child, f"{describe(child)}: only the guest agent channel can be omitted")
            self.omitted.append(element_paths_of(self.root, match))
            index = list(target).index(match)
            target.remove(match)
            replacement = copy.deepcopy(child)
            del replacement.attrib[OMIT]
            if replacement.attrib:  # children alone only name what is omitted
                self.add(replacement, target, path, child, index)
            return
        if match is None:
            self.add(copy.deepcopy(child), target, path, child)
            return
        self.merge(child, match, path)

    def add(
        self, el: ET.Element, target: ET.Element, path: str, source: ET.Element, index: int | None = None
    ) -> None:
        problems = check_element(path, source, self.host)
        if problems:
            raise self.fail(source, problems[0])
        for inner in el.iter():
            if inner.get(OMIT) is not None:
                raise self.fail(source, f"{describe(inner)}: p:omit applies to a rendered element only")
        if index is None:
            target.append(el)
        else:
            target.insert(index, el)
        self.added.append((el, None))


def element_paths_of(root: ET.Element, el: ET.Element) -> str:
    got = element_paths(root).get(id(el))
    return got[0] if got is not None else el.tag


OMITTABLE = ("<channel> of the guest agent", "an interface's <rom>")


@dataclass(frozen=True, slots=True)
class Kept:
    """What a pass-through did to one domain: essence paths written, and omitted."""

    paths: tuple[str, ...] = ()
    omitted: tuple[str, ...] = ()


def merge_fragment(domain: ET.Element, text: str, host: HostConfig) -> Kept:
    """Merge the fragment ``text`` into ``domain`` (in place); ``FragmentError`` names
    what cannot be kept and its line."""
    frag = parse_fragment(text)
    m = _Merge(host, frag, domain)
    m.merge(frag.root, domain, "")
    paths = element_paths(domain)
    written: set[str] = set()
    # <metadata> added whole: each application's element is named on its own.
    added = [
        (c, None) if el.tag == "metadata" and attr is None else (el, attr)
        for el, attr in m.added
        for c in (el if el.tag == "metadata" and attr is None else [el])
    ]
    for el, attr in added:
        got = paths.get(id(el))
        if got is None:
            continue
        base = got[0]
        written.add(base if not attr else f"{base}@{attr}")
    _prefix(domain, frag.prefixes)
    return Kept(tuple(sorted(written)), tuple(sorted(m.omitted)))


def _prefix(domain: ET.Element, prefixes: Mapping[str, str]) -> None:
    """Namespaced tags ``{uri}name`` as ``prefix:name`` with their ``xmlns:prefix``
    (render.xml writes tags as they are)."""
    md = domain.find("metadata")
    if md is None:
        return
    for top in md:
        prefix_tree(top, dict(prefixes))


def prefix_tree(top: ET.Element, prefixes: dict[str, str]) -> None:
    """Rewrite ``top`` and below from ``{uri}name`` to ``prefix:name``, declaring each
    namespace on ``top``."""
    declared: dict[str, str] = {}

    def prefix(uri: str) -> str:
        if uri not in declared:
            p = prefixes.get(uri) or f"ns{len(declared)}"
            while p in declared.values():
                p += "x"
            declared[uri] = p
        return declared[uri]

    def rename(name: str) -> str:
        if name.startswith("{"):
            uri, local = name[1:].split("}", 1)
            return f"{prefix(uri)}:{local}"
        return name

    for el in top.iter():
        el.tag = rename(el.tag)
        if any(k.startswith("{") for k in el.attrib):
            el.attrib = {rename(k): v for k, v in el.attrib.items()}
    for uri, p in declared.items():
        top.set(f"xmlns:{p}", uri)


def render_passthrough(ctx: RenderContext, domain: ET.Element) -> Kept:
    """The VM's pass-through (its template's annotation) merged into ``domain`` (see the
    module doc)."""
    text = ctx.annotations.get(ANNOTATION)
    if text is None:
        return Kept()
    if not isinstance(text, str) or not text.strip():
        raise ctx.error(WHERE, "expected the XML of a <domain> fragment")
    try:
        return merge_fragment(domain, text, ctx.host)
    except FragmentError as err:
        raise ctx.error(WHERE, f"pass-through {err}") from None


def fragment_text(root: ET.Element, prefixes: Mapping[str, str]) -> str:
    """The text of a fragment tree (``{uri}name`` tags), as an annotation holds it:
    two-space indents, namespaces declared where they are first used."""
    tree = copy.deepcopy(root)
    for child in tree:
        if child.tag == "metadata":
            for top in child:
                prefix_tree(top, dict(prefixes))
    omit_used = any(OMIT in el.attrib for el in tree.iter())
    if omit_used:
        for el in tree.iter():
            if OMIT in el.attrib:
                value = el.attrib.pop(OMIT)
                el.attrib = {"p:omit": value, **el.attrib}
        tree.set("xmlns:p", NS)
    ET.indent(tree, "  ")
    return ET.tostring(tree, encoding="unicode") + "\n"


# -- docs/passthrough.md ---------------------------------------------------------------

ALLOWLIST_BEGIN = "<!-- allowlist: generated from reconciler/render/passthrough.py (python -m reconciler.render.passthrough) -->"
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
