"""`reconciler run` with a remote, a webhook, signed commits and several hosts (subprocess).

Covers: a remote (bare repository on disk, file:// URL) cloned into the state dir and
fetched on its interval as commits are pushed; `POST /hooks/git` with a good
GitHub/Gitea HMAC signature (fetch + apply at once), a bad one and a missing one
(401, nothing fetched), GitLab's shared token; signed commits: an unsigned commit is
never applied, status names it, a signed commit on top of it is still refused, a
rewritten history applies; several libvirt hosts in one daemon, each planned and
applied independently, one unreachable host not blocking the others.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import subprocess
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

import pytest

from tests.helpers.daemon import Daemon, vm_rows, wait_for
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = [pytest.mark.libvirt_test, pytest.mark.timeout(120)]
SECRET = "It's a Secret to Everybody"


@pytest.fixture
def forge(tmp_path: Path, git_repo: GitRepo) -> tuple[Path, GitRepo]:
    bare = tmp_path / "forge.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    git_repo.commit("web")
    git_repo.git("remote", "add", "origin", str(bare))
    git_repo.git("push", "-q", "origin", "main")
    return bare, git_repo


def remote_config(tmp_path: Path, bare: Path, fetch: str, extra: str = "") -> Path:
    secret = tmp_path / "webhook.secret"
    secret.write_text(SECRET + "\n")
    path = tmp_path / "config.yaml"
    path.write_text(
        f"source:\n  repo: file://{bare}\n  branch: main\n"
        f"connect: test:///default\nlisten: 127.0.0.1:0\n"
        f"intervals:\n  fetch: {fetch}\n  resync: 1h\n"
        f"webhook:\n  secretFile: {secret}\n{extra}"
    )
    return path


def post(d: Daemon, body: bytes, headers: dict[str, str]) -> int:
    req = urllib.request.Request(f"http://{d.address}/hooks/git", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def test_remote_is_fetched_on_its_interval(
    tmp_path: Path, forge: tuple[Path, GitRepo], start: Callable[..., Daemon]
) -> None:
    bare, work = forge
    d = start("--config", str(remote_config(tmp_path, bare, "300ms")))
    d.wait_applied(work.git("rev-parse", "HEAD"))
    assert list((tmp_path / "state" / "source").glob("*.git"))  # cloned into the state dir
    work.write("vms/db.yaml", vm_yaml("db"))
    pushed = work.commit("db")
    work.git("push", "-q", "origin", "main")
    state = d.wait_applied(pushed)
    assert vm_rows(state)["db"]["sync"] == "Synced"


def test_webhook_signatures(
    tmp_path: Path, forge: tuple[Path, GitRepo], start: Callable[..., Daemon]
) -> None:
    bare, work = forge
    first = work.git("rev-parse", "HEAD")
    d = start("--config", str(remote_config(tmp_path, bare, "1h")))
    d.wait_applied(first)
    work.write("vms/db.yaml", vm_yaml("db"))
    pushed = work.commit("db")
    work.git("push", "-q", "origin", "main")
    body = b'{"ref": "refs/heads/main"}'
    good = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    bad = "sha256=" + hmac.new(b"wrong secret", body, hashlib.sha256).hexdigest()
    assert post(d, body, {"Content-Type": "application/json"}) == 401
    assert post(d, body, {"X-Hub-Signature-256": bad}) == 401
    assert post(d, body + b" ", {"X-Hub-Signature-256": good}) == 401  # body altered
    assert post(d, body, {"X-Gitlab-Token": "guess"}) == 401
    _, metrics = d.get("/metrics")
    assert re.search(r'^reconciler_webhook_requests_total\{result="rejected"\} 4\.0$', metrics, re.M)
    assert d.state()["attempted_revision"] == first  # nothing was fetched
    assert post(d, body, {"X-Hub-Signature-256": good, "X-GitHub-Event": "push"}) == 202
    d.wait_applied(pushed)
    work.write("vms/api.yaml", vm_yaml("api"))
    again = work.commit("api")
    work.git("push", "-q", "origin", "main")
    assert post(d, body, {"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Push Hook"}) == 202
    d.wait_applied(again)


def ssh_signing(repo: GitRepo, key: Path | None) -> None:
    if key is None:
        repo.git("config", "commit.gpgsign", "false")
        return
    repo.git("config", "gpg.format", "ssh")
    repo.git("config", "user.signingkey", str(key))
    repo.git("config", "commit.gpgsign", "true")


def test_only_signed_commits_are_applied(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon]
) -> None:
    key = tmp_path / "ops"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"ops@example.invalid {(tmp_path / 'ops.pub').read_text()}")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"source:\n  repo: {git_repo.path}\n  verify:\n    mode: ssh\n    keys: {allowed}\n"
        "connect: test:///default\nlisten: 127.0.0.1:0\n"
    )
    ssh_signing(git_repo, key)
    git_repo.write("vms/web.yaml", vm_yaml("web"))
    signed = git_repo.commit("signed")
    d = start("--config", str(config))
    d.wait_applied(signed)

    ssh_signing(git_repo, None)
    git_repo.write("vms/web.yaml", vm_yaml("web", memory="128Mi"))
    unsigned = git_repo.commit("unsigned")
    state = d.wait_attempted(unsigned)
    assert state["applied_revision"] == signed
    assert state["reason"] == "SourceFailed"
    assert state["failed_commit"] == unsigned[:12]
    assert f"commit {unsigned[:12]}: ssh signature did not verify" in state["message"]
    assert vm_rows(state)["web"]["revision"] == signed[:12]

    ssh_signing(git_repo, key)
    git_repo.write("vms/web.yaml", vm_yaml("web", memory="96Mi"))
    on_top = git_repo.commit("signed on top of an unsigned one")
    state = d.wait_attempted(on_top)
    assert state["applied_revision"] == signed
    assert state["failed_commit"] == unsigned[:12]

    git_repo.git("reset", "-q", "--hard", signed)
    git_repo.write("vms/web.yaml", vm_yaml("web", memory="96Mi"))
    rewritten = git_repo.commit("rewritten, signed")
    state = d.wait_applied(rewritten)
    assert state["reason"] == "Succeeded"
    assert "failed_commit" not in state


def selected_vm(name: str, host: str) -> str:
    return vm_yaml(name).replace(
        "    spec:\n      domain:",
        f"    spec:\n      nodeSelector:\n        kubernetes.io/hostname: {host}\n      domain:",
    )


def test_several_hosts_one_unreachable(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon]
) -> None:
    node = tmp_path / "node.xml"
    node.write_text("<node/>\n")
    git_repo.write("vms/web.yaml", selected_vm("web", "h1"))
    git_repo.write("vms/api.yaml", selected_vm("api", "h2"))
    git_repo.write("vms/db.yaml", selected_vm("db", "h3"))
    sha = git_repo.commit()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"source:\n  repo: {git_repo.path}\nlisten: 127.0.0.1:0\nhosts:\n"
        "  - connect: test:///default\n    host: {name: h1, claimUnselected: false}\n"
        f"  - connect: test://{node}\n    host: {{name: h2, claimUnselected: false}}\n"
        "  - connect: qemu+tcp://127.0.0.1:1/system\n    host: {name: h3, claimUnselected: false}\n"
    )
    d = start("--config", str(config))
    state = wait_for(
        "h1 and h2 applied",
        lambda: (s := d.state()).get("hosts", {}).get("h2", {}).get("applied_revision") == sha and s,
    )
    hosts = state["hosts"]
    assert hosts["h1"]["applied_revision"] == sha
    assert hosts["h1"]["reason"] == hosts["h2"]["reason"] == "Succeeded"
    assert hosts["h3"]["reason"] == "ApplyFailed"
    assert "qemu+tcp://127.0.0.1:1/system" in hosts["h3"]["message"]
    assert hosts["h3"]["applied_revision"] == ""
    assert state["applied_revision"] != sha  # not applied everywhere
    rows = {(v["host"], v["name"]): v for v in state["vms"]}
    assert rows[("h1", "web")]["state"] == "running"
    assert rows[("h2", "api")]["state"] == "running"
    assert ("h1", "api") not in rows
    wait_for("a retry of the unreachable host", lambda: d.events("retry scheduled"))
    _, metrics = d.get("/metrics")
    assert re.search(
        r'^reconciler_reconcile_errors_total\{host="h3",reason="ApplyFailed"\} [1-9]', metrics, re.M
    )
