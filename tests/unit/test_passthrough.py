"""A VM's domain XML pass-through (``render.passthrough``) and what the stages make of it.

Covers: a fragment adds what the spec does not render (``<pm>``, libosinfo metadata with
its prefix, SPICE graphics, USB redirection, ``<features><vmport>``), adds attributes to
rendered elements (a disk's ``discard``), omits the guest agent channel and replaces an
interface's ``<rom>``; the essence paths it reports are the essence's own; what it may
not do is refused at the annotation's file:line with the element and its line in the
fragment: a disk source (``/etc/shadow``), a block disk (``/dev/sda``), a host device, a
host directory, a password, a console listening elsewhere than the host config says, a
socket path, a value the spec renders, an entity, the ownership namespace, an omission
of anything but the two allowed; the plan lists what an adopted or created VM keeps, a
kept value that drifted is a change worded as the pass-through's, the PR diff notes a
new VM's pass-through and words a changed one's fields as the pass-through's, with the
annotation's line; ``model.xmlpaths`` gives the essence's paths on every golden and
pinned domain; the equivalences QEMU defines (RTC and PIT present, one socket per vCPU,
qemu64 without ``<cpu>``, auto-selected firmware the running domain names by file).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reconciler import cli
from reconciler.catalog import build_catalog
from reconciler.compare.essence import essence
from reconciler.config.host import load_host_config
from reconciler.desired import desired_from_catalog
from reconciler.manifests import parse_documents
from reconciler.model import LiveDomain, PowerState, RenderedDomain
from reconciler.model.changes import Action
from reconciler.model.xmlpaths import paths_of
from reconciler.plan.build import build_plan
from reconciler.plan.text import format_plan
from reconciler.prdiff.entry import passthrough_notes
from reconciler.render import HostCaps
from reconciler.render.allowlist import ALLOWLIST_BEGIN, ALLOWLIST_END, RULES, allowlist_table
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.problems import words
from tests.helpers.domains import diff_domains, validate_xml
from tests.helpers.git import GitRepo

DATA = Path(__file__).resolve().parents[1] / "data"
HOST = load_host_config(
    b"name: h\nallowedDirectories: [/srv/vms]\nvolumeDirectory: /srv/vms/generated\n", "host.yaml"
)
NS = 'xmlns:p="http://reconciler.kubevirt.io/xmlns/passthrough/v1"'

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: desk
  annotations:
    reconciler.kubevirt.io/adopt: "true"
spec:
  runStrategy: Halted
  template:
    metadata:
      annotations:
        reconciler.kubevirt.io/domain-xml-passthrough: |
{fragment}
    spec:
      domain:
        memory: {{guest: 256Mi}}
        devices:
          autoattachGraphicsDevice: false
          disks:
          - name: root
            disk: {{bus: virtio}}
          interfaces:
          - name: nic0
            macAddress: "52:54:00:00:00:01"
            masquerade: {{}}
      networks:
      - name: nic0
        pod: {{}}
      volumes:
      - name: root
        hostDisk: {{path: /srv/vms/desk.qcow2, type: Disk}}
"""

FRAGMENT = f"""\
<domain {NS}>
  <metadata>
    <libosinfo:libosinfo xmlns:libosinfo="http://libosinfo.org/xmlns/libvirt/domain/1.0">
      <libosinfo:os id="http://microsoft.com/win/11"/>
    </libosinfo:libosinfo>
  </metadata>
  <features><vmport state="off"/></features>
  <pm><suspend-to-mem enabled="no"/><suspend-to-disk enabled="no"/></pm>
  <devices>
    <disk><target dev="vda"/><driver discard="unmap"/></disk>
    <interface><mac address="52:54:00:00:00:01"/><rom p:omit="yes" bar="off"/></interface>
    <channel p:omit="yes"><target name="org.qemu.guest_agent.0"/></channel>
    <channel type="spicevmc"><target type="virtio" name="com.redhat.spice.0"/></channel>
    <graphics type="spice" autoport="yes"><listen type="address"/><image compression="off"/></graphics>
    <video><model type="qxl" heads="1" primary="yes"/></video>
    <redirdev bus="usb" type="spicevmc"/>
  </devices>
</domain>"""


def _vm(fragment: str) -> str:
    return VM.format(fragment="\n".join(" " * 10 + line for line in fragment.splitlines()))


def render(fragment: str) -> tuple[tuple[RenderedDomain, ...], tuple[str, ...]]:
    docs = parse_documents(_vm(fragment).encode(), "vms/desk.yaml")
    desired = desired_from_catalog(
        build_catalog(list(docs)), "r", lambda _p: _vm(fragment).encode(), HOST, HostCaps.default()
    )
    return desired.rendered, tuple(words(p) for p in desired.errors)


def test_a_fragment_is_merged_where_its_rules_say(tmp_path: Path) -> None:
    (d,), errors = render(FRAGMENT)
    assert errors == ()
    dom = ET.fromstring(d.xml)
    assert dom.find("pm/suspend-to-mem") is not None
    assert dom.find("features/vmport").get("state") == "off"  # type: ignore[union-attr]
    assert dom.find("features/acpi") is not None  # rendered: kept
    assert '<libosinfo:libosinfo xmlns:libosinfo="http://libosinfo.org/xmlns/libvirt/domain/1.0">' in d.xml
    driver = dom.find("devices/disk/driver")
    assert driver is not None
    assert (driver.get("type"), driver.get("discard")) == ("qcow2", "unmap")
    rom = dom.find("devices/interface/rom")
    assert rom is not None
    assert rom.attrib == {"bar": "off"}  # the rendered enabled="no" replaced
    names = [t.get("name") for t in dom.iterfind("devices/channel/target")]
    assert names == ["com.redhat.spice.0"]  # the guest agent's omitted
    assert dom.find("devices/graphics").get("type") == "spice"  # type: ignore[union-attr]
    assert [el.tag for el in dom.find("devices")][-3:] == ["graphics", "video", "redirdev"]  # type: ignore[union-attr]
    validate_xml(d.xml, tmp_path)
    # The paths reported are the essence's, and hold every value the fragment wrote.
    ess = essence(d.xml)
    assert d.passthrough == (
        "devices/channel[com.redhat.spice.0]",
        "devices/disk[vda]/driver@discard",
        "devices/graphics",
        "devices/interface[52:54:00:00:00:01]/rom",
        "devices/redirdev",
        "devices/video",
        "features/vmport",
        "metadata/{http://libosinfo.org/xmlns/libvirt/domain/1.0}libosinfo",
        "pm",
    )
    assert d.passthrough_omitted == (
        "devices/channel[org.qemu.guest_agent.0]",
        "devices/interface[52:54:00:00:00:01]/rom",
    )
    for p in d.passthrough:
        assert any(k == p or k.startswith((f"{p}/", f"{p}@")) for k in ess), p


@pytest.mark.parametrize(
    ("fragment", "message"),
    [
        (
            '<domain><devices><disk><target dev="vda"/><source file="/etc/shadow"/></disk></devices></domain>',
            "line 1: <source>: a disk's source is the spec's volume",
        ),
        (
            '<domain><devices><disk type="block" device="disk"><source dev="/dev/sda"/>'
            '<target dev="vdb"/></disk></devices></domain>',
            "<disk type='block'>: disks come from the spec's volumes",
        ),
        (
            '<domain><devices><disk type="file" device="cdrom"><source file="/etc/shadow"/>'
            '<target dev="sdb" bus="sata"/></disk></devices></domain>',
            "<disk type='file'>: disks come from the spec's volumes",
        ),
        (
            '<domain><devices><hostdev mode="subsystem" type="pci"><source>'
            '<address domain="0" bus="1" slot="0" function="0"/></source></hostdev></devices></domain>',
            "<hostdev type='pci'>: host devices come from devices.hostDevices",
        ),
        (
            '<domain><devices><filesystem type="mount"><source dir="/"/><target dir="root"/>'
            "</filesystem></devices></domain>",
            "<filesystem type='mount'>: a host directory is never passed through",
        ),
        (
            '<domain><devices><graphics type="spice" passwd="hunter2"/></devices></domain>',
            "attribute passwd: a password would be printed in plans and diffs",
        ),
        (
            '<domain><devices><graphics type="spice"><listen type="address" address="0.0.0.0"/>'
            "</graphics></devices></domain>",
            "attribute address='0.0.0.0': not a value a pass-through may hold",
        ),
        (
            '<domain><devices><channel type="unix"><source mode="bind" path="/run/x.sock"/>'
            '<target type="virtio" name="x"/></channel></devices></domain>',
            "<source> attribute path: not in the pass-through allowlist",
        ),
        (
            '<domain><devices><serial type="file"><source path="/etc/passwd"/></serial></devices></domain>',
            "attribute type='file': not a value a pass-through may hold",
        ),
        (
            '<domain><devices><disk><target dev="vda" bus="sata"/></disk></devices></domain>',
            "sets bus='sata' where the spec renders 'virtio': a pass-through never changes what the spec renders",
        ),
        (
            '<domain><os><loader readonly="yes">/tmp/x.fd</loader></os></domain>',
            "firmware files are the host config's",
        ),
        (
            "<domain><devices><emulator>/bin/sh</emulator></devices></domain>",
            "the emulator is the host config's",
        ),
        ('<!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/shadow">]><domain>&x;</domain>', "a DOCTYPE or entity"),
        (
            '<domain><metadata><r:owner xmlns:r="http://reconciler.kubevirt.io/xmlns/domain/v1"/>'
            "</metadata></domain>",
            "<owner>: not in the pass-through allowlist",
        ),
        (f"<domain {NS}><pm p:omit='yes'/></domain>", "<pm> cannot be omitted"),
        (
            f"<domain {NS}>\n<devices>\n<rng p:omit='yes'/></devices></domain>",
            "line 3: <rng>: not in the pass-through allowlist",
        ),
        ('<domain type="kvm"/>', "<domain> takes no attributes here"),
        ("<pm/>", "the root element must be <domain>"),
        ("<domain><pm>", "not XML"),
    ],
)
def test_what_a_fragment_may_not_do_is_refused_at_its_line(fragment: str, message: str) -> None:
    rendered, errors = render(fragment)
    assert rendered == ()
    (error,) = errors
    assert error.startswith("vms/desk.yaml:12:"), error
    assert (
        "spec.template.metadata.annotations[reconciler.kubevirt.io/domain-xml-passthrough]: pass-through"
        in error
    )
    assert message in error, error


def test_the_plan_shows_what_is_kept_and_a_drift_in_it() -> None:
    (d,), _ = render(FRAGMENT)
    live = LiveDomain("desk", d.uuid, PowerState.SHUTOFF, d.xml)
    plan = build_plan("r", [d], [live], PlanPolicy())
    (adopt,) = plan.changes
    assert adopt.action == Action.ADOPT
    text = format_plan(plan)
    assert "passthrough keeps devices/channel[com.redhat.spice.0], devices/disk[vda]/driver@discard" in text
    assert "passthrough omits devices/channel[org.qemu.guest_agent.0]" in text
    drifted = d.xml.replace('<suspend-to-mem enabled="no" />', '<suspend-to-mem enabled="yes" />')
    assert drifted != d.xml
    plan = build_plan("r", [d], [LiveDomain("desk", d.uuid, PowerState.SHUTOFF, drifted)], PlanPolicy())
    (change,) = plan.changes
    assert [f.path for f in change.fields] == ["pm/suspend-to-mem@enabled"]
    assert "passthrough (pm/suspend-to-mem@enabled): yes → no" in format_plan(plan)
    assert passthrough_notes(None, d) == (
        "domain XML kept beside the spec (passthrough annotation): keeps "
        + ", ".join(d.passthrough)
        + "; omits "
        + ", ".join(d.passthrough_omitted),
    )
    assert passthrough_notes(d, d) == ()


def test_docs_passthrough_has_the_allowlist() -> None:
    """``python -m reconciler.render.allowlist`` prints the table; paste it between the markers."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "passthrough.md").read_text()
    start = text.index(ALLOWLIST_BEGIN)
    end = text.index(ALLOWLIST_END) + len(ALLOWLIST_END) + 1
    assert text[start:end] == allowlist_table()


def test_every_rule_names_an_element_path() -> None:
    for path in RULES:
        assert path.split("/", 1)[0] in (
            "metadata",
            "features",
            "pm",
            "clock",
            "cpu",
            "os",
            "devices",
            "memtune",
            "on_poweroff",
            "on_reboot",
            "on_crash",
            "on_lockfailure",
        ), path
        parts = path.split("/")
        assert not {"emulator", "hostdev", "filesystem", "loader", "nvram", "kernel", "initrd"} & set(
            parts
        ), path
        assert parts[:2] not in (["devices", "disk"], ["devices", "interface"]) or "source" not in parts, path


def _domains() -> list[Path]:
    return [
        *sorted((DATA / "render").glob("*/domain.xml")),
        *sorted((DATA / "virtinst").glob("*.xml")),
        *sorted((DATA / "libvirt-qemuxml2xml").glob("*.xml"))[::7],
    ]


@pytest.mark.parametrize("path", _domains(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_element_paths_are_the_essences(path: Path) -> None:
    text = path.read_text()
    paths = paths_of(ET.fromstring(text))
    for key in essence(text):
        element = key.split("@", 1)[0] if "}" not in key else key.rsplit("@", 1)[0]
        if key.startswith("@") or element in ("vcpu", "currentMemory"):
            continue
        assert element in paths, (path.name, key)


# -- what QEMU has without the attributes KubeVirt writes --------------------------------

BASE = """<domain type="qemu"><name>v</name><memory>262144</memory><vcpu>2</vcpu>
<os><type arch="x86_64" machine="q35">hvm</type></os>{cpu}{clock}<devices/></domain>"""


@pytest.mark.parametrize(
    ("desired", "live", "same"),
    [
        (
            {
                "clock": '<clock offset="utc"><timer name="rtc" present="yes"/><timer name="pit" present="yes"/></clock>'
            },
            {"clock": '<clock offset="utc"><timer name="rtc"/><timer name="pit"/></clock>'},
            True,
        ),
        (
            {"clock": '<clock offset="utc"><timer name="hpet" present="yes"/></clock>'},
            {"clock": '<clock offset="utc"><timer name="hpet"/></clock>'},
            False,  # HPET's default is the machine's
        ),
        (
            {"cpu": '<cpu mode="host-model"><topology sockets="2" cores="1" threads="1"/></cpu>'},
            {"cpu": '<cpu mode="host-model"/>'},
            True,
        ),
        (
            {"cpu": '<cpu mode="host-model"><topology sockets="1" cores="2" threads="1"/></cpu>'},
            {"cpu": '<cpu mode="host-model"/>'},
            False,  # two cores are not what QEMU makes of two vCPUs
        ),
        (
            {
                "cpu": '<cpu mode="custom" match="exact"><model fallback="forbid">qemu64</model>'
                '<topology sockets="2" cores="1" threads="1"/></cpu>'
            },
            {},
            True,
        ),
        (
            {"cpu": '<cpu mode="custom" match="exact"><model fallback="forbid">Haswell</model></cpu>'},
            {},
            False,
        ),
    ],
)
def test_what_qemu_has_without_the_attributes(
    desired: dict[str, str], live: dict[str, str], same: bool
) -> None:
    d = BASE.format(cpu=desired.get("cpu", ""), clock=desired.get("clock", ""))
    lv = BASE.format(cpu=live.get("cpu", ""), clock=live.get("clock", ""))
    assert (diff_domains(d, lv) == ()) is same


def test_auto_selected_firmware_is_named_by_its_files_when_running() -> None:
    desired = BASE.format(cpu="", clock="").replace("<os>", '<os firmware="efi">')
    running = BASE.format(cpu="", clock="").replace(
        "</os>",
        '<loader readonly="yes" type="pflash">/usr/share/OVMF/OVMF_CODE_4M.fd</loader>'
        "<nvram>/var/lib/libvirt/qemu/nvram/v_VARS.fd</nvram></os>",
    )
    assert [f.path for f in diff_domains(desired, desired, running)] == []
    bios = BASE.format(cpu="", clock="")
    assert [f.path for f in diff_domains(desired, bios, bios)] == ["os@firmware"]


def test_the_pr_diff_shows_a_passthrough_and_its_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.write("host.yaml", "name: h\nallowedDirectories: [/srv/vms]\nvolumeDirectory: /srv/vms/generated\n")
    plain = _vm("<domain/>")
    repo.write("vms/desk.yaml", plain)
    base = repo.commit("no pass-through")
    repo.write("vms/desk.yaml", _vm(FRAGMENT))
    repo.write("vms/new.yaml", _vm(FRAGMENT).replace("name: desk", "name: new").replace(":00:01", ":00:02"))
    head = repo.commit("keep SPICE and <pm>")
    args = ["diff", "--repo", str(repo.path), "--base", base, "--head", head, "--path", "vms"]
    assert cli.main([*args, "--host-config", str(repo.path / "host.yaml")]) == 2
    text = capsys.readouterr().out
    assert "restart  passthrough (pm/suspend-to-mem@enabled): (none) → no  [VM vms/desk.yaml:12]" in text
    assert (
        "domain XML kept beside the spec (passthrough annotation): keeps devices/channel[com.redhat" in text
    )
    new = text[text.index("+ vm/new") :]
    assert "domain XML kept beside the spec (passthrough annotation): keeps" in new
