"""`reconciler run` as a real subprocess against test:///default (its own driver state).

Covers: running with flags only (no config file); a commit to a local repository
picked up by the refs watcher and applied (generous hang guard, no timing
assertion); a bad commit applying nothing and keeping the last applied revision,
the next good one applying; state.json (revisions kept apart, per-VM rows, history);
sd_notify READY / STATUS / WATCHDOG read from a real unix datagram socket;
/healthz and /metrics; SIGHUP with a good config (applied) and a broken one (kept), and one sent the moment the
process first catches it (a reload, not a death);
SIGTERM in the middle of an apply (the action in flight finishes, the rest is left,
exit 0); `reconciler status` and `--output json` from the state file; `--once`.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.helpers.daemon import BIN, HANG_GUARD_S, Daemon, vm_rows, wait_for
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.helpers.git import GitRepo

pytestmark = [pytest.mark.libvirt_test, pytest.mark.timeout(120)]


def flags(repo: GitRepo, *extra: str) -> list[str]:
    return ["--repo", str(repo.path), "--connect", "test:///default", "--listen", "127.0.0.1:0", *extra]


# -- tests ------------------------------------------------------------------------------


def test_commit_to_local_repository_is_applied(git_repo: GitRepo, start: Callable[..., Daemon]) -> None:
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    first = git_repo.commit("web")
    d = start(*flags(git_repo))
    state = d.wait_applied(first)
    assert vm_rows(state)["web"]["sync"] == "Synced"
    assert vm_rows(state)["web"]["state"] == "running"
    git_repo.write("vms/db.yaml", vm_yaml("db", strategy="Halted"))
    second = git_repo.commit("db")
    state = d.wait_applied(second)  # picked up by the refs watcher: no fetch interval, no resync
    rows = vm_rows(state)
    assert rows["db"]["sync"] == "Synced"
    assert rows["db"]["state"] == "shutoff"
    assert rows["db"]["revision"] == second[:12]
    assert [h["revision"] for h in state["history"][:2]] == [second, first]
    assert all(h["result"] == "Succeeded" for h in state["history"][:2])
    assert d.stop() == 0
    assert any(e.get("revision") == second[:12] for e in d.events("reconciled"))


def test_bad_commit_keeps_the_last_good_state(git_repo: GitRepo, start: Callable[..., Daemon]) -> None:
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    good = git_repo.commit("good")
    d = start(*flags(git_repo))
    d.wait_applied(good)
    git_repo.write("vms/web.yaml", vm_yaml("web", memory="128Mi"))
    git_repo.write(
        "vms/broken.yaml", "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: [x\n"
    )
    bad = git_repo.commit("bad")
    state = d.wait_attempted(bad)
    assert state["applied_revision"] == good
    assert state["reason"] == "BuildFailed"
    assert re.search(r"vms/broken\.yaml:\d+(:\d+)?: ", state["message"]), state["message"]
    assert state["history"][0]["applied"] is False
    assert vm_rows(state)["web"]["revision"] == good[:12]  # untouched
    git_repo.remove("vms/broken.yaml")
    fixed = git_repo.commit("fixed")
    state = d.wait_applied(fixed)
    assert state["reason"] == "Succeeded"
    assert vm_rows(state)["web"]["revision"] == fixed[:12]


def test_sd_notify_ready_status_watchdog(git_repo: GitRepo, start: Callable[..., Daemon]) -> None:
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    sha = git_repo.commit()
    d = start(*flags(git_repo), env={"WATCHDOG_USEC": "400000"})
    wait_for("READY=1", lambda: d.notify.has("READY=1"))
    d.wait_applied(sha)
    status = wait_for(
        "STATUS with the applied revision", lambda: [s for s in d.notify.has("STATUS=") if sha[:12] in s]
    )
    assert re.search(r"1 VMs, 1 synced, 0 failed", status[-1]), status
    wait_for("two watchdog pings", lambda: len(d.notify.has("WATCHDOG=1")) >= 2)
    assert d.stop() == 0
    assert d.notify.has("STOPPING=1")


def test_healthz_and_metrics(git_repo: GitRepo, start: Callable[..., Daemon]) -> None:
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    git_repo.write("vms/db.yaml", vm_yaml("db"))
    sha = git_repo.commit()
    d = start(*flags(git_repo))
    d.wait_applied(sha)
    code, body = d.get("/healthz")
    assert code == 200
    health = json.loads(body)
    assert health["status"] == "ok"
    assert health["applied_revision"] == sha
    code, text = d.get("/metrics")
    assert code == 200
    assert re.search(
        r'^reconciler_reconciles_total\{host="localhost",result="Succeeded"\} [1-9]', text, re.M
    ), text
    assert re.search(r'^reconciler_vms\{host="localhost",sync="Synced"\} 2\.0$', text, re.M)
    assert re.search(r"^reconciler_reconcile_duration_seconds_count\{host=\"localhost\"\} [1-9]", text, re.M)
    ts = re.search(r"^reconciler_last_applied_revision_timestamp_seconds (\S+)$", text, re.M)
    assert ts is not None
    assert float(ts.group(1)) == float(git_repo.git("log", "-1", "--format=%ct"))
    assert d.get("/nope")[0] == 404


def write_config(path: Path, repo: Path, entry: str, extra: str = "") -> None:
    path.write_text(
        f"source:\n  repo: {repo}\n  path: {entry}\nconnect: test:///default\nlisten: 127.0.0.1:0\n{extra}"
    )


def test_sighup_reloads_a_good_config_and_keeps_the_old_on_a_broken_one(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon]
) -> None:
    git_repo.write("env-a/web.yaml", vm_yaml("web"))
    git_repo.write("env-b/api.yaml", vm_yaml("api"))
    sha = git_repo.commit()
    config = tmp_path / "config.yaml"
    write_config(config, git_repo.path, "env-a")
    d = start("--config", str(config))
    state = d.wait_applied(sha)
    assert set(vm_rows(state)) == {"web"}
    # A good config: the new entry path is applied (pruning is off: web stays, unmanaged by git now).
    write_config(config, git_repo.path, "env-b")
    d.signal(signal.SIGHUP)
    wait_for("api after reload", lambda: "api" in vm_rows(d.state()))
    assert d.events("configuration reloaded")
    # A broken config: an error naming file and line, the old config stays in force.
    config.write_text(config.read_text() + "polcy:\n  prune: true\n")
    d.signal(signal.SIGHUP)
    failed = wait_for("reload failure", lambda: d.events("reload failed: keeping the current configuration"))
    assert f"{config}:6:1: config: unknown key 'polcy'" in failed[0]["error"]
    assert d.proc.poll() is None
    git_repo.write("env-b/api.yaml", vm_yaml("api", memory="96Mi"))
    later = git_repo.commit("still watched with the old config")
    state = d.wait_applied(later)
    assert vm_rows(state)["api"]["revision"] == later[:12]
    assert d.notify.has("RELOADING=1")
    assert d.stop() == 0


def test_sigterm_during_apply_finishes_the_call_in_flight(
    git_repo: GitRepo, start: Callable[..., Daemon]
) -> None:
    git_repo.write("vms/seed.yaml", vm_yaml("seed"))
    first = git_repo.commit()
    d = start(*flags(git_repo))
    d.wait_applied(first)
    for i in range(300):
        git_repo.write(f"vms/vm-{i:03d}.yaml", vm_yaml(f"vm-{i:03d}"))
    many = git_repo.commit("300 VMs")
    wait_for(
        "the first create of the new revision",
        lambda: [e for e in d.events("created") if e.get("revision") == many],
    )
    d.signal(signal.SIGTERM)
    assert d.proc.wait(timeout=HANG_GUARD_S) == 0
    state = d.state()
    assert state["attempted_revision"] == many
    assert state["applied_revision"] == first  # not fully applied
    results = state["last"]["results"]
    interrupted = [r for r in results if r["message"] == "interrupted before this change"]
    done = [r for r in results if r["ok"] and r["action"] == "create"]
    assert interrupted, "SIGTERM arrived after the apply finished"
    assert done
    assert all(r["ok"] or r["message"] == "interrupted before this change" for r in results)
    # The state message says it once and names the VMs, not once per VM.
    assert state["last"]["message"].count("interrupted before this change") == 1
    if len(interrupted) > 1:
        assert f"({len(interrupted)} VMs: " in state["last"]["message"]
    assert d.events("stopped")


def test_status_command_reads_the_state_file(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon]
) -> None:
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    sha = git_repo.commit()
    d = start(*flags(git_repo))
    d.wait_applied(sha)
    assert d.stop() == 0
    # test:///default in a new process is empty: rows come from the state file, shown as absent.
    proc = subprocess.run(
        [str(BIN), "status", "--state-dir", str(tmp_path / "state"), "--output", "json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    out = json.loads(proc.stdout)
    assert out["schemaVersion"] == 1
    assert out["appliedRevision"] == sha
    assert out["hosts"]["localhost"]["uri"] == "test:///default"
    # The VM is in git and its domain is gone (a new process's test driver): never "Synced".
    assert [(v["name"], v["state"], v["sync"], v["revision"]) for v in out["vms"]] == [
        ("web", "absent", "OutOfSync", sha[:12])
    ]
    assert out["vms"][0]["appliedAt"] > 0
    assert out["history"][0]["revision"] == sha
    table = subprocess.run(
        [str(BIN), "status", "--state-dir", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = table.splitlines()
    assert lines[0] == "status: host localhost at test:///default"
    assert lines[2].split() == [
        "NAME",
        "HOST",
        "STRATEGY",
        "STATE",
        "READY",
        "SYNC",
        "REVISION",
        "APPLIED",
        "AGE",
        "RESTART",
        "MESSAGE",
    ]
    row = rf"^web\s+localhost\s+Always\s+absent\s+-\s+OutOfSync\s+{sha[:12]}\s+\d{{4}}-\d\d-\d\dT\d\d:\d\dZ\s+\d+[smhd]\s"
    assert re.search(row, table, re.M), table
    assert "not defined on this host" in table
    assert f"last applied {sha[:12]} at " in table


def test_once_applies_and_exits(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    sha = git_repo.commit()
    state_dir = tmp_path / "once"
    proc = subprocess.run(
        [str(BIN), "run", "--once", *flags(git_repo), "--state-dir", str(state_dir)],
        capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "vm/web: create" in proc.stdout
    assert json.loads((state_dir / "state.json").read_text())["applied_revision"] == sha
    git_repo.write(
        "vms/web.yaml", "kind: VirtualMachine\napiVersion: kubevirt.io/v1\nmetadata: {name: web}\nspec: 3\n"
    )
    git_repo.commit("bad")
    proc = subprocess.run(
        [str(BIN), "run", "--once", *flags(git_repo), "--state-dir", str(state_dir)],
        capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert json.loads((state_dir / "state.json").read_text())["applied_revision"] == sha
    # ``status`` says the host is BuildFailed, and exits non-zero for it
    proc = subprocess.run(
        [str(BIN), "status", "--state-dir", str(state_dir), "--connect", "test:///default"],
        capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout
    assert "BuildFailed" in proc.stdout


def test_missing_repository_flag_and_config_is_an_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(BIN), "run", "--config", str(tmp_path / "absent.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert "config file not found" in proc.stderr


def test_show_plans_prints_each_plan_that_changes_something_and_the_table(
    git_repo: GitRepo, tmp_path: Path
) -> None:
    """What `make demo` shows: the applied plan and the VM table, again after each commit."""
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    git_repo.commit("web")
    out_path = tmp_path / "stdout.txt"
    with out_path.open("w") as out:
        proc = subprocess.Popen(
            [str(BIN), "run", "--state-dir", str(tmp_path / "state"), *flags(git_repo), "--show-plans"],
            stdout=out,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for("the first plan", lambda: "vm/web: create" in out_path.read_text())
            wait_for("the VM table", lambda: "SYNC" in out_path.read_text())
            git_repo.write("vms/web.yaml", vm_yaml("web", memory="128Mi"))
            second = git_repo.commit("web: more memory")
            wait_for("the second plan", lambda: f"plan for revision {second[:12]}" in out_path.read_text())
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=HANG_GUARD_S)
    text = out_path.read_text()
    after = text.split(f"plan for revision {second[:12]}", 1)[1]
    assert "vm/web: update" in after
    assert "memory" in after
    assert text.count("plan for revision") == 2  # no-op reconciles print nothing


def _catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (its SigCgt mask in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(caught & (1 << (sig - 1)))


def test_a_sighup_at_the_first_instant_it_can_be_caught_is_a_reload(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon]
) -> None:
    """SIGHUP sent the moment the process first catches it (``daemon.early``, its first
    import) neither kills the daemon nor is lost: it is acted on as a reload once the
    daemon runs (``test_early_signals_are_kept_from_the_first_import`` pins the early
    part itself)."""
    git_repo.write("env-a/web.yaml", vm_yaml("web"))
    sha = git_repo.commit()
    config = tmp_path / "config.yaml"
    write_config(config, git_repo.path, "env-a")
    d = start("--config", str(config))
    wait_for("SIGHUP caught", lambda: _catches(d.proc.pid, signal.SIGHUP) or d.proc.poll() is not None)
    d.signal(signal.SIGHUP)
    d.wait_applied(sha)
    wait_for("the reload", lambda: d.events("configuration reloaded"))
    assert d.proc.poll() is None
    assert d.stop() == 0


def test_early_signals_are_kept_from_the_first_import() -> None:
    """``reconciler run``: importing the CLI package catches SIGHUP and SIGTERM (a process
    sending them to itself lives on) and keeps them, in order, for the daemon to replay;
    another command keeps the default actions."""
    code = (
        "import os, signal, reconciler.cli\n"
        "from reconciler.daemon import early\n"
        "os.kill(os.getpid(), signal.SIGHUP); os.kill(os.getpid(), signal.SIGTERM)\n"
        "handler = signal.getsignal(signal.SIGHUP)\n"
        "print(early.pending(handler), early.pending(handler))\n"
    )
    python = BIN.parent / "python"
    kept = subprocess.run([str(python), "-c", code, "run"], capture_output=True, text=True, check=False)
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.split() == [f"[{int(signal.SIGHUP)},", f"{int(signal.SIGTERM)}]", "[]"]
    other = subprocess.run([str(python), "-c", code, "plan"], capture_output=True, text=True, check=False)
    assert other.returncode == -signal.SIGHUP
