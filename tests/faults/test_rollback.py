"""Issue item 2: a force-push to an older commit is a rollback, never a silent revert.

Default policy: applied, with a loud warning, and shown in the state file and in
``reconciler status``. ``allowRollback: false``: refused (the VM keeps its newer
definition) until ``confirmRollback`` names the commit and the config is reloaded.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.helpers.daemon import Daemon, wait_for
from tests.helpers.faults import config, memory_kib, name, vm

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)
BIN = Path(sys.executable).parent / "reconciler"


def three_commits(git_repo: GitRepo, dom: str) -> tuple[str, str, str]:
    shas = []
    for mem in ("64Mi", "96Mi", "128Mi"):
        git_repo.write("vms/a.yaml", vm(dom, strategy="Halted", memory=mem))
        shas.append(git_repo.commit(mem))
    return shas[0], shas[1], shas[2]


def test_rollback_is_applied_with_a_warning_and_shown_in_status(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    dom = name("rollback")
    own_domains.append(dom)
    _a, b, c = three_commits(git_repo, dom)
    cfg = config(tmp_path, str(git_repo.path))
    d = start("--config", str(cfg))
    d.wait_applied(c)
    assert memory_kib(dom) == 128 * 1024
    git_repo.git("reset", "-q", "--hard", b)  # what a force-push back to B looks like
    state = d.wait_applied(b)
    assert memory_kib(dom) == 96 * 1024
    warned = d.events(
        "ROLLBACK: the branch moved to a commit that does not descend from the last applied one"
    )
    assert warned
    assert warned[0]["applied"] == c[:12]
    assert warned[0]["head"] == b[:12]
    assert warned[0]["decision"] == "applied"
    assert state["rollback"]["from_revision"] == c
    assert state["rollback"]["to_revision"] == b
    out = subprocess.run(
        [str(BIN), "status", "--config", str(cfg), "--state-dir", str(d.state_dir)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert f"rollback: {c[:12]} -> {b[:12]}" in out.stdout, out.stdout + out.stderr
    _, metrics = d.get("/metrics")
    assert 'reconciler_rollbacks_total{decision="applied"} 1.0' in metrics


def test_rollback_refused_until_confirmed(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    dom = name("rollback-refused")
    own_domains.append(dom)
    _a, b, c = three_commits(git_repo, dom)
    policy = "policy:\n  allowRollback: false\n"
    cfg = config(tmp_path, str(git_repo.path), extra=policy)
    d = start("--config", str(cfg))
    d.wait_applied(c)
    git_repo.git("reset", "-q", "--hard", b)
    state = d.wait_attempted(b)
    assert state["reason"] == "RollbackRefused"
    assert state["applied_revision"] == c
    assert state["rollback"]["decision"] == "refused"
    assert f"confirmRollback: '{b[:12]}'" in state["message"]
    assert memory_kib(dom) == 128 * 1024  # nothing reverted
    code, body = d.get("/healthz")
    assert code == 503
    assert "RollbackRefused" in body
    # Confirmed by naming the commit: applied on reload.
    config(tmp_path, str(git_repo.path), extra=policy + f"  confirmRollback: '{b[:12]}'\n")
    d.signal(signal.SIGHUP)
    state = d.wait_applied(b)
    assert memory_kib(dom) == 96 * 1024
    assert state["reason"] == "Succeeded"
    wait_for("healthy again", lambda: d.get("/healthz")[0] == 200)
