"""Issue item 6: no noise, no wrong numbers.

- a crash-looping VM shows ``CrashLoopBackOff`` (status and ``reconciler_vms``), not "Synced":
  in ``test_clock_faults.py``, whose crash loop shows it;
- a VM in git that never got defined is listed by ``reconciler status``;
- the back-off of a failing source holds for the fetch timer too (a deleted branch is
  not fetched and logged at every fetch interval);
- a reload whose ``listen`` cannot be bound keeps the old listener;
- ``status --connect URI`` labels rows with the configured host name.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import uuid
from datetime import datetime
from typing import TYPE_CHECKING

import pytest

from reconciler.model import PowerState
from tests.helpers.daemon import Daemon, wait_for
from tests.helpers.faults import HOST, URI, config, name, state_of, status_json, vm

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)


def test_vm_that_never_got_defined_is_in_status(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    squatter, dom, ok = name("uuid-squatter"), name("uuid-clash"), name("uuid-fine")
    own_domains += [squatter, dom, ok]
    the_uuid = str(uuid.uuid4())
    xml = tmp_path / "squatter.xml"
    xml.write_text(
        f"<domain type='qemu'><name>{squatter}</name><uuid>{the_uuid}</uuid><memory>65536</memory>"
        "<os><type>hvm</type></os></domain>"
    )
    subprocess.run(["virsh", "-c", URI, "define", str(xml)], check=True, capture_output=True)
    # libvirt refuses a second domain with the squatter's UUID: this VM is never defined.
    git_repo.write(
        "vms/a.yaml",
        vm(dom, strategy="Halted", extra_domain=f"        firmware:\n          uuid: {the_uuid}\n"),
    )
    git_repo.write("vms/b.yaml", vm(ok, strategy="Halted"))
    sha = git_repo.commit()
    cfg = config(tmp_path, str(git_repo.path), extra="intervals: {resync: 1h}\n")
    d = start("--config", str(cfg))
    state = d.wait_attempted(sha)
    assert state["reason"] == "ApplyFailed"
    assert state_of(dom) is None
    assert state_of(ok) == PowerState.SHUTOFF
    shown = status_json("--config", str(cfg), "--state-dir", str(d.state_dir))
    rows = {v["name"]: v for v in shown["vms"]}
    assert rows[dom]["state"] == "absent", rows.get(dom)
    assert rows[dom]["sync"] == "Failed", rows.get(dom)
    assert rows[ok]["sync"] == "Synced"
    # A VM whose document does not build is listed too (nothing of that revision applies).
    broken = name("uuid-broken")
    git_repo.write("vms/c.yaml", vm(broken, strategy="Halted", memory="lots"))
    bad = git_repo.commit("broken")
    state = d.wait_attempted(bad)
    assert state["reason"] in ("ExpansionFailed", "RenderFailed"), state["reason"]
    shown = status_json("--config", str(cfg), "--state-dir", str(d.state_dir))
    rows = {v["name"]: v for v in shown["vms"]}
    assert (rows[broken]["state"], rows[broken]["sync"]) == ("absent", "Failed"), rows.get(broken)
    assert rows[ok]["state"] == "shutoff"


def test_deleted_branch_error_honours_the_back_off(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    dom = name("branch")
    own_domains.append(dom)
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    git_repo.git("remote", "add", "origin", str(remote))
    git_repo.write("vms/a.yaml", vm(dom, strategy="Halted"))
    git_repo.commit()
    git_repo.git("push", "-q", "origin", "main", "main:deploy")
    extra = "intervals: {fetch: 1s, resync: 1h}\n"
    cfg = config(tmp_path, f"file://{remote}", extra=extra)
    cfg.write_text(
        cfg.read_text().replace(f"  repo: file://{remote}\n", f"  repo: file://{remote}\n  branch: deploy\n")
    )
    d = start("--config", str(cfg))
    wait_for("applied", lambda: d.state().get("reason") == "Succeeded")
    git_repo.git("push", "-q", "origin", ":deploy")
    failures = wait_for("two source failures", lambda: (f := d.events("source failed"))[1:] and f, timeout=60)
    retries = d.events("retry scheduled")
    assert "deleted" in failures[0]["error"]
    first, second = (datetime.fromisoformat(f["timestamp"]) for f in failures[:2])
    announced = float(retries[0]["in_s"])
    # The fetch timer (1 s) did not fetch again before the announced retry.
    assert (second - first).total_seconds() >= announced * 0.9, (first, second, announced)


def test_reload_that_cannot_bind_keeps_the_old_listener(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    dom = name("listen")
    own_domains.append(dom)
    git_repo.write("vms/a.yaml", vm(dom, strategy="Halted"))
    sha = git_repo.commit()
    cfg = config(tmp_path, str(git_repo.path))
    d = start("--config", str(cfg))
    d.wait_applied(sha)
    assert d.get("/healthz")[0] == 200
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config(tmp_path, str(git_repo.path), listen=f"127.0.0.1:{port}")
        d.signal(signal.SIGHUP)
        kept = wait_for(
            "the failed bind", lambda: d.events("cannot listen on the new address: keeping the old listener")
        )
        assert kept[0]["kept"] == d.address
        wait_for("reload done", lambda: d.events("configuration reloaded"))
        assert d.get("/healthz")[0] == 200  # health, metrics and webhook still served
        assert d.get("/metrics")[0] == 200


def test_status_connect_labels_rows_with_the_configured_host_name(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    dom = name("label")
    own_domains.append(dom)
    git_repo.write("vms/a.yaml", vm(dom, strategy="Halted"))
    sha = git_repo.commit()
    d = start("--config", str(config(tmp_path, str(git_repo.path))))
    d.wait_applied(sha)
    shown = status_json("--state-dir", str(d.state_dir), "--connect", URI)
    rows = [v for v in shown["vms"] if v["name"] == dom]
    assert [(r["host"], r["sync"]) for r in rows] == [(HOST, "Synced")]
