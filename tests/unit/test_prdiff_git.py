"""``reconciler diff`` / ``validate`` end to end on a real git repository (no host).

Covers: one commit per situation, each diffed against its parent through the real
pipeline (overlays, catalog, expand, render, plan): VM added, VM removed, memory
changed within maxGuest, disk added (live), machine type changed (restart),
instancetype edited (pinned VMs listed, a new VM takes the head revision),
preference edited, overlay edited (run strategy), a broken commit (file:line,
exit 1); no change (exit 0); ``instancetypeRevisions: follow`` and ``rollout:
Restart`` from a host config file, a bad host config (file:line); fields equal to
compare/changes.py's on the rendered domains; refs given as revision expressions (HEAD^1);
a rejected host path failing ``validate`` and ``diff``; YAML errors with their
line; golden files for text, markdown and JSON; ``validate`` exit codes; the whole
command in a subprocess where ``import libvirt`` fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import cli, prdiff, render, source
from reconciler.desired import desired_state
from reconciler.model.changes import ChangeClass
from reconciler.settings.host import HostConfig
from tests.helpers.domains import diff_domains
from tests.helpers.files import DATA
from tests.helpers.git import GitRepo
from tests.helpers.manifests import CATALOG, VM_WITH_TYPE

if TYPE_CHECKING:
    from collections.abc import Callable

GOLDEN = DATA / "prdiff"
PROJECT = Path(__file__).resolve().parents[2]
ENTRY = "overlays/prod"


DB = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: db
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        cpu:
          cores: 2
        memory:
          guest: {memory}
          maxGuest: 4Gi
        devices:
          disks:
            - name: root
              disk:
                bus: virtio
{extra_disk}      volumes:
        - name: root
          hostDisk:
            path: /var/lib/libvirt/images/db-root.qcow2
            type: DiskOrCreate
            capacity: 20Gi
{extra_volume}"""

DB_DATA_DISK = """\
            - name: data
              disk:
                bus: virtio
"""
DB_DATA_VOLUME = """\
        - name: data
          hostDisk:
            path: /var/lib/libvirt/images/db-data.qcow2
            type: DiskOrCreate
            capacity: 50Gi
"""

CACHE = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: cache
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        memory:
          guest: 512Mi
        devices: {}
"""

BROKEN = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: broken
spec:
  runStrategy: Always
  instancetype:
    name: u1.huge
  template:
    spec:
      domain:
        devices: {}
"""

PROD = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../base
labels:
  - pairs:
      env: prod
{patches}"""

TOOLS_RUNNING = """\
patches:
  - target:
      kind: VirtualMachine
      name: tools
    patch: |-
      - op: replace
        path: /spec/runStrategy
        value: Always
"""


def base_kustomization(vms: list[str]) -> str:
    lines = [
        "apiVersion: kustomize.config.k8s.io/v1beta1",
        "kind: Kustomization",
        "resources:",
        "  - catalog.yaml",
    ]
    lines += [f"  - vms/{vm}.yaml" for vm in vms]
    return "\n".join(lines) + "\n"


def web(machine: str = "") -> str:
    text = VM_WITH_TYPE.format(name="web", strategy="Always", instancetype="u1.small")
    if machine:
        text = text.replace(
            "      domain:\n", f"      domain:\n        machine:\n          type: {machine}\n"
        )
    return text


# (case, what the commit does) in commit order; each is diffed against its parent.
CASES = (
    "vm-added",
    "vm-removed",
    "memory-within-max",
    "disk-added",
    "machine-type",
    "instancetype-edited",
    "preference-edited",
    "overlay-edited",
    "broken",
)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepo, dict[str, str]]:
    r = GitRepo(tmp_path_factory.mktemp("prdiff") / "repo")
    vms = ["web", "db", "legacy", "tools"]
    r.write("base/catalog.yaml", CATALOG.format(small_memory="1Gi", topology="sockets"))
    r.write("base/vms/web.yaml", web())
    r.write("base/vms/db.yaml", DB.format(memory="2Gi", extra_disk="", extra_volume=""))
    r.write(
        "base/vms/legacy.yaml", VM_WITH_TYPE.format(name="legacy", strategy="Manual", instancetype="u1.small")
    )
    r.write(
        "base/vms/tools.yaml", VM_WITH_TYPE.format(name="tools", strategy="Halted", instancetype="u1.medium")
    )
    r.write("base/kustomization.yaml", base_kustomization(vms))
    r.write("overlays/prod/kustomization.yaml", PROD.format(patches=""))
    commits = {"start": r.commit("start")}

    r.write("base/vms/cache.yaml", CACHE)
    r.write("base/kustomization.yaml", base_kustomization([*vms, "cache"]))
    commits["vm-added"] = r.commit("add cache")

    r.remove("base/vms/cache.yaml")
    r.write("base/kustomization.yaml", base_kustomization(vms))
    commits["vm-removed"] = r.commit("remove cache")

    r.write("base/vms/db.yaml", DB.format(memory="3Gi", extra_disk="", extra_volume=""))
    commits["memory-within-max"] = r.commit("db: 3Gi")

    r.write("base/vms/db.yaml", DB.format(memory="3Gi", extra_disk=DB_DATA_DISK, extra_volume=DB_DATA_VOLUME))
    commits["disk-added"] = r.commit("db: data disk")

    r.write("base/vms/web.yaml", web(machine="pc-q35-8.2"))
    commits["machine-type"] = r.commit("web: machine type")

    r.write("base/catalog.yaml", CATALOG.format(small_memory="2Gi", topology="sockets"))
    r.write("base/vms/api.yaml", VM_WITH_TYPE.format(name="api", strategy="Always", instancetype="u1.small"))
    vms.append("api")
    r.write("base/kustomization.yaml", base_kustomization(vms))
    commits["instancetype-edited"] = r.commit("u1.small: 2Gi; add api")

    r.write("base/catalog.yaml", CATALOG.format(small_memory="2Gi", topology="cores"))
    commits["preference-edited"] = r.commit("fedora: cores")

    r.write("overlays/prod/kustomization.yaml", PROD.format(patches=TOOLS_RUNNING))
    commits["overlay-edited"] = r.commit("prod: tools always on")

    r.write("base/vms/broken.yaml", BROKEN)
    r.write("base/kustomization.yaml", base_kustomization([*vms, "broken"]))
    commits["broken"] = r.commit("broken")
    return r, commits


def parent(case: str) -> str:
    i = CASES.index(case)
    return "start" if i == 0 else CASES[i - 1]


def run_diff(r: GitRepo, base: str, head: str, host: HostConfig | None = None) -> prdiff.PRDiff:
    return prdiff.diff_snapshots(
        source.read_snapshot(r.path, base),
        source.read_snapshot(r.path, head),
        ENTRY,
        host or HostConfig(),
        render.HostCaps.default(),
    )


def scrub(text: str, d: prdiff.PRDiff) -> str:
    """Commit ids change with every run (timestamps): name them instead."""
    for sha, label in ((d.base_commit, "<base>"), (d.head_commit, "<head>")):
        text = text.replace(sha, label).replace(sha[: prdiff.SHORT_SHA], label)
    return text


def by_name(d: prdiff.PRDiff) -> dict[str, prdiff.VMEntry]:
    return {e.name: e for e in d.vms}


@pytest.mark.parametrize("case", CASES)
def test_golden_outputs(
    case: str, repo: tuple[GitRepo, dict[str, str]], golden: Callable[[Path, str], None]
) -> None:
    r, commits = repo
    d = run_diff(r, commits[parent(case)], commits[case])
    golden(GOLDEN / case / "diff.txt", scrub(prdiff.format_text(d), d))
    golden(GOLDEN / case / "diff.md", scrub(prdiff.format_markdown(d), d))
    golden(GOLDEN / case / "diff.json", scrub(prdiff.format_json(d), d))


def test_vm_added_and_removed(repo: tuple[GitRepo, dict[str, str]]) -> None:
    r, c = repo
    added = run_diff(r, c["start"], c["vm-added"])
    assert [(e.name, e.kind) for e in added.vms] == [("cache", prdiff.EntryKind.CREATED)]
    assert added.unchanged == 4
    assert added.exit_code == 2
    removed = run_diff(r, c["vm-added"], c["vm-removed"])
    assert [(e.name, e.kind) for e in removed.vms] == [("cache", prdiff.EntryKind.DELETED)]
    assert "kept on hosts with pruning off" in removed.vms[0].consequence


def test_disk_added_is_live_and_machine_type_is_restart(repo: tuple[GitRepo, dict[str, str]]) -> None:
    r, c = repo
    disk = by_name(run_diff(r, c["memory-within-max"], c["disk-added"]))
    assert list(disk) == ["db"]
    assert disk["db"].change_class == "live"
    assert [(f.path, f.change_class.value) for f in disk["db"].fields] == [("devices/disk[vdb]", "live")]
    assert disk["db"].consequence == "Always VM: applied live (attach disk[vdb]), no restart"
    assert "+          - disk:\n+              bus: virtio\n+            name: data\n" in disk["db"].spec_diff
    machine = by_name(run_diff(r, c["disk-added"], c["machine-type"]))
    assert list(machine) == ["web"]
    assert machine["web"].change_class == "restart"
    assert ("os/type@machine", "restart") in [(f.path, f.change_class.value) for f in machine["web"].fields]
    assert machine["web"].consequence.startswith(
        "Always VM: restart-class change staged, RestartRequired until the next cold boot"
    )


def test_fields_and_classes_are_the_plan_diff_of_the_rendered_domains(
    repo: tuple[GitRepo, dict[str, str]],
) -> None:
    """Memory within maxGuest: whatever compare/changes.py decides per field is what the report says."""
    r, c = repo
    host, caps = HostConfig(), render.HostCaps.default()
    base = desired_state(source.read_snapshot(r.path, c["vm-removed"]), ENTRY, host, caps)
    head = desired_state(source.read_snapshot(r.path, c["memory-within-max"]), ENTRY, host, caps)
    base_xml = {d.name: d.xml for d in base.rendered}
    head_xml = {d.name: d.xml for d in head.rendered}
    d = by_name(run_diff(r, c["vm-removed"], c["memory-within-max"]))
    assert list(d) == ["db"]
    expected = diff_domains(head_xml["db"], base_xml["db"])
    assert "currentMemory" in {f.path for f in expected}
    assert d["db"].fields == expected
    # memory.guest moves within maxGuest: a balloon change, live (DESIGN §5)
    assert all(f.change_class == ChangeClass.LIVE for f in expected), expected
    assert d["db"].change_class == "live"
    assert d["db"].consequence.startswith("Always VM: applied live")


def test_instancetype_edit_lists_every_vm_it_reaches(repo: tuple[GitRepo, dict[str, str]]) -> None:
    r, c = repo
    d = run_diff(r, c["machine-type"], c["instancetype-edited"])
    assert [(e.name, e.kind) for e in d.vms] == [("api", prdiff.EntryKind.CREATED)]  # web, legacy pinned
    (rev,) = d.revisions
    assert (rev.kind, rev.name) == ("VirtualMachineClusterInstancetype", "u1.small")
    assert [(u.subject, u.pinned) for u in rev.vms] == [
        ("vm/api", False),
        ("vm/legacy", True),
        ("vm/web", True),
    ]
    assert "-    guest: 1Gi\n+    guest: 2Gi\n" in rev.spec_diff
    assert d.exit_code == 2


def test_instancetype_edit_with_follow_changes_the_vms(repo: tuple[GitRepo, dict[str, str]]) -> None:
    r, c = repo
    d = run_diff(r, c["machine-type"], c["instancetype-edited"], HostConfig(instancetype_revisions="follow"))
    names = by_name(d)
    assert names["api"].kind == prdiff.EntryKind.CREATED
    assert names["web"].kind == names["legacy"].kind == prdiff.EntryKind.CHANGED
    assert "Manual VM (if running)" in names["legacy"].consequence
    (rev,) = d.revisions
    assert not any(u.pinned for u in rev.vms)
    assert "instancetypeRevisions: follow" in prdiff.format_text(d)


def test_preference_edit_reaches_its_vms_pinned(repo: tuple[GitRepo, dict[str, str]]) -> None:
    r, c = repo
    d = run_diff(r, c["instancetype-edited"], c["preference-edited"])
    assert d.vms == ()
    (rev,) = d.revisions
    assert (rev.role, rev.name) == ("preference", "fedora")
    assert [(u.subject, u.pinned) for u in rev.vms] == [
        ("vm/api", True),
        ("vm/legacy", True),
        ("vm/tools", True),
        ("vm/web", True),
    ]


def test_overlay_edit_starts_the_vm(repo: tuple[GitRepo, dict[str, str]]) -> None:
    r, c = repo
    d = by_name(run_diff(r, c["preference-edited"], c["overlay-edited"]))
    assert list(d) == ["tools"]
    assert d["tools"].run_strategy == "Always"
    assert "will be started (runStrategy Always)" in d["tools"].consequence
    assert "-  runStrategy: Halted\n+  runStrategy: Always\n" in d["tools"].spec_diff


def test_broken_commit_fails_with_file_and_line(repo: tuple[GitRepo, dict[str, str]]) -> None:
    r, c = repo
    d = run_diff(r, c["overlay-edited"], c["broken"])
    assert d.exit_code == 1
    (rec,) = prdiff.to_json_obj(d)["errors"]
    assert rec["path"] == "base/vms/broken.yaml"
    assert rec["line"] > 0
    assert "u1.huge" in rec["message"]


def test_no_change_exits_zero(repo: tuple[GitRepo, dict[str, str]]) -> None:
    r, c = repo
    d = run_diff(r, c["overlay-edited"], c["overlay-edited"])
    assert (d.vms, d.revisions, d.exit_code) == ((), (), 0)
    assert d.unchanged == 5


@pytest.mark.parametrize(
    ("base", "head", "fmt", "code"),
    [
        ("overlay-edited", "overlay-edited", "text", 0),
        ("start", "vm-added", "json", 2),
        ("disk-added", "machine-type", "markdown", 2),
        ("overlay-edited", "broken", "text", 1),
    ],
)
def test_cli_exit_codes(
    repo: tuple[GitRepo, dict[str, str]],
    capsys: pytest.CaptureFixture[str],
    base: str,
    head: str,
    fmt: str,
    code: int,
) -> None:
    r, c = repo
    argv = ["diff", "--repo", str(r.path), "--base", c[base], "--head", c[head], "--path", ENTRY]
    assert cli.main([*argv, "--format", fmt, "--no-color"]) == code
    out = capsys.readouterr().out
    if fmt == "json":
        assert json.loads(out)["exitCode"] == code
    elif fmt == "markdown":
        assert out.startswith("**reconciler diff**: 0 created, 0 deleted, 1 changed (1 restart)")
    else:
        assert out.splitlines()[0].startswith("0 created, 0 deleted, 0 changed")


def test_cli_validate(repo: tuple[GitRepo, dict[str, str]], capsys: pytest.CaptureFixture[str]) -> None:
    r, c = repo
    assert cli.main(["validate", "--repo", str(r.path), "--ref", c["overlay-edited"], "--path", ENTRY]) == 0
    assert "valid, 5 VMs" in capsys.readouterr().out
    assert cli.main(["validate", "--repo", str(r.path), "--ref", c["broken"], "--path", ENTRY]) == 1
    out = capsys.readouterr().out
    assert out.startswith("base/vms/broken.yaml:")
    assert "u1.huge" in out


def test_cli_validate_reports_yaml_errors_with_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = GitRepo(tmp_path / "repo")
    r.write("vms/bad.yaml", "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: [bad\n")
    r.commit("bad yaml")
    assert cli.main(["validate", "--repo", str(r.path)]) == 1
    assert capsys.readouterr().out.startswith("vms/bad.yaml:")


def test_diff_runs_where_libvirt_cannot_be_imported(repo: tuple[GitRepo, dict[str, str]]) -> None:
    r, c = repo
    script = (
        "import sys\n"
        "sys.modules['libvirt'] = None  # any 'import libvirt' now raises ImportError\n"
        "from reconciler.cli import main\n"
        f"code = main(['diff', '--repo', {str(r.path)!r}, '--base', {c['disk-added']!r}, "
        f"'--head', {c['machine-type']!r}, '--path', {ENTRY!r}, '--format', 'json'])\n"
        "assert sys.modules['libvirt'] is None\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=PROJECT, capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    assert json.loads(proc.stdout)["summary"]["changedByClass"]["restart"] == 1


def test_cli_accepts_revision_expressions_as_refs(
    repo: tuple[GitRepo, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    r, _ = repo
    # What the CI examples pass: the merge commit and its first parent.
    argv = [
        "diff",
        "--repo",
        str(r.path),
        "--base",
        "HEAD~2",
        "--head",
        "HEAD^1",
        "--path",
        ENTRY,
        "--no-color",
    ]
    assert cli.main(argv) == 2
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("base HEAD~2 (")
    assert "~ vm/tools (changed, definition unchanged) [Always]" in out


def test_cli_host_config_sets_rollout_and_revision_policy(
    repo: tuple[GitRepo, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r, c = repo
    host = tmp_path / "host.yaml"
    host.write_text("name: hv1\nrollout: Restart\ninstancetypeRevisions: follow\n")
    argv = ["diff", "--repo", str(r.path), "--path", ENTRY, "--host-config", str(host), "--format", "json"]
    assert cli.main([*argv, "--base", c["disk-added"], "--head", c["machine-type"]]) == 2
    (web,) = json.loads(capsys.readouterr().out)["vms"]
    assert (web["name"], web["plan"]["action"]) == ("web", "restart")
    assert web["consequence"] == "Always VM: restart-class change: will be restarted (rollout Restart)"
    assert cli.main([*argv, "--base", c["machine-type"], "--head", c["instancetype-edited"]]) == 2
    obj = json.loads(capsys.readouterr().out)
    assert obj["settings"] == {"instancetypeRevisions": "follow", "rollout": "Restart"}
    assert {v["name"]: v["change"] for v in obj["vms"]} == {
        "api": "created",
        "legacy": "changed",
        "web": "changed",
    }


def test_cli_bad_host_config_is_an_error_with_its_line(
    repo: tuple[GitRepo, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r, c = repo
    host = tmp_path / "host.yaml"
    host.write_text("name: hv1\nrollout: Sometimes\n")
    argv = [
        "diff",
        "--repo",
        str(r.path),
        "--base",
        c["start"],
        "--head",
        c["vm-added"],
        "--host-config",
        str(host),
    ]
    assert cli.main(argv) == 1
    assert f"{host}:2" in capsys.readouterr().err


def test_rejected_host_path_fails_validation_and_the_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = GitRepo(tmp_path / "repo")
    r.write("vms/web.yaml", VM_WITH_TYPE.format(name="web", strategy="Always", instancetype="u1.small"))
    r.write("vms/catalog.yaml", CATALOG.format(small_memory="1Gi", topology="sockets"))
    base = r.commit("web")
    r.write("vms/web.yaml", web().replace("/var/lib/libvirt/images/web-root.qcow2", "/etc/shadow"))
    head = r.commit("attach /etc/shadow")
    assert cli.main(["validate", "--repo", str(r.path), "--ref", head]) == 1
    out = capsys.readouterr().out
    assert out.startswith("vms/web.yaml:")
    assert "/etc/shadow" in out
    assert cli.main(["diff", "--repo", str(r.path), "--base", base, "--head", head, "--format", "json"]) == 1
    obj = json.loads(capsys.readouterr().out)
    assert obj["errors"][0]["path"] == "vms/web.yaml"
    assert obj["vms"] == []  # the VM that fails at head is neither changed nor deleted
