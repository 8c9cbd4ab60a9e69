"""PR diff on hand-built records: ``prdiff.compare_desired`` and the three formats.

Covers: created / deleted / changed / unchanged per VM; change class taken from the
plan (restart vs live); run-strategy and rollout consequences (Always staged,
Restart rollout restarts, Manual and Once never restarted, Halted only redefined,
strategy switches start or stop); prune wording and the prune annotation; spec-only
changes; instancetype revisions (pinned vs following VMs); base errors compared as
new; exit codes; error records split into file:line; markdown escaping, fences and
the size cap; text colours; JSON keys.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from reconciler import prdiff
from reconciler.desired import Desired
from reconciler.model import (
    ExpandedVM,
    Manifest,
    Problem,
    RenderedDomain,
    RevisionInfo,
    Rollout,
    RunStrategy,
    Severity,
    VMKey,
    VolumeSpec,
)
from reconciler.model.health import Probe, ProbeAction, Probes
from reconciler.wording.problems import words

BASE = "a" * 40
HEAD = "b" * 40


def domain_xml(
    name: str, machine: str = "pc-q35-8.2", memory: int = 1048576, disks: tuple[str, ...] = ("vda",)
) -> str:
    devs = "".join(
        f"<disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
        f"<source file='/var/lib/reconciler/{name}-{t}.qcow2'/><target dev='{t}' bus='virtio'/></disk>"
        for t in disks
    )
    return (
        f"<domain type='kvm'><name>{name}</name><memory unit='KiB'>{memory}</memory>"
        f"<currentMemory unit='KiB'>{memory}</currentMemory><vcpu placement='static'>1</vcpu>"
        f"<os><type arch='x86_64' machine='{machine}'>hvm</type></os><devices>{devs}</devices></domain>"
    )


def rendered(
    name: str, xml: str | None = None, strategy: RunStrategy = RunStrategy.ALWAYS, **kw: Any
) -> RenderedDomain:
    xml = xml or domain_xml(name)
    return RenderedDomain(
        key=VMKey.from_domain(name),
        uuid=hashlib.md5(name.encode()).hexdigest(),
        xml_data=xml,
        spec_hash=hashlib.sha256(xml.encode()).hexdigest(),
        run_strategy=strategy,
        source_path=f"vms/{name}.yaml",
        **kw,
    )


def expanded(name: str, spec: dict[str, Any] | None = None, **kw: Any) -> ExpandedVM:
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": spec
        or {"runStrategy": "Always", "template": {"spec": {"domain": {"memory": {"guest": "1Gi"}}}}},
    }
    return ExpandedVM(vm=vm, source=Manifest(vm, f"vms/{name}.yaml", 1), **kw)


def desired(
    revision: str, domains: list[RenderedDomain], vms: list[ExpandedVM] | None = None, **kw: Any
) -> Desired:
    if vms is None:
        vms = [expanded(d.name) for d in domains]
    return Desired(revision, tuple(domains), tuple(vms), **kw)


def entry(d: prdiff.PRDiff, name: str) -> prdiff.VMEntry:
    found = [e for e in d.vms if e.name == name]
    assert len(found) == 1, [e.name for e in d.vms]
    return found[0]


def test_no_change_exits_zero() -> None:
    base = desired(BASE, [rendered("web"), rendered("db")])
    head = desired(HEAD, [rendered("web"), rendered("db")])
    result = prdiff.compare_desired(base, head)
    assert result.vms == ()
    assert result.unchanged == 2
    assert result.exit_code == 0
    assert prdiff.summary_line(result) == "0 created, 0 deleted, 0 changed, 2 unchanged"


def test_created_and_deleted() -> None:
    base = desired(BASE, [rendered("web"), rendered("db"), rendered("dns"), rendered("old")])
    head = desired(
        HEAD,
        [
            rendered("web"),
            rendered("db"),
            rendered("dns"),
            rendered("new"),
            rendered("manual", strategy=RunStrategy.MANUAL),
        ],
    )
    result = prdiff.compare_desired(base, head)
    assert [(e.name, e.kind) for e in result.vms] == [
        ("manual", prdiff.EntryKind.CREATED),
        ("new", prdiff.EntryKind.CREATED),
        ("old", prdiff.EntryKind.DELETED),
    ]
    assert entry(result, "new").consequence == "new domain: defined and started (runStrategy Always)"
    assert entry(result, "manual").consequence == "new domain: defined, not started (runStrategy Manual)"
    assert entry(result, "old").consequence == (
        "left git: pruned (shut down gracefully and undefined, disks kept) on hosts with pruning on; "
        "kept on hosts with pruning off (the default)"
    )
    assert entry(result, "new").spec_diff.startswith("--- /dev/null\n+++ head:vms/new.yaml\n")
    assert result.exit_code == 2


def test_deleted_vm_with_prune_false_annotation_is_kept() -> None:
    base = desired(BASE, [rendered(n) for n in ("a", "b", "c", "d")] + [rendered("keep", prune=False)])
    head = desired(HEAD, [rendered(n) for n in ("a", "b", "c", "d")])
    e = entry(prdiff.compare_desired(base, head), "keep")
    assert e.kind == prdiff.EntryKind.DELETED
    assert "kept (reconciler.kubevirt.io/prune" in e.consequence


def test_mass_deletion_reports_the_prune_guard() -> None:
    base = desired(BASE, [rendered(n) for n in ("a", "b", "c")])
    head = desired(HEAD, [rendered("a")])
    result = prdiff.compare_desired(base, head)
    assert all("refuses: prune refused: 2 of 3 managed domains" in e.consequence for e in result.vms)
    assert any("maxPrunePercent" in w for w in map(words, result.warnings))


@pytest.mark.parametrize(
    ("strategy", "rollout", "action", "expected"),
    [
        (
            RunStrategy.ALWAYS,
            Rollout.STAGE,
            "update",
            "Always VM: restart-class change staged, RestartRequired",
        ),
        (
            RunStrategy.RERUN_ON_FAILURE,
            Rollout.STAGE,
            "update",
            "RerunOnFailure VM: restart-class change staged",
        ),
        (
            RunStrategy.ALWAYS,
            Rollout.RESTART,
            "restart",
            "Always VM: restart-class change: will be restarted (rollout Restart)",
        ),
        (
            RunStrategy.MANUAL,
            Rollout.RESTART,
            "update",
            "Manual VM (if running): restart-class change staged",
        ),
        (RunStrategy.ONCE, Rollout.RESTART, "update", "Once VM (if running): restart-class change staged"),
        (
            RunStrategy.HALTED,
            Rollout.RESTART,
            "update",
            "Halted VM: definition updated; the change takes effect at the next start",
        ),
    ],
)
def test_restart_class_change_follows_run_strategy_and_rollout(
    strategy: RunStrategy, rollout: Rollout, action: str, expected: str
) -> None:
    base = desired(BASE, [rendered("web", strategy=strategy)])
    head = desired(HEAD, [rendered("web", domain_xml("web", machine="pc-q35-9.0"), strategy=strategy)])
    e = entry(prdiff.compare_desired(base, head, rollout=rollout), "web")
    assert e.kind == prdiff.EntryKind.CHANGED
    assert e.change_class == "restart"
    assert e.action == action
    assert e.consequence.startswith(expected)
    assert [(f.path, f.old, f.new, f.change_class.value) for f in e.fields] == [
        ("os/type@machine", "pc-q35-8.2", "pc-q35-9.0", "restart")
    ]


def test_per_vm_rollout_annotation_wins_over_the_host_default() -> None:
    base = desired(BASE, [rendered("web")])
    head = desired(HEAD, [rendered("web", domain_xml("web", machine="pc-q35-9.0"), rollout=Rollout.RESTART)])
    e = entry(prdiff.compare_desired(base, head, rollout=Rollout.STAGE), "web")
    assert e.action == "restart"


def test_added_disk_is_live() -> None:
    base = desired(BASE, [rendered("web")])
    head = desired(HEAD, [rendered("web", domain_xml("web", disks=("vda", "vdb")))])
    e = entry(prdiff.compare_desired(base, head), "web")
    assert e.change_class == "live"
    assert e.consequence == "Always VM: applied live (attach disk[vdb]), no restart"
    assert [f.path for f in e.fields] == ["devices/disk[vdb]"]


def test_mixed_live_and_restart_fields_class_the_vm_restart() -> None:
    base = desired(BASE, [rendered("web")])
    head = desired(HEAD, [rendered("web", domain_xml("web", machine="pc-q35-9.0", disks=("vda", "vdb")))])
    result = prdiff.compare_desired(base, head)
    e = entry(result, "web")
    assert e.change_class == "restart"
    assert {f.change_class.value for f in e.fields} == {"live", "restart"}
    assert prdiff.summary_line(result) == "0 created, 0 deleted, 1 changed (1 restart), 0 unchanged"


def test_strategy_switch_to_halted_stops_the_vm() -> None:
    base = desired(BASE, [rendered("web")])
    head = desired(HEAD, [rendered("web", strategy=RunStrategy.HALTED)])
    e = entry(prdiff.compare_desired(base, head), "web")
    assert e.kind == prdiff.EntryKind.CHANGED
    assert "will be stopped (runStrategy Halted)" in e.consequence


def test_spec_only_change_is_reported_without_domain_change() -> None:
    base = desired(BASE, [rendered("web")])
    spec = {"runStrategy": "Always", "template": {"metadata": {"labels": {"team": "b"}}, "spec": {}}}
    head = desired(HEAD, [rendered("web")], [expanded("web", spec)])
    result = prdiff.compare_desired(base, head)
    e = entry(result, "web")
    assert e.change_class == prdiff.NO_DOMAIN_CHANGE
    assert "+        team: b" in e.spec_diff
    assert result.exit_code == 2


def _it(hash_: str, spec: dict[str, Any]) -> RevisionInfo:
    obj = {
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": "VirtualMachineClusterInstancetype",
        "metadata": {"name": "u1.small"},
        "spec": spec,
    }
    return RevisionInfo("VirtualMachineClusterInstancetype", "u1.small", "", hash_, BASE, json.dumps(obj))


def test_instancetype_change_lists_pinned_and_following_vms() -> None:
    old, new = _it("1" * 64, {"cpu": {"guest": 1}}), _it("2" * 64, {"cpu": {"guest": 2}})
    base = desired(BASE, [rendered("web")], [expanded("web", instancetype=old)])
    head = desired(
        HEAD,
        [rendered("web"), rendered("fresh")],
        [expanded("web", instancetype=old, newer_revisions=(new,)), expanded("fresh", instancetype=new)],
    )
    result = prdiff.compare_desired(base, head)
    assert [e.name for e in result.vms] == ["fresh"]  # web stays on its pinned revision
    (rev,) = result.revisions
    assert (rev.role, rev.name, rev.base_hash, rev.head_hash) == (
        "instancetype",
        "u1.small",
        old.hash,
        new.hash,
    )
    assert [(u.subject, u.pinned) for u in rev.vms] == [("vm/fresh", False), ("vm/web", True)]
    assert "-    guest: 1\n+    guest: 2\n" in rev.spec_diff
    text = prdiff.format_text(result)
    assert "vm/web: pinned to base's revision 111111111111" in text
    assert "vm/fresh: takes the head revision" in text
    assert result.exit_code == 2


def test_instancetype_change_with_only_pinned_vms_still_counts_as_a_change() -> None:
    old, new = _it("1" * 64, {"cpu": {"guest": 1}}), _it("2" * 64, {"cpu": {"guest": 2}})
    base = desired(BASE, [rendered("web")], [expanded("web", instancetype=old)])
    head = desired(HEAD, [rendered("web")], [expanded("web", instancetype=old, newer_revisions=(new,))])
    result = prdiff.compare_desired(base, head)
    assert result.vms == ()
    assert result.exit_code == 2
    assert prdiff.summary_line(result).endswith("1 instancetype/preference change")


def warning(vm: str, message: str) -> Problem:
    return Problem(message, vm=VMKey.from_domain(vm), severity=Severity.WARNING)


def test_head_errors_exit_one_and_base_errors_do_not() -> None:
    web = VMKey.from_domain("web")
    err = Problem(
        "spec.instancetype: VirtualMachineClusterInstancetype u1.huge not found",
        vm=web,
        path="vms/web.yaml",
        line=12,
        column=5,
    )
    base = desired(
        BASE, [rendered("db")], errors=(Problem("broken", path="vms/web.yaml", line=3),), failed=(web,)
    )
    head = desired(HEAD, [rendered("db"), rendered("web")])
    result = prdiff.compare_desired(base, head)
    assert result.exit_code == 2
    assert entry(result, "web").notes == ("did not build at base: compared as new",)
    broken = desired(HEAD, [rendered("db")], errors=(err,), failed=(web,))
    result = prdiff.compare_desired(desired(BASE, [rendered("db"), rendered("web")]), broken)
    assert result.exit_code == 1
    assert result.vms == ()  # a VM that fails at head is never reported deleted
    rec = prdiff.to_json_obj(result)["errors"][0]
    assert (rec["path"], rec["line"], rec["column"]) == ("vms/web.yaml", 12, 5)
    assert rec["message"].startswith("vm/web: spec.instancetype")


@pytest.mark.parametrize(
    ("problem", "text", "where"),
    [
        (Problem("boom", path="a/b.yaml", line=3), "a/b.yaml:3: boom", ("a/b.yaml", 3, None)),
        (
            Problem("boom: with colon", path="a/b.yaml", line=3, column=7),
            "a/b.yaml:3:7: boom: with colon",
            ("a/b.yaml", 3, 7),
        ),
        (
            Problem("missing resource", path="kustomization.yaml"),
            "kustomization.yaml: missing resource",
            ("kustomization.yaml", None, None),
        ),
        (Problem("no location at all"), "no location at all", (None, None, None)),
    ],
)
def test_error_json(problem: Problem, text: str, where: tuple[str | None, int | None, int | None]) -> None:
    result = prdiff.compare_desired(desired(BASE, []), desired(HEAD, [], errors=(problem,)))
    (rec,) = prdiff.to_json_obj(result)["errors"]
    assert (rec["path"], rec["line"], rec["column"]) == where
    assert rec["text"] == text
    assert text.endswith(rec["message"])


def test_hostname_is_shown_and_moves_are_noted() -> None:
    base = desired(BASE, [rendered("web", hostname="h1")])
    head = desired(HEAD, [rendered("web", domain_xml("web", disks=("vda", "vdb")), hostname="h2")])
    result = prdiff.compare_desired(base, head)
    e = entry(result, "web")
    assert e.host == "h2"
    assert len(e.notes) == 1
    assert e.notes[0].startswith("move h1 → h2: stopped gracefully and undefined")
    assert "(changed, live) [Always] on h2" in prdiff.format_text(result)


def test_text_colour_only_when_asked() -> None:
    base = desired(BASE, [rendered("web")])
    head = desired(HEAD, [rendered("web", domain_xml("web", machine="pc-q35-9.0"))])
    result = prdiff.compare_desired(base, head)
    assert "\x1b[" not in prdiff.format_text(result)
    assert "\x1b[33m~ vm/web" in prdiff.format_text(result, color=True)


def test_markdown_escapes_user_text_and_fences_backticks() -> None:
    spec = {
        "runStrategy": "Always",
        "template": {"metadata": {"annotations": {"x": "```<script>|"}}, "spec": {}},
    }
    base = desired(BASE, [rendered("web")])
    head = desired(HEAD, [rendered("web")], [expanded("web", spec)])
    md = prdiff.format_markdown(prdiff.compare_desired(base, head))
    assert "<script>" in md  # inside the fenced diff, which markdown does not interpret
    assert "````diff\n" in md  # the fence is longer than the backtick run in the content
    assert md.count("<details>") == md.count("</details>") == 1


def test_markdown_summary_is_html_escaped_not_markdown_escaped() -> None:
    """GitHub and GitLab read no Markdown inside ``<summary>``: a backslash would show."""
    base = desired(BASE, [])
    head = desired(HEAD, [rendered("prod_worker", hostname="rack<1>")])
    md = prdiff.format_markdown(prdiff.compare_desired(base, head))
    (summary,) = [line for line in md.splitlines() if line.startswith("<summary>")]
    assert "<b>vm/prod_worker</b>" in summary
    assert "\\" not in summary
    assert "on rack&lt;1&gt;</summary>" in summary


def test_markdown_is_capped_with_a_note() -> None:
    names = [f"vm{i:03d}" for i in range(60)]
    base = desired(BASE, [])
    head = desired(HEAD, [rendered(n) for n in names])
    result = prdiff.compare_desired(base, head)
    full = prdiff.format_markdown(result)
    assert full.count("<details>") == 60
    cut = prdiff.format_markdown(result, max_chars=8000)
    assert len(cut) <= 8000
    assert cut.startswith("**reconciler diff**: 60 created, 0 deleted")
    shown = cut.count("<details>")
    assert 0 < shown < 60
    assert cut.count("</details>") == shown
    assert f"{60 - shown} of 60 sections not shown" in cut


def test_json_is_stable_and_complete() -> None:
    base = desired(BASE, [rendered("web"), rendered("old")])
    head = desired(HEAD, [rendered("web", domain_xml("web", machine="pc-q35-9.0")), rendered("new")])
    result = prdiff.compare_desired(base, head, base_ref="main", head_ref="topic", entry="overlays/prod")
    obj = json.loads(prdiff.format_json(result))
    assert list(obj) == [
        "schemaVersion", "base", "head", "entry", "exitCode", "summary", "settings",
        "vms", "revisionChanges", "errors", "baseErrors", "warnings",
    ]  # fmt: skip
    assert obj["base"] == {"ref": "main", "commit": BASE}
    assert obj["summary"]["changedByClass"] == {"restart": 1, "live": 0, "none": 0}
    assert [(v["name"], v["change"], v["changeClass"]) for v in obj["vms"]] == [
        ("new", "created", None),
        ("old", "deleted", None),
        ("web", "changed", "restart"),
    ]
    web = obj["vms"][2]
    assert web["fields"] == [
        {"path": "os/type@machine", "class": "restart", "before": "pc-q35-8.2", "after": "pc-q35-9.0"}
    ]
    assert web["plan"]["action"] == "update"
    assert prdiff.format_json(result) == prdiff.format_json(result)


def test_only_warnings_new_in_head_are_reported() -> None:
    base = desired(
        BASE, [rendered("web")], warnings=(warning("web", "old news"), warning("web", "still here"))
    )
    head = desired(
        HEAD,
        [rendered("web")],
        warnings=(warning("web", "still here"), warning("web", "new"), warning("web", "new")),
    )
    result = prdiff.compare_desired(base, head)
    assert result.warnings == (warning("web", "new"),)
    assert prdiff.to_json_obj(result)["warnings"] == ["vm/web: new"]


def test_markdown_lists_at_most_fifty_errors() -> None:
    errors = tuple(Problem("broken", path=f"vms/vm{i}.yaml", line=i + 1) for i in range(80))
    result = prdiff.compare_desired(desired(BASE, []), desired(HEAD, [], errors=errors))
    md = prdiff.format_markdown(result)
    assert "`vms/vm49.yaml:50: broken`" in md
    assert "vm50.yaml" not in md
    assert "… and 30 more" in md
    assert prdiff.format_text(result).count(": broken") == 80


def test_volume_capacity_changes_are_noted() -> None:
    disk = "/var/lib/reconciler/web-data.qcow2"
    iso = "/var/lib/reconciler/web-cidata.iso"
    old = (VolumeSpec("file", disk, capacity=1024**3), VolumeSpec("cloudinit-iso", iso, content=b"a"))
    new = (VolumeSpec("file", disk, capacity=2 * 1024**3), VolumeSpec("cloudinit-iso", iso, content=b"b"))
    base = desired(BASE, [rendered("web", volumes=old)])
    spec = {"runStrategy": "Always", "template": {"spec": {"volumes": [{"name": "data"}]}}}
    head = desired(HEAD, [rendered("web", volumes=new)], [expanded("web", spec)])
    e = entry(prdiff.compare_desired(base, head), "web")
    assert e.notes == (
        f"volume {disk}: capacity 1Gi -> 2Gi (an existing disk is never resized: "
        "this takes effect only where it is created)",
    )  # the ISO's content is a field of the plan (config/<volume>, tests/unit/test_config_sources.py)


def test_warnings_are_capped_in_text_and_markdown_but_not_json() -> None:
    warnings = tuple(warning("web", f"warning {i}") for i in range(70))
    result = prdiff.compare_desired(
        desired(BASE, [rendered("web")]), desired(HEAD, [rendered("web")], warnings=warnings)
    )
    text = prdiff.format_text(result)
    assert "vm/web: warning 19\n" in text
    assert "vm/web: warning 20\n" not in text
    assert "... and 50 more" in text
    assert "… and 20 more" in prdiff.format_markdown(result)
    assert len(json.loads(prdiff.format_json(result))["warnings"]) == 70


def test_restarts_are_shown_in_their_batches_and_each_vm_still_says_its_change() -> None:
    names = [f"web-{i}" for i in range(5)]
    base = desired(BASE, [rendered(n) for n in names])
    head = desired(
        HEAD, [rendered(n, domain_xml(n, machine="pc-q35-9.0"), rollout=Rollout.RESTART) for n in names]
    )
    d = prdiff.compare_desired(base, head, rollout=Rollout.STAGE)
    assert {e.action for e in d.vms} == {"restart"}  # a restart that waits for its batch is still planned
    text = prdiff.format_text(d)
    assert (
        "restart in 5 batches of 1: web-0, web-1, web-2, web-3, web-4; each waits for Ready (running)" in text
    )
    assert "restart in 5 batches of 1" in prdiff.format_markdown(d)


def test_the_batches_say_the_readiness_probe_each_waits_for() -> None:
    names = [f"web-{i}" for i in range(3)]
    probes = Probes(readiness=Probe(ProbeAction.GUEST_AGENT_PING))
    base = desired(BASE, [rendered(n, probes=probes) for n in names])
    head = desired(
        HEAD,
        [
            rendered(n, domain_xml(n, machine="pc-q35-9.0"), rollout=Rollout.RESTART, probes=probes)
            for n in names
        ],
    )
    d = prdiff.compare_desired(base, head, rollout=Rollout.STAGE)
    said = "restart in 3 batches of 1: web-0, web-1, web-2; each waits for Ready (guestAgentPing)"
    assert said in prdiff.format_text(d)
    assert said in prdiff.format_markdown(d)
