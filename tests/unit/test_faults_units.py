"""The pure parts of the daemon's fault handling.

Covers: state-file shape checks and setting a bad file aside (state_store); the last
applied commit rebuilt from ownership marks; rollback decisions under each policy
(rollback); failures grouped by cause with counts (causes); readiness problems
(health); VM metrics that always sum to the number of VMs (metrics); the rollback
policy keys of the config file; crash-loop rows; every VM in git listed by status;
libvirt-python's import failures with their real cause; the daemon's stray output
(uncaught errors, warnings) as JSON log lines; the reason a deferred restart is logged with.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from reconciler.config.daemon import Policy
from reconciler.config.daemon_file import parse_config
from reconciler.daemon import books, health, rollback
from reconciler.daemon.metrics import Metrics
from reconciler.errors import ConfigError
from reconciler.host import connection
from reconciler.model import LiveDomain, OwnershipMark, PowerState, Problem, VMKey
from reconciler.model.changes import Action, Change, Plan
from reconciler.model.results import ApplyResult, Sync, VMStatus
from reconciler.status import live_rows, read_state, vm_statuses
from reconciler.status import state as state_store
from reconciler.wording import problems
from tests.helpers.plans import because
from tests.helpers.records import row

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo

A, B, C = "a" * 40, "b" * 40, "c" * 40


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"last": "x"}, "'last' is str"),
        ({"hosts": "x"}, "'hosts' is str"),
        ({"history": 5}, "'history' is not a list"),
        ({"vms": [1]}, "'vms' is not a list"),
        ({"applied_revision": 7}, "'applied_revision' is int"),
        ({"hosts": {"h": []}}, "'hosts' holds a value"),
        ([1, 2], "top level is list"),
    ],
)
def test_wrong_shapes_are_named(doc: object, problem: str) -> None:
    assert problem in state_store.shape_problem(doc)


def test_a_sound_document_has_no_problem() -> None:
    doc = {"applied_revision": A, "last": {"reason": "Succeeded"}, "history": [{}], "hosts": {"h": {}}}
    assert state_store.shape_problem(doc) == ""


@pytest.mark.parametrize("text", ['{"last": "x"}', '{"history": 5}', '{"applied_rev', "", "[]"])
def test_bad_file_is_set_aside_never_raised(tmp_path: Path, text: str) -> None:
    (tmp_path / "state.json").write_text(text)
    doc, rebuild = state_store.load(tmp_path)
    assert (doc, rebuild) == ({}, True)
    aside = list(tmp_path.glob("state.json.bad-*"))
    assert len(aside) == 1
    assert aside[0].read_text() == text
    assert not (tmp_path / "state.json").exists()
    assert read_state(tmp_path) == {}


def test_sound_file_is_kept(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(json.dumps({"applied_revision": A}))
    assert state_store.load(tmp_path) == ({"applied_revision": A}, False)
    assert state_store.load(tmp_path / "missing") == ({}, True)


def test_status_reads_a_wrong_shaped_file_as_empty_without_moving_it(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text('{"hosts": "x"}')
    assert read_state(tmp_path) == {}
    assert (tmp_path / "state.json").exists()


def live(name: str, commit: str | None) -> LiveDomain:
    mark = OwnershipMark(commit=commit, path=f"vms/{name}.yaml", spec_hash="x") if commit else None
    return LiveDomain(name, "u-" + name, PowerState.SHUTOFF, "<domain/>", mark=mark)


def test_applied_commit_from_marks() -> None:
    assert state_store.applied_from_marks([live("a", A), live("b", B), live("c", B), live("d", None)]) == B
    assert state_store.applied_from_marks([live("d", None)]) == ""


@pytest.mark.parametrize(
    ("descends", "related", "policy", "decision"),
    [
        (True, True, Policy(), None),
        (None, None, Policy(), None),
        (False, True, Policy(), rollback.APPLIED),
        (False, True, Policy(allow_rollback=False), rollback.REFUSED),
        (False, True, Policy(allow_rollback=False, confirm_rollback=B[:12]), rollback.APPLIED),
        (False, True, Policy(allow_rollback=False, confirm_rollback=C[:12]), rollback.REFUSED),
        # A history unrelated to the applied one: refused whatever allowRollback says.
        (False, False, Policy(), rollback.REFUSED),
        (False, False, Policy(confirm_rollback=B[:12]), rollback.APPLIED),
        (False, False, Policy(allow_rollback=False, confirm_rollback=B[:12]), rollback.APPLIED),
    ],
)
def test_rollback_decisions(
    descends: bool | None, related: bool | None, policy: Policy, decision: str | None
) -> None:
    got = rollback.decide(A, B, descends, policy, now=1.0, related=related)
    assert (got.decision if got else None) == decision
    if got is not None and related is False:
        assert "unrelated" in got.message()
    if got is not None and got.refused:
        assert f"confirmRollback: '{B[:12]}'" in got.message()


def test_same_or_unknown_applied_is_no_rollback() -> None:
    assert rollback.decide(A, A, False, Policy(), now=1.0) is None
    assert rollback.decide("", A, False, Policy(), now=1.0) is None


def failed(name: str, message: str) -> ApplyResult:
    key = VMKey.from_domain(name)
    return ApplyResult(key, Action.CREATE, False, message, True, Problem(message, vm=key, transient=True))


def test_one_cause_many_vms_is_one_short_entry() -> None:
    from reconciler.errors import HypervisorUnavailable
    from reconciler.host.apply import failure

    results = [
        failure(
            Change(VMKey.from_domain(f"vm{i}"), Action.CREATE, because("not defined")),
            HypervisorUnavailable(f"define failed: no connection to vm{i}'s host", subject=f"vm/vm{i}"),
            True,
        )
        for i in range(116)
    ]
    assert results[0].message == "create failed: vm/vm0: define failed: no connection to vm0's host"
    text = problems.summarize(results)
    assert text.count(";") == 0
    assert "116 VMs: vm/vm0, vm/vm1, vm/vm2 and 113 more" in text
    assert "create failed: <vm>: define failed: no connection to <vm>'s host" in text
    assert len(text) < 300


def test_distinct_causes_are_kept_apart() -> None:
    assert problems.summarize([failed("a", "x broke"), failed("b", "y broke")]) == "x broke; y broke"
    many = [failed(f"v{i}", f"cause {i % 7}") for i in range(70)]
    text = problems.summarize(many)
    assert "more VMs failed for 2 other causes" in text
    assert len(text) < 2000


def hh(name: str, unreachable: str = "", reason: str = "Succeeded", message: str = "") -> health.HostHealth:
    return health.HostHealth(name, f"qemu+ssh://{name}/system", unreachable, reason, message, A)


def test_readiness_says_why() -> None:
    assert health.readiness([hh("h1"), hh("h2")], "Succeeded", "", False) == (True, [])
    ok, problems = health.readiness(
        [hh("h1", unreachable="connection refused"), hh("h2")], "ApplyFailed", "", False
    )
    assert not ok
    assert problems == ["host h1 unreachable: connection refused", "last reconcile ApplyFailed: "]
    ok, problems = health.readiness(
        [hh("h1", reason="ApplyFailed", message="disk full")], "ApplyFailed", "x", False
    )
    assert problems == ["host h1: last reconcile ApplyFailed: disk full"]
    assert health.readiness([hh("h1")], "SourceFailed", "branch gone", False)[1] == [
        "last reconcile SourceFailed: branch gone"
    ]
    assert health.readiness([], "", "", True) == (False, ["stopping"])


def vm_total(m: Metrics, host: str) -> float:
    return sum(
        s.value
        for fam in m.registry.collect()
        if fam.name == "reconciler_vms"
        for s in fam.samples
        if s.labels["host"] == host
    )


def test_vm_metrics_always_sum_to_the_number_of_vms() -> None:
    m = Metrics()
    m.observe("h", "Succeeded", 0.1, [row("a"), row("b")])
    assert vm_total(m, "h") == 2
    m.observe("h", "ApplyFailed", 0.1, [row("a", sync=Sync.UNKNOWN), row("b", sync=Sync.UNKNOWN)])
    assert vm_total(m, "h") == 2
    m.observe("h", "Succeeded", 0.1, [row("a"), row("b", sync=Sync.ORPHANED)])
    assert vm_total(m, "h") == 2
    m.observe("h", "Succeeded", 0.1, [row("a"), row("b")])
    assert vm_total(m, "h") == 2  # "Orphaned" and "Unknown" are back at 0


def test_rollback_policy_in_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    c = parse_config(
        b"source: {repo: /r}\npolicy: {allowRollback: false, confirmRollback: AbCdEf1}\n", str(path)
    )
    assert (c.policy.allow_rollback, c.policy.confirm_rollback) == (False, "abcdef1")
    assert parse_config(b"source: {repo: /r}\n", str(path)).policy.allow_rollback is True
    with pytest.raises(
        ConfigError, match=r"config.yaml:2:49: policy.confirmRollback: 'HEAD' is not a commit"
    ):
        parse_config(
            b"source: {repo: /r}\npolicy: {allowRollback: false, confirmRollback: HEAD}\n", str(path)
        )


def test_crash_loop_back_off_is_its_own_status() -> None:
    waiting = Change(
        VMKey("default", "a"),
        Action.UNCHANGED,
        because("crash loop back-off: restart 2 in 9s"),
        restarts=1,
        requeue_after_s=9.0,
    )
    rows = vm_statuses(Plan(A, (waiting,)), (), [], "h")
    assert (rows[0].sync, rows[0].message) == ("CrashLoopBackOff", "crash loop back-off: restart 2 in 9s")


def test_status_lists_a_vm_that_never_got_defined() -> None:
    recorded = [
        {
            "subject": "vm/a",
            "name": "a",
            "host": "h",
            "state": "absent",
            "sync": "Failed",
            "message": "define failed",
        },
        {"subject": "vm/b", "name": "b", "host": "h", "state": "deleted", "sync": "Synced"},
    ]
    rows = live_rows(recorded, [], "h")
    assert [(r.name, r.state, r.sync) for r in rows] == [("a", "absent", "Failed")]
    assert isinstance(rows[0], VMStatus)


def test_host_name_for_a_uri() -> None:
    doc = {"hosts": {"web1": {"uri": "qemu+ssh://web1/system"}}}
    assert state_store.host_name_for("qemu+ssh://web1/system", None, doc) == "web1"
    assert state_store.host_name_for("qemu:///system", None, doc) == ""


def test_a_vm_that_does_not_build_is_still_a_row() -> None:
    from reconciler.plan.build import build_plan
    from reconciler.settings.policy import PlanPolicy

    defined = live("old", A)
    plan = build_plan(
        B,
        (),
        [defined],
        PlanPolicy(host="h"),
        (Problem("bad", path="vms/x.yaml", line=3, column=1),),
        (VMKey("default", "old"), VMKey("default", "new")),
    )
    rows = {r.name: r for r in vm_statuses(plan, (), [defined], "h")}
    assert (rows["old"].state, rows["old"].sync, rows["old"].revision) == ("shutoff", "Failed", A[:12])
    assert (rows["new"].state, rows["new"].sync) == ("absent", "Failed")


def test_ancestry_and_signatures_on_a_rollback(tmp_path: Path, git_repo: GitRepo) -> None:
    """A rollback is found by ancestry; signature mode still checks what a rollback brings in."""
    from reconciler.errors import SignatureError
    from reconciler.source.mirror import GitSource
    from reconciler.source.settings import SourceConfig, Verify
    from tests.helpers.signing import ssh_key, ssh_sign_config

    trusted = ssh_key(tmp_path, "trusted")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"ops@example.invalid {(tmp_path / 'trusted.pub').read_text()}")
    ssh_sign_config(git_repo, trusted)
    git_repo.write("a.yaml", "a: 1\n")
    old = git_repo.commit("old")
    git_repo.write("a.yaml", "a: 2\n")
    applied = git_repo.commit("applied")
    src = GitSource(SourceConfig(str(git_repo.path), verify=Verify("ssh", str(allowed))), str(tmp_path / "s"))
    assert src.is_ancestor(old, applied) is True
    assert src.is_ancestor(applied, old) is False  # back to the older commit: a rollback
    assert src.is_ancestor("f" * 40, applied) is None  # unknown: nothing to compare with
    src.verify(applied, old)  # the older head itself is checked (and is signed)
    # A sideways history (force-pushed from the older commit) with an unsigned commit in it.
    git_repo.git("checkout", "-q", "-b", "side", old)
    ssh_sign_config(git_repo, None)
    git_repo.write("a.yaml", "a: 3\n")
    unsigned = git_repo.commit("unsigned")
    ssh_sign_config(git_repo, trusted)
    git_repo.write("a.yaml", "a: 4\n")
    head = git_repo.commit("signed on top")
    assert src.is_ancestor(applied, head) is False
    assert src.commits_to_verify(applied, head) == [head, unsigned]
    with pytest.raises(SignatureError, match=f"commit {unsigned[:12]}") as refused:
        src.verify(applied, head)
    assert books.failed_commit(refused.value) == unsigned[:12]  # state.json's failed_commit: a field
    assert books.failed_commit(SignatureError("commit 0123456789ab: said, not refused by a check")) == ""


@pytest.mark.parametrize(
    "text", ['{"hosts": "x"}', '{"last": "x"}', '{"history": 5}', '{"vms": [1]}', '{"trunc']
)
def test_status_command_never_tracebacks_on_a_bad_state_file(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from reconciler.cli import main

    (tmp_path / "state.json").write_text(text)
    code = main(["status", "--state-dir", str(tmp_path), "--connect", "test:///default"])
    out = capsys.readouterr()
    assert isinstance(code, int)
    assert "Traceback" not in out.err
    assert (tmp_path / "state.json").read_text() == text  # status only reads


def test_a_host_that_left_the_config_leaves_the_metrics() -> None:
    m = Metrics()
    m.observe("gone", "Succeeded", 0.1, [row("a", host="gone")])
    m.hosts_up.labels("gone").set(1)
    m.forget_host("gone")
    assert vm_total(m, "gone") == 0
    text = m.render().decode()
    assert 'reconciler_vms{host="gone"' not in text
    assert 'reconciler_host_up{host="gone"' not in text


def test_libvirt_import_failures_give_their_real_cause() -> None:
    missing = ModuleNotFoundError("No module named 'libvirtmod'", name="libvirtmod")
    assert connection.import_failure(missing).startswith("libvirt-python is not installed")
    limited = ImportError("libvirt.so.0: failed to map segment from shared object")
    assert connection.import_failure(limited) == (
        "libvirt-python cannot be loaded: libvirt.so.0: failed to map segment from shared object"
    )


def test_the_daemons_stray_output_is_json_log_lines() -> None:
    """An uncaught error of a thread and of the main thread and a warning each become one
    JSON log line: nothing else reaches stderr."""
    code = (
        "import threading, warnings\n"
        "from reconciler.log import capture_stray_output, setup_logging\n"
        "setup_logging('json'); capture_stray_output()\n"
        "warnings.warn('careful')\n"
        "t = threading.Thread(target=lambda: 1 / 0, name='worker'); t.start(); t.join()\n"
        "raise RuntimeError('the end')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [e["event"] for e in lines] == ["warning", "uncaught error in a thread", "uncaught error"]
    assert lines[0]["warning"] == "careful"
    assert (lines[1]["thread"], lines[1]["error"]) == ("worker", "ZeroDivisionError: division by zero")
    assert lines[2]["error"] == "RuntimeError: the end"


def test_a_deferred_restart_is_logged_with_its_own_reason() -> None:
    """The loop's "plan again later" names what each wait is for: a restart window or a
    crash-loop back-off, never one for the other."""
    window = Change(
        VMKey.from_domain("web"),
        Action.UNCHANGED,
        because("restart required"),
        requeue_after_s=120.0,
        restart_window="0 2 * * 6; 2h",
    )
    crashed = Change(
        VMKey.from_domain("db"), Action.UNCHANGED, because("crash loop back-off"), requeue_after_s=40.0
    )
    plan = Plan(revision=A, changes=(window, crashed))
    assert books.requeue_waits([plan, None]) == [
        (120.0, "vm/web: restart window 0 2 * * 6; 2h"),
        (40.0, "vm/db: crash-loop back-off"),
    ]
