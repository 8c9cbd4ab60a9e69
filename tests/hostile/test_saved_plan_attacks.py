"""Hostile saved plans: a file from ``plan --out`` edited by whoever can write it (a CI
artifact, a shared directory), applied with ``apply FILE`` against ``test:///default``
in-process; and the adoption that needs consent.

Covers:
- an edited ``definition.xml`` (2 GiB instead of 1, emulator ``/bin/sh``, a disk on
  ``/etc/shadow``) is refused naming the VM and the path outside this host's
  ``allowedDirectories``; with the path inside and ``/etc`` added to the host config the
  file carries, the file's host config is not used: refused naming ``allowedDirs``,
  ``memory`` and ``devices/emulator``; nothing is defined;
- a change turned into a delete of an unmanaged domain, its fingerprint dropped: refused,
  the domain still runs; a create renamed to an existing unmanaged running domain:
  refused without ``--yes``, the domain unchanged and unmarked; the owner edited to
  another owner's: refused naming the policy's ``owner``;
- apply's own check at the moment of defining or deleting (``host.apply``): a plan whose
  change deletes, redefines or creates over an unmanaged domain, or redefines or
  restarts one of another owner, fails that change and leaves the domain as it was,
  whatever the plan says;
- the file is read bounded: nested a million levels deep, ``NaN``, ``Infinity``, a
  negative count, a key twice, a change listed twice, an escape sequence in a string
  (``show`` would print it): each one line naming the file, no traceback;
- ``--out`` is written atomically with mode 0600, and a symbolic link at the target is
  refused, its target untouched;
- ``show FILE`` prints the plan as ``plan`` printed it; ``-o json`` as ``plan -o json``;
- an adoption that redefines a running domain (8 GiB to 1 GiB, a disk dropped) is not
  applied without a terminal unless ``--yes``.
"""

from __future__ import annotations

import json
import stat
from typing import TYPE_CHECKING, Any

import pytest

from reconciler import cli
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.domains import drop_domains
from tests.helpers.plans import because

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

URI = "test:///default"
NAMES = ("hostile-plan-a", "hostile-plan-b", "hostile-plan-unmanaged")
VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}{annotations}
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        cpu: {{cores: 1}}
        memory: {{guest: 1Gi}}
        devices: {{}}
"""
UNMANAGED = """<domain type="test">
  <name>{name}</name>
  <memory unit="KiB">8388608</memory>
  <os><type arch="x86_64">hvm</type></os>
  <devices>
    <disk type="file" device="disk"><source file="/var/lib/libvirt/images/{name}.qcow2"/>
      <target dev="vda" bus="virtio"/></disk>
  </devices>
</domain>"""


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as h:
        drop_domains(h, NAMES)
        yield h
        drop_domains(h, NAMES)


def repo_with(git_repo: GitRepo, *names: str, adopt: bool = False) -> None:
    note = '\n  annotations: {reconciler.kubevirt.io/adopt: "true"}' if adopt else ""
    for name in names:
        git_repo.write(f"vms/{name}.yaml", VM.format(name=name, annotations=note))
    git_repo.commit("VMs")


def saved_plan(git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "plan.json"
    assert cli.main(["plan", "--repo", str(git_repo.path), "--connect", URI, "--out", str(out)]) == 2
    capsys.readouterr()
    return out


def edit(path: Path, change: Any) -> None:
    doc = json.loads(path.read_text())
    change(doc["plans"][0])
    path.write_text(json.dumps(doc))


def apply_file(git_repo: GitRepo, path: Path, *more: str) -> int:
    return cli.main(["apply", str(path), "--repo", str(git_repo.path), *more])


def unmanaged(hv: Hypervisor, name: str = "hostile-plan-unmanaged") -> str:
    hv.define(UNMANAGED.format(name=name), name)
    hv.start(name)
    return hv.persistent_xml(name)


def first_change(entry: dict[str, Any]) -> dict[str, Any]:
    change: dict[str, Any] = entry["plan"]["changes"][0]
    return change


# -- the content of a saved plan is verified -------------------------------------------


def test_an_edited_definition_is_refused_naming_what_differs(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_with(git_repo, "hostile-plan-a")
    out = saved_plan(git_repo, tmp_path, capsys)
    evil = out.read_text().replace(
        "<emulator>/usr/bin/qemu-system-x86_64</emulator>",
        '<emulator>/bin/sh</emulator><disk type=\\"file\\" device=\\"disk\\"><source file=\\"/etc/shadow\\"/>'
        '<target dev=\\"vdz\\" bus=\\"virtio\\"/></disk>',
    )
    evil = evil.replace(
        '<memory unit=\\"b\\">1073741824</memory>', '<memory unit=\\"b\\">2147483648</memory>'
    )
    assert "/etc/shadow" in evil
    assert "2147483648" in evil
    out.write_text(evil)
    assert apply_file(git_repo, out, "--yes") == 1
    captured = capsys.readouterr()
    assert "+ memory    1Gi" in captured.out  # what the file shows ...
    assert "vm/hostile-plan-a: /etc/shadow: outside this host's allowedDirectories" in captured.err, (
        captured.err
    )
    assert hv.get_domain("hostile-plan-a") is None  # ... is not what it would define: nothing is

    # The path inside, and the file's host config allowing /etc: that config is not used.
    out.write_text(evil.replace("/etc/shadow", "/var/lib/reconciler/shadow"))
    edit(out, lambda e: e["config"]["allowedDirs"].append("/etc"))
    assert apply_file(git_repo, out, "--yes") == 1
    err = capsys.readouterr().err
    assert "the host config it was planned with is not this host's: allowedDirs differ" in err, err
    assert "vm/hostile-plan-a: its definition is not what revision" in err, err
    for element in ("memory", "devices/emulator", "devices/disk"):
        assert element in err.split("its definition is not what revision")[1], err
    assert hv.get_domain("hostile-plan-a") is None


def test_a_change_made_a_delete_of_an_unmanaged_domain_is_refused(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_with(git_repo, "hostile-plan-a")
    out = saved_plan(git_repo, tmp_path, capsys)
    before = unmanaged(hv)

    def delete(entry: dict[str, Any]) -> None:
        c = first_change(entry)
        c.update(
            subject="vm/hostile-plan-unmanaged", name="hostile-plan-unmanaged", action="delete", start=False
        )
        c["desired"] = c["definition"] = None
        entry["live"] = {}  # its fingerprint dropped

    edit(out, delete)
    assert apply_file(git_repo, out, "--yes") == 1
    err = capsys.readouterr().err
    assert "vm/hostile-plan-unmanaged: the plan's delete is not in what revision" in err, err
    assert "vm/hostile-plan-a: the plan touches it and holds no fingerprint of it" in err, err
    assert hv.state("hostile-plan-unmanaged") == PowerState.RUNNING
    assert hv.persistent_xml("hostile-plan-unmanaged") == before


def test_a_create_renamed_to_an_unmanaged_running_domain_is_refused_without_yes(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_with(git_repo, "hostile-plan-a")
    out = saved_plan(git_repo, tmp_path, capsys)
    before = unmanaged(hv)
    text = out.read_text().replace("hostile-plan-a", "hostile-plan-unmanaged")
    out.write_text(text)
    assert apply_file(git_repo, out) == 1
    err = capsys.readouterr().err
    assert "vm/hostile-plan-unmanaged: a domain of this name was defined since the plan" in err, err
    # Its fingerprint made to match as well: the revision plans no such VM.
    edit(out, lambda e: e["live"].pop("hostile-plan-unmanaged"))
    assert apply_file(git_repo, out) == 1
    err = capsys.readouterr().err
    assert "vm/hostile-plan-unmanaged: the plan's create is not in what revision" in err, err
    d = hv.get_domain("hostile-plan-unmanaged")
    assert d is not None
    assert d.mark is None
    assert d.state == PowerState.RUNNING
    assert d.persistent_xml == before


def test_an_owner_changed_in_the_file_is_refused(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_with(git_repo, "hostile-plan-a")
    out = saved_plan(git_repo, tmp_path, capsys)
    edit(out, lambda e: e["policy"].update(owner="github.com/someone/else#."))
    assert apply_file(git_repo, out, "--yes") == 1
    err = capsys.readouterr().err
    assert "the policy it was planned with is not this host's: owner differ" in err, err
    assert hv.get_domain("hostile-plan-a") is None


def test_a_commit_missing_from_the_repository_is_refused(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_with(git_repo, "hostile-plan-a")
    out = saved_plan(git_repo, tmp_path, capsys)
    edit(out, lambda e: e.update(repo=str(tmp_path / "elsewhere")))  # the file's path is not read
    other = tmp_path / "other"
    other.mkdir()
    assert cli.main(["apply", str(out), "--repo", str(other)]) == 1
    assert hv.get_domain("hostile-plan-a") is None
    assert apply_file(git_repo, out) == 0
    assert hv.get_domain("hostile-plan-a") is not None


# -- apply's own check, whatever the plan says -------------------------------------------


@pytest.mark.parametrize(
    ("action", "other_owner"),
    [("delete", False), ("update", False), ("create", False), ("update", True), ("restart", True)],
)
def test_apply_never_touches_a_domain_it_did_not_plan_to_adopt(
    hv: Hypervisor, action: str, other_owner: bool
) -> None:
    from dataclasses import replace

    from reconciler import ownership
    from reconciler.host.apply import apply_plan
    from reconciler.model.changes import Action, Change, Definition, Plan
    from tests.helpers.plans import REV, rendered

    d = rendered(
        "hostile-plan-unmanaged", UNMANAGED.format(name="hostile-plan-unmanaged").replace("8388608", "1024")
    )
    mark = replace(ownership.mark_for(d, "f" * 40), owner="me")
    before = unmanaged(hv)
    if other_owner:  # marked by another owner
        hv.define(ownership.with_mark(before, replace(mark, owner="someone-else")), "hostile-plan-unmanaged")
        before = hv.persistent_xml("hostile-plan-unmanaged")
    live = hv.get_domain("hostile-plan-unmanaged")
    assert live is not None
    assert (live.mark is not None) == other_owner
    change = Change(
        key=d.key,
        action=Action(action),
        reasons=because("crafted"),
        desired=None if action == "delete" else d,
        live=None if action == "create" else live,
        definition=None if action == "delete" else Definition(d.xml, mark),
    )
    (result,) = apply_plan(Plan(REV, (change,)), hv)
    assert not result.ok
    assert "refused" in result.message
    assert hv.persistent_xml("hostile-plan-unmanaged") == before
    assert hv.state("hostile-plan-unmanaged") == PowerState.RUNNING


# -- the file is read bounded -------------------------------------------------------------


def _deep(text: str) -> str:
    return (
        '{"schemaVersion": 5, "kind": "ReconcilerPlan", "plans": ' + "[" * 1_000_000 + "]" * 1_000_000 + "}"
    )


@pytest.mark.parametrize(
    ("mangle", "words"),
    [
        pytest.param(_deep, "nested more than 64 levels deep", id="million-deep"),
        pytest.param(
            lambda t: json.dumps(_set(json.loads(t), "planMs", "NaN")).replace('"NaN"', "NaN"),
            "NaN is no number of a saved plan",
            id="nan",
        ),
        pytest.param(
            lambda t: json.dumps(_set(json.loads(t), "planMs", "Inf")).replace('"Inf"', "Infinity"),
            "Infinity is no number of a saved plan",
            id="infinity",
        ),
        pytest.param(
            lambda t: json.dumps(_set(json.loads(t), "planMs", -5)),
            "plans[0].planMs: -5 is less than the minimum of 0",
            id="negative-count",
        ),
        pytest.param(
            lambda t: json.dumps(_change(json.loads(t), "restarts", -1)),
            "plans[0].plan.changes[0].restarts: -1 is less than the minimum of 0",
            id="negative-restarts",
        ),
        pytest.param(
            lambda t: t.replace('"drift": false', '"drift": false, "drift": true', 1),
            "key 'drift' given twice in one object",
            id="key-twice",
        ),
        pytest.param(
            lambda t: json.dumps(_set(json.loads(t), "host", "local\x1b[2J\x1b]0;owned\x07host")),
            "a string holds the control character '\\x1b'",
            id="escape-sequence",
        ),
        pytest.param(
            lambda t: json.dumps(_twice(json.loads(t))),
            "vm/hostile-plan-a is listed twice",
            id="change-twice",
        ),
    ],
)
def test_a_malformed_file_is_one_error_naming_it(
    git_repo: GitRepo,
    hv: Hypervisor,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    mangle: Any,
    words: str,
) -> None:
    repo_with(git_repo, "hostile-plan-a")
    out = saved_plan(git_repo, tmp_path, capsys)
    out.write_text(mangle(out.read_text()))
    for command in (["apply", str(out), "--repo", str(git_repo.path), "--yes"], ["show", str(out)]):
        assert cli.main(command) == 1
        err = capsys.readouterr().err
        assert str(out) in err, err
        assert words in err, err
        assert "Traceback" not in err
    assert hv.get_domain("hostile-plan-a") is None


def _set(doc: dict[str, Any], key: str, value: object) -> dict[str, Any]:
    doc["plans"][0][key] = value
    return doc


def _change(doc: dict[str, Any], key: str, value: object) -> dict[str, Any]:
    doc["plans"][0]["plan"]["changes"][0][key] = value
    return doc


def _twice(doc: dict[str, Any]) -> dict[str, Any]:
    changes = doc["plans"][0]["plan"]["changes"]
    changes.append(changes[0])
    return doc


# -- writing the file, showing it -------------------------------------------------------


def test_out_is_written_whole_private_and_never_through_a_link(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_with(git_repo, "hostile-plan-a")
    out = saved_plan(git_repo, tmp_path, capsys)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "repo"]  # no temporary left
    target = tmp_path / "target.txt"
    target.write_text("keep me\n")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    plan = ["plan", "--repo", str(git_repo.path), "--connect", URI]
    assert cli.main([*plan, "--out", str(link)]) == 1
    assert f"{link}: a symbolic link: not written" in capsys.readouterr().err
    assert target.read_text() == "keep me\n"
    assert link.is_symlink()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_show_prints_a_saved_plan_as_plan_printed_it(
    git_repo: GitRepo, hv: Hypervisor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo_with(git_repo, "hostile-plan-a", "hostile-plan-b")
    out = tmp_path / "plan.json"
    plan = ["plan", "--repo", str(git_repo.path), "--connect", URI]
    assert cli.main([*plan, "--out", str(out)]) == 2
    planned = capsys.readouterr().out.split("plan for revision", 1)[1].split("\nSaved the plan", 1)[0]
    assert cli.main(["show", str(out)]) == 2
    shown = capsys.readouterr().out
    assert f"the saved plan {out}" in shown
    assert shown.split("plan for revision", 1)[1].rstrip("\n") == planned.rstrip("\n")
    assert cli.main([*plan, "-o", "json"]) == 2
    as_plan = json.loads(capsys.readouterr().out)
    assert cli.main(["show", str(out), "-o", "json"]) == 2
    as_shown = json.loads(capsys.readouterr().out)
    for doc in (as_plan, as_shown):
        for p in doc["plans"]:
            p.pop("durationMs", None)
            p.pop("plannedAt", None)
    assert as_shown == as_plan


# -- consent for adoption --------------------------------------------------------------


def test_an_adoption_of_a_running_domain_needs_yes_without_a_terminal(
    git_repo: GitRepo, hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    before = unmanaged(hv)
    repo_with(git_repo, "hostile-plan-unmanaged", adopt=True)  # 1Gi, no disk: 8 GiB and a disk before
    assert cli.main(["apply", "--repo", str(git_repo.path), "--connect", URI]) == 1
    err = capsys.readouterr().err
    assert "adopts 1 VM(s): vm/hostile-plan-unmanaged (adopt)" in err, err
    assert "needs --yes" in err
    assert hv.persistent_xml("hostile-plan-unmanaged") == before
    assert hv.state("hostile-plan-unmanaged") == PowerState.RUNNING


# -- a token in the query of source.repo ---------------------------------------------------

QUERY_TOKEN = "glpat-QUERYTOKEN0123456789"


@pytest.mark.parametrize(
    "repo",
    [
        f"https://127.0.0.1:9/group/r.git?private_token={QUERY_TOKEN}",
        f"https://127.0.0.1:9/group/r.git?ref=main&access_token={QUERY_TOKEN}",
        f"https://oauth2:{QUERY_TOKEN}@127.0.0.1:9/group/r.git?password={QUERY_TOKEN}",
    ],
    ids=["private_token", "access_token", "userinfo-and-password"],
)
def test_a_token_in_the_source_url_is_never_shown_logged_or_stored(tmp_path: Path, repo: str) -> None:
    """The daemon's output and JSON log, ``state.json``, ``status`` and ``plan --config``
    name the repository without the token (``run --once`` in a child: it sets up the
    process's logging and signals)."""
    from tests.helpers.bounded import run_cli

    state = tmp_path / "state"
    config = tmp_path / "config.yaml"
    config.write_text(
        f'source: {{repo: "{repo}"}}\nhosts: [{{connect: "test:///default"}}]\nstateDir: {state}\n'
    )
    run = run_cli("run", "--once", "--config", str(config), "--log-format", "json")
    assert run.proc.returncode == 1
    assert "127.0.0.1:9/group/r.git" in run.output
    assert QUERY_TOKEN not in run.output
    stored = "".join(p.read_text(errors="replace") for p in state.rglob("*") if p.is_file())
    assert "r.git" in stored
    assert QUERY_TOKEN not in stored
    for command in (("status", "-o", "json"), ("status",), ("plan",)):
        shown = run_cli(*command, "--config", str(config))
        assert QUERY_TOKEN not in shown.output, shown.output
        assert "Traceback" not in shown.output


def test_the_owner_a_token_url_names_holds_no_token() -> None:
    from reconciler.config import daemon as cfg_mod
    from reconciler.config import targets
    from reconciler.wording import escape

    url = f"https://oauth2:{QUERY_TOKEN}@git.example/group/r.git?private_token={QUERY_TOKEN}&x=1"
    cfg = cfg_mod.DaemonConfig(source=cfg_mod.SourceConfig(repo=url, path="prod"))
    owner, former = targets.owner_of(cfg)
    assert owner == "git.example/group/r#prod"
    assert QUERY_TOKEN not in "".join(former)
    assert escape.url(url) == "https://git.example/group/r.git?private_token=REDACTED&x=1"
    assert QUERY_TOKEN not in escape.log_text(f"fatal: unable to access '{url}': 403")
