"""Revisions: what a VM was expanded with, pinning and replay (kubevirt-semantics §a.5; DESIGN §3).

Covers: RevisionInfo of the instancetype/preference used (canonical JSON, sha256 of it,
unaffected by the object's labels); a pinned revision is expanded instead of the
repository's object unless ``follow``, and a differing repository object is reported
as a newer revision; a pin for another object is ignored; a deleted object is served
from its pin; ``revisionName: git:<commit>`` served from the caller's pin, with a clear
error when absent; ControllerRevision data given as a JSON string; a revision of the
wrong kind; ``git_revisions`` lists the commits a caller must read.
"""

from __future__ import annotations

import hashlib
import json
import textwrap

import pytest

from reconciler.catalog import build_catalog
from reconciler.errors import ExpansionError
from reconciler.expand import expand_all, expand_vm, git_revisions, revision_info
from reconciler.manifests import parse_documents
from reconciler.model import ExpandedVM, RevisionInfo, VMKey
from reconciler.wording.problems import words


def it_doc(guest: int, labels: str = "{}") -> str:
    return f"""
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: it
  labels: {labels}
spec:
  cpu: {{guest: {guest}}}
  memory: {{guest: 1Gi}}
---
"""


PREF = """
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachinePreference
metadata: {name: pref, namespace: team}
spec:
  devices: {preferredDiskBus: virtio}
---
"""


def vm_doc(matcher: str = "instancetype: {name: it}") -> str:
    return f"""
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {{name: vm1, namespace: team}}
spec:
  runStrategy: Always
{textwrap.indent(textwrap.dedent(matcher).strip(), "  ")}
  template:
    spec:
      domain: {{}}
"""


def expand_text(text: str, pinned: dict[str, RevisionInfo] | None = None, follow: bool = False) -> ExpandedVM:
    docs = parse_documents(text.encode(), "vms/rev.yaml")
    vm = next(d for d in docs if d.kind == "VirtualMachine")
    return expand_vm(vm, build_catalog(docs), pinned, follow)


def sockets(result: ExpandedVM) -> int:
    return int(result.vm["spec"]["template"]["spec"]["domain"]["cpu"]["sockets"])


def captured(guest: int, commit: str = "") -> RevisionInfo:
    doc = parse_documents(it_doc(guest).encode(), "x")[0]
    return revision_info(doc.obj, "", commit)


def test_revision_info_describes_the_objects_used() -> None:
    result = expand_text(
        it_doc(2)
        + PREF
        + vm_doc("instancetype: {name: it}\npreference: {name: pref, kind: VirtualMachinePreference}")
    )
    it, pref = result.instancetype, result.preference
    assert it is not None
    assert pref is not None
    assert (it.kind, it.name, it.namespace) == ("VirtualMachineClusterInstancetype", "it", "")
    assert (pref.kind, pref.name, pref.namespace) == ("VirtualMachinePreference", "pref", "team")
    assert it.hash == hashlib.sha256(it.data.encode()).hexdigest()
    assert json.loads(it.data)["spec"] == {"cpu": {"guest": 2}, "memory": {"guest": "1Gi"}}
    assert it.data == json.dumps(json.loads(it.data), sort_keys=True, separators=(",", ":"))


def test_labels_do_not_make_a_new_revision() -> None:
    plain = expand_text(it_doc(2) + vm_doc()).instancetype
    labelled = expand_text(it_doc(2, "{tier: gold}") + vm_doc()).instancetype
    assert plain is not None
    assert labelled is not None
    assert plain.hash == labelled.hash


def test_pinned_revision_wins_and_newer_one_is_reported() -> None:
    pin = captured(1, commit="a" * 40)
    result = expand_text(it_doc(4) + vm_doc(), {"instancetype": pin})
    assert sockets(result) == 1
    assert result.instancetype == pin
    assert len(result.newer_revisions) == 1
    assert json.loads(result.newer_revisions[0].data)["spec"]["cpu"]["guest"] == 4
    assert any("a newer revision is in the repository" in w for w in map(words, result.warnings))


def test_follow_takes_the_repository_object() -> None:
    result = expand_text(it_doc(4) + vm_doc(), {"instancetype": captured(1)}, follow=True)
    assert sockets(result) == 4
    assert result.newer_revisions == ()


def test_unchanged_pin_reports_nothing() -> None:
    result = expand_text(it_doc(2) + vm_doc(), {"instancetype": captured(2)})
    assert result.newer_revisions == ()
    assert not result.warnings


def test_pin_of_another_object_is_ignored() -> None:
    other = RevisionInfo(
        kind="VirtualMachineClusterInstancetype", name="old-name", data=captured(1).data, hash="x"
    )
    assert sockets(expand_text(it_doc(4) + vm_doc(), {"instancetype": other})) == 4


def test_deleted_object_is_served_from_its_pin() -> None:
    result = expand_text(vm_doc(), {"instancetype": captured(3)})
    assert sockets(result) == 3
    assert any("no longer in the repository" in w for w in map(words, result.warnings))


def test_git_revision_name_is_served_from_the_pin() -> None:
    pin = captured(1, commit="0123456789abcdef" * 2 + "01234567")
    result = expand_text(
        it_doc(4) + vm_doc("instancetype: {name: it, revisionName: 'git:0123456'}"), {"instancetype": pin}
    )
    assert sockets(result) == 1
    assert result.instancetype is not None
    assert result.instancetype.commit == pin.commit


def test_git_revision_name_without_the_object_is_an_error() -> None:
    with pytest.raises(ExpansionError) as info:
        expand_text(it_doc(4) + vm_doc("instancetype: {name: it, revisionName: 'git:0123456'}"))
    assert "revision git:0123456 was not supplied" in str(info.value)
    assert "--repo" in str(info.value)


def test_git_revisions_lists_the_commits_to_read() -> None:
    vm = parse_documents(
        vm_doc(
            "instancetype: {name: it, revisionName: 'git:abc'}\npreference: {name: p, revisionName: plain}"
        ).encode(),
        "x",
    )[0]
    assert git_revisions(vm.obj) == {"instancetype": "abc"}


def test_controller_revision_data_as_json_string() -> None:
    data = json.dumps(
        {
            "apiVersion": "instancetype.kubevirt.io/v1alpha1",
            "kind": "VirtualMachineInstancetype",
            "metadata": {"name": "it"},
            "spec": {"cpu": {"guest": 3}, "memory": {"guest": "1Gi"}},
        }
    )
    cr = f"""
apiVersion: apps/v1
kind: ControllerRevision
metadata: {{name: rev1, namespace: team}}
data: '{data}'
---
"""
    result = expand_text(it_doc(4) + cr + vm_doc("instancetype: {name: it, revisionName: rev1}"))
    assert sockets(result) == 3
    assert result.instancetype is not None
    assert result.instancetype.kind == "VirtualMachineInstancetype"


def test_controller_revision_of_the_wrong_kind() -> None:
    cr = """
apiVersion: apps/v1
kind: ControllerRevision
metadata: {name: rev1, namespace: team}
data:
  kind: VirtualMachineClusterPreference
  metadata: {name: it}
  spec: {}
---
"""
    with pytest.raises(
        ExpansionError,
        match="does not hold a VirtualMachineInstancetype or VirtualMachineClusterInstancetype",
    ):
        expand_text(it_doc(4) + cr + vm_doc("instancetype: {name: it, revisionName: rev1}"))


def test_corrupt_pin_is_an_error() -> None:
    bad = RevisionInfo(kind="VirtualMachineClusterInstancetype", name="it", data="{not json", hash="x")
    with pytest.raises(ExpansionError, match="captured revision data is not JSON"):
        expand_text(it_doc(4) + vm_doc(), {"instancetype": bad})


ALPHA_CR = """
apiVersion: apps/v1
kind: ControllerRevision
metadata: {name: rev-alpha, namespace: team}
data:
  apiVersion: instancetype.kubevirt.io/v1alpha2
  kind: VirtualMachineClusterInstancetype
  metadata: {name: it}
  spec:
    cpu: {guest: 2}
    memory: {guest: 1Gi}
---
"""


@pytest.mark.parametrize(
    ("cpu", "path"),
    [
        ("model: Haswell", "spec.template.spec.domain.cpu.model"),
        ("dedicatedCpuPlacement: true", "spec.template.spec.domain.cpu.dedicatedCPUPlacement"),
        ("isolateEmulatorThread: true", "spec.template.spec.domain.cpu.isolateEmulatorThread"),
    ],
)
def test_alpha_revisions_keep_kubevirts_conversion_quirk(cpu: str, path: str) -> None:
    vm = vm_doc("instancetype: {name: it, revisionName: rev-alpha}").replace(
        "domain: {}", f"domain: {{cpu: {{{cpu}}}}}"
    )
    with pytest.raises(ExpansionError, match=path.replace(".", r"\.")):
        expand_text(ALPHA_CR + vm)
    # the same object read directly has no such quirk
    direct = expand_text(it_doc(2) + vm.replace(", revisionName: rev-alpha", ""))
    assert direct.vm["spec"]["template"]["spec"]["domain"]["cpu"]["sockets"] == 2


def test_alpha_revision_without_conflicts_expands_cleanly() -> None:
    result = expand_text(ALPHA_CR + vm_doc("instancetype: {name: it, revisionName: rev-alpha}"))
    assert result.vm["spec"]["template"]["spec"]["domain"]["cpu"] == {"sockets": 2, "cores": 1, "threads": 1}


@pytest.mark.parametrize(
    "name_of", [lambda p: f"it-{p.hash[:12]}", lambda p: "sha256:" + p.hash[:7], lambda p: p.hash]
)
def test_revision_name_selects_the_captured_revision_even_with_follow(name_of) -> None:  # type: ignore[no-untyped-def]
    pin = captured(1)
    vm = vm_doc(f"instancetype: {{name: it, revisionName: '{name_of(pin)}'}}")
    result = expand_text(it_doc(4) + vm, {"instancetype": pin}, follow=True)
    assert sockets(result) == 1
    assert len(result.newer_revisions) == 1


def test_revision_name_the_repository_cannot_resolve_is_unpinned_with_a_warning() -> None:
    """Neither the captured revision nor a ControllerRevision of the repository (an
    export's cluster revision): the VM is taken as unpinned, so the captured one holds."""
    got = expand_text(
        it_doc(4) + vm_doc("instancetype: {name: it, revisionName: 'sha256:0000000'}"),
        {"instancetype": captured(1)},
    )
    assert got.vm["spec"]["template"]["spec"]["domain"]["cpu"]["sockets"] == 1  # the captured revision
    assert any(
        "revisionName sha256:0000000 is not in the repository" in w for w in map(words, got.warnings)
    ), got.warnings


def test_git_pins_build_each_commit_once_and_report_failures() -> None:
    from reconciler.errors import SourceError
    from reconciler.expand.pins import git_pins

    vm = vm_doc(
        "instancetype: {name: it, revisionName: 'git:abc1234'}\npreference: {name: pref, kind: VirtualMachinePreference, revisionName: 'git:abc1234'}"
    )
    other = vm_doc("instancetype: {name: it, revisionName: 'git:dead000'}").replace("name: vm1", "name: vm2")
    current = build_catalog(parse_documents((it_doc(4) + vm + "\n---\n" + other).encode(), "now.yaml"))
    old = build_catalog(parse_documents((it_doc(1) + PREF).encode(), "then.yaml"))
    calls: list[str] = []

    def catalog_at(commit: str):  # type: ignore[no-untyped-def]
        calls.append(commit)
        if commit == "dead000":
            raise SourceError("unknown revision dead000")
        return "abc1234" + "0" * 33, old

    pins = git_pins(current, catalog_at)
    assert calls == ["abc1234", "dead000"]
    assert set(pins) == {VMKey("team", "vm1"), VMKey("team", "vm2")}
    assert pins[VMKey("team", "vm1")]["instancetype"].commit == "abc1234" + "0" * 33
    assert pins[VMKey("team", "vm1")]["preference"].namespace == "team"
    result = expand_vm(current.vms[0], current, pins[VMKey("team", "vm1")])
    assert sockets(result) == 1
    # The pin that could not be read is the VM's one error, at its revisionName, with the cause.
    expanded, errors = expand_all(current, pins)
    assert [vm.subject for vm in expanded] == ["vm/team_vm1"]
    (error,) = errors
    assert words(error.problem()) == (
        "now.yaml:25: vm/team_vm2: instancetype it: revision git:dead000: unknown revision dead000"
    )


def test_a_pinned_commit_without_the_object_names_the_commit_and_the_object() -> None:
    from reconciler.expand.pins import git_pins

    vm = vm_doc("instancetype: {name: it, revisionName: 'git:abc1234'}")
    current = build_catalog(parse_documents((it_doc(4) + vm).encode(), "now.yaml"))
    old = build_catalog(parse_documents(PREF.encode(), "then.yaml"))
    pins = git_pins(current, lambda _commit: ("abc1234" + "0" * 33, old))
    _expanded, errors = expand_all(current, pins)
    (error,) = errors
    assert "instancetype it: revision git:abc1234: commit abc123400000 has no" in str(error)
    assert "VirtualMachineClusterInstancetype 'it'" in str(error)
    assert "not supplied" not in str(error)


def test_vms_of_one_instancetype_share_its_captured_revision() -> None:
    docs = parse_documents(
        (it_doc(2) + vm_doc() + "---" + vm_doc().replace("name: vm1", "name: vm2")).encode(), "all.yaml"
    )
    cat = build_catalog(docs)
    first, second = (expand_vm(vm, cat).instancetype for vm in cat.vms)
    assert first is not None
    assert first is second  # one object (and one copy of its JSON) for the whole fleet
    fresh = revision_info(cat.objects[next(k for k in cat.objects if k[2] == "it")].obj, "")
    assert fresh == first
    assert fresh is not first
