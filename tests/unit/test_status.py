"""State file and status rows (reconciler/status/), webhook authentication, sd_notify.

Covers: state.json keeps last attempted and last applied revisions apart across a
failed reconcile, and when the applied one was applied (not moved by a resync), records per-host outcomes and the failing commit, keeps a bounded
history (revision, result, duration), is replaced atomically (no temp file left, an
unreadable old file is not fatal); `reconciler status` rows merged from libvirt and
the state file (managed, unmanaged with --all, recorded but absent, unreachable
host); the summary lines; webhook signatures (GitHub/Gitea HMAC, GitLab token,
missing, malformed, wrong, no secret configured); sd_notify datagrams on a real
socket, abstract addresses, the watchdog period, and silence without NOTIFY_SOCKET.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
from typing import TYPE_CHECKING, Any

import pytest

from reconciler.daemon.http import signature_ok
from reconciler.daemon.notify import Notifier
from reconciler.model import LiveDomain, OwnershipMark, PowerState
from reconciler.model.results import Reason, ReconcileStatus, Sync
from reconciler.status import HISTORY, live_rows, read_state, row_document, summary_lines, write_state
from tests.helpers.records import row

if TYPE_CHECKING:
    from pathlib import Path

A, B, C = "a" * 40, "b" * 40, "c" * 40


def status(reason: Reason, attempted: str, applied: str, **kw: object) -> ReconcileStatus:
    return ReconcileStatus(reason, attempted, applied, 1000.0, 12, **kw)  # type: ignore[arg-type]


def test_attempted_and_applied_are_kept_apart(tmp_path: Path) -> None:
    write_state(tmp_path, status(Reason.SUCCEEDED, A, A, vms=(row("web"),)))
    write_state(
        tmp_path,
        status(
            Reason.SOURCE_FAILED, B, "", message="commit bbbb: no signature",
            failed_commit=B[:12], hosts={"h1": {"uri": "test:///default"}},
        ),
    )  # fmt: skip
    state = read_state(tmp_path)
    assert state["attempted_revision"] == B
    assert state["applied_revision"] == A
    assert state["reason"] == "SourceFailed"
    assert state["failed_commit"] == B[:12]
    assert state["hosts"]["h1"]["uri"] == "test:///default"
    assert [(h["revision"], h["result"], h["applied"]) for h in state["history"]] == [
        (B, "SourceFailed", False),
        (A, "Succeeded", True),
    ]
    assert state["history"][0]["duration_ms"] == 12
    write_state(tmp_path, status(Reason.SUCCEEDED, C, C))
    state = read_state(tmp_path)
    assert (state["attempted_revision"], state["applied_revision"]) == (C, C)
    assert "failed_commit" not in state


def test_applied_at_is_when_the_revision_was_applied(tmp_path: Path) -> None:
    """A resync of the applied revision does not move ``applied_at``; a new one does."""
    write_state(tmp_path, ReconcileStatus(Reason.SUCCEEDED, A, A, 1000.0, 12))
    write_state(tmp_path, ReconcileStatus(Reason.SUCCEEDED, A, A, 1600.0, 12))  # a resync
    assert read_state(tmp_path)["applied_at"] == 1000.0
    write_state(tmp_path, ReconcileStatus(Reason.SUCCEEDED, B, B, 2200.0, 12))
    assert read_state(tmp_path)["applied_at"] == 2200.0


def test_history_is_bounded_and_the_write_is_atomic(tmp_path: Path) -> None:
    for i in range(HISTORY + 5):
        write_state(tmp_path, status(Reason.SUCCEEDED, f"{i:040d}", f"{i:040d}"))
    state = read_state(tmp_path)
    assert len(state["history"]) == HISTORY
    assert state["history"][0]["revision"] == f"{HISTORY + 4:040d}"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temp file left behind
    json.loads((tmp_path / "state.json").read_text())


def test_a_corrupt_state_file_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    assert read_state(tmp_path) == {}
    write_state(tmp_path, status(Reason.SUCCEEDED, A, A))
    assert read_state(tmp_path)["applied_revision"] == A


def live(name: str, managed: bool = True, state: PowerState = PowerState.RUNNING) -> LiveDomain:
    mark = (
        OwnershipMark(commit=C, path=f"vms/{name}.yaml", spec_hash="x", run_strategy="Always")
        if managed
        else None
    )
    return LiveDomain(name, "uuid-" + name, state, "<domain/>", mark=mark)


def test_live_rows_merge_libvirt_and_the_state_file() -> None:
    recorded: list[dict[str, Any]] = [
        {"name": "web", "host": "h1", "sync": "Synced", "message": "", "restart_required": True},
        {"name": "gone", "host": "h1", "sync": "Synced", "run_strategy": "Always", "revision": A[:12]},
        {"name": "other", "host": "h2", "sync": "Failed"},
    ]
    rows = live_rows(
        recorded, [live("web"), live("db", state=PowerState.SHUTOFF), live("manual", managed=False)], "h1"
    )
    by = {r.name: r for r in rows}
    assert set(by) == {"web", "db", "gone"}
    assert (by["web"].sync, by["web"].restart_required, by["web"].revision) == ("Synced", True, C[:12])
    assert (by["db"].state, by["db"].sync) == ("shutoff", "Unknown")
    assert (by["gone"].state, by["gone"].revision) == ("absent", A[:12])
    everything = {
        r.name: r for r in live_rows(recorded, [live("manual", managed=False)], "h1", include_unmanaged=True)
    }
    assert everything["manual"].sync == "Unmanaged"


def test_a_recorded_sync_is_one_of_the_states_or_the_default() -> None:
    recorded: list[dict[str, Any]] = [
        {"name": "web", "host": "h1", "sync": "CrashLoopBackOff", "revision": C[:12]},
        {"name": "db", "host": "h1", "sync": "Bogus", "revision": C[:12]},  # a state file edited by hand
    ]
    by = {r.name: r for r in live_rows(recorded, [live("web"), live("db")], "h1")}
    assert (by["web"].sync, by["db"].sync) == (Sync.CRASH_LOOP, Sync.UNKNOWN)
    assert json.dumps([row_document(by["web"])["sync"]]) == '["CrashLoopBackOff"]'  # state.json: the word
    assert Sync.recorded(None, Sync.UNMANAGED) is Sync.UNMANAGED
    assert Sync.recorded("Synced", Sync.UNKNOWN) is Sync.SYNCED


def test_another_owners_domains_are_shown_only_with_all() -> None:
    from dataclasses import replace

    theirs = live("theirs")
    assert theirs.mark is not None
    theirs = replace(theirs, mark=replace(theirs.mark, owner="/srv/other#."))
    ours = live("ours")
    assert ours.mark is not None
    ours = replace(ours, mark=replace(ours.mark, owner="/srv/vms#."))
    assert [r.name for r in live_rows([], [theirs, ours], "h1", owner="/srv/vms#.")] == ["ours"]
    shown = live_rows([], [theirs, ours], "h1", include_unmanaged=True, owner="/srv/vms#.")
    assert [r.name for r in shown] == ["ours", "theirs"]


def test_equal_outcomes_fold_into_one_history_entry(tmp_path: Path) -> None:
    """A resync every 30 s that changes nothing keeps one entry, counted, so the history
    still reaches back to the last real change."""
    write_state(tmp_path, status(Reason.SUCCEEDED, A, A))
    for _ in range(HISTORY * 2):
        write_state(tmp_path, status(Reason.SUCCEEDED, C, C))
    history = read_state(tmp_path)["history"]
    assert [(e["revision"], e.get("count", 1)) for e in history] == [(C, HISTORY * 2), (A, 1)]


def test_live_rows_of_an_unreachable_host() -> None:
    recorded = [{"name": "web", "host": "h1", "sync": "Synced", "revision": A[:12]}]
    (r,) = live_rows(recorded, None, "h1")
    assert (r.state, r.sync, r.message) == ("unknown", "Unknown", "host unreachable")


def test_summary_lines() -> None:
    state = {
        "attempted_revision": B,
        "applied_revision": A,
        "reason": "BuildFailed",
        "message": "vms/web.yaml:3:1: bad",
        "hosts": {"h2": {"uri": "qemu+ssh://h2/system", "reason": "ApplyFailed", "message": "down"}},
    }
    assert summary_lines(state) == [
        f"last attempted {B[:12]} (BuildFailed), last applied {A[:12]}",
        "message: vms/web.yaml:3:1: bad",
        "host h2 (qemu+ssh://h2/system): ApplyFailed: down",
    ]
    assert summary_lines({}) == []


# -- webhook ------------------------------------------------------------------------------

SECRET = b"It's a Secret to Everybody"
BODY = b"Hello, World!"
# The example from GitHub's documentation of X-Hub-Signature-256.
GITHUB_DOC_SIG = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


@pytest.mark.parametrize(
    ("headers", "ok", "why"),
    [
        ({"X-Hub-Signature-256": GITHUB_DOC_SIG}, True, "hmac-sha256"),
        ({"X-Hub-Signature-256": GITHUB_DOC_SIG.upper().replace("SHA256=", "sha256=")}, True, "hmac-sha256"),
        ({"X-Hub-Signature-256": "sha256=" + "0" * 64}, False, "bad signature"),
        ({"X-Hub-Signature-256": "sha1=abc"}, False, "malformed X-Hub-Signature-256"),
        ({"X-Hub-Signature-256": "sha256="}, False, "malformed X-Hub-Signature-256"),
        ({"X-Gitlab-Token": SECRET.decode()}, True, "gitlab-token"),
        ({"X-Gitlab-Token": "nope"}, False, "bad token"),
        ({}, False, "missing signature"),
    ],
)
def test_webhook_signature(headers: dict[str, str], ok: bool, why: str) -> None:
    assert signature_ok(SECRET, BODY, headers) == (ok, why)


def test_webhook_signature_is_over_the_exact_body() -> None:
    sig = "sha256=" + hmac.new(SECRET, BODY + b"\n", hashlib.sha256).hexdigest()
    assert signature_ok(SECRET, BODY, {"X-Hub-Signature-256": sig}) == (False, "bad signature")


def test_webhook_without_a_secret_rejects_everything() -> None:
    assert signature_ok(b"", BODY, {"X-Hub-Signature-256": GITHUB_DOC_SIG})[0] is False


# -- sd_notify ----------------------------------------------------------------------------


def receiver(address: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(address)
    s.settimeout(5)
    return s


def test_notify_sends_datagrams(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    sock = receiver(path)
    n = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"})
    assert n.watchdog_interval_s == 1.0
    n.ready("applied abc")
    assert sock.recv(4096) == b"READY=1\nSTATUS=applied abc"
    n.watchdog(100.0)
    assert sock.recv(4096) == b"WATCHDOG=1"
    n.watchdog(100.2)  # too soon: not sent again
    n.status("x")
    assert sock.recv(4096) == b"STATUS=x"
    n.watchdog(100.5)  # half the ping interval passed
    assert sock.recv(4096) == b"WATCHDOG=1"
    n.close()
    sock.close()


def test_notify_abstract_socket() -> None:
    name = f"reconciler-test-{id(object())}"
    sock = receiver("\0" + name)
    n = Notifier({"NOTIFY_SOCKET": "@" + name})
    n.stopping()
    assert sock.recv(4096) == b"STOPPING=1"
    n.close()
    sock.close()


def test_notify_is_silent_without_systemd() -> None:
    n = Notifier({})
    assert not n.enabled
    assert n.send("READY=1") is False
    assert n.watchdog_interval_s is None
    assert (
        Notifier({"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"}).watchdog_interval_s
        is None
    )
