"""The daemon's git source (reconciler/source/mirror.py) against real repositories on disk.

Covers: a remote (a bare repository reached by a file:// URL) cloned into the state
dir and fetched as commits are pushed; a force-push followed; a deleted branch
reported as a source error (nothing to apply) and picked up again when it returns;
a corrupt mirror re-cloned; the default branch of a remote; a local repository read
from the commit's tree, never the dirty work tree; credentials passed by file
reference only; commit signatures with real ssh-keygen and gpg keys: signed head
accepted, unsigned or foreign-signed commits refused with the commit named, and
every commit since the last applied one checked.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler.errors import SignatureError, SourceError
from reconciler.source.mirror import GitSource
from reconciler.source.settings import Credentials, SourceConfig, Verify
from tests.helpers.signing import ssh_key, ssh_sign_config

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    full = {**os.environ, **(env or {})}
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=full
    ).stdout.strip()


@pytest.fixture
def remote(tmp_path: Path, git_repo: GitRepo) -> tuple[Path, GitRepo]:
    """A bare 'forge' repository and a working clone pushing to it."""
    bare = tmp_path / "forge.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git_repo.write("vms/a.yaml", "a: 1\n")
    git_repo.commit("first")
    git_repo.git("remote", "add", "origin", str(bare))
    git_repo.git("push", "-q", "origin", "main")
    return bare, git_repo


def source_for(url: str, state: Path, branch: str = "main", verify: Verify | None = None) -> GitSource:
    return GitSource(SourceConfig(url, branch=branch, verify=verify), str(state))


def test_remote_is_cloned_and_fetched(tmp_path: Path, remote: tuple[Path, GitRepo]) -> None:
    bare, work = remote
    src = source_for(f"file://{bare}", tmp_path / "state")
    assert src.remote
    src.fetch()
    assert src.git_dir.is_relative_to(tmp_path / "state")
    assert src.head() == work.git("rev-parse", "HEAD")
    work.write("vms/b.yaml", "b: 2\n")
    second = work.commit("second")
    assert src.head() != second  # not fetched yet
    work.git("push", "-q", "origin", "main")
    src.fetch()
    assert src.head() == second
    snap = src.snapshot(second)
    assert snap.commit == second
    assert snap.files.read("vms/b.yaml") == b"b: 2\n"


def test_default_branch_of_the_remote(tmp_path: Path, remote: tuple[Path, GitRepo]) -> None:
    bare, work = remote
    src = source_for(f"file://{bare}", tmp_path / "state", branch="")
    src.fetch()
    assert src.head() == work.git("rev-parse", "HEAD")


def test_force_push_is_followed(tmp_path: Path, remote: tuple[Path, GitRepo]) -> None:
    bare, work = remote
    first = work.git("rev-parse", "HEAD")
    work.write("vms/a.yaml", "a: bad\n")
    bad = work.commit("bad")
    work.git("push", "-q", "origin", "main")
    src = source_for(f"file://{bare}", tmp_path / "state")
    src.fetch()
    assert src.head() == bad
    work.git("reset", "-q", "--hard", first)
    work.write("vms/a.yaml", "a: rewritten\n")
    rewritten = work.commit("rewritten")
    work.git("push", "-q", "--force", "origin", "main")
    src.fetch()
    assert src.head() == rewritten
    assert src.snapshot(rewritten).files.read("vms/a.yaml") == b"a: rewritten\n"


def test_deleted_branch_is_a_source_error(tmp_path: Path, remote: tuple[Path, GitRepo]) -> None:
    bare, work = remote
    work.git("push", "-q", "origin", "main:release")
    src = source_for(f"file://{bare}", tmp_path / "state", branch="release")
    src.fetch()
    head = src.head()
    work.git("push", "-q", "origin", ":release")
    src.fetch()
    with pytest.raises(SourceError, match=r"branch 'release' not found on the remote \(deleted\?\)"):
        src.head()
    work.git("push", "-q", "origin", "main:release")
    src.fetch()
    assert src.head() == head


@pytest.mark.parametrize("damage", ["objects", "head-file", "whole-dir"])
def test_corrupt_mirror_is_cloned_again(tmp_path: Path, remote: tuple[Path, GitRepo], damage: str) -> None:
    bare, work = remote
    src = source_for(f"file://{bare}", tmp_path / "state")
    src.fetch()
    if damage == "objects":
        for p in (src.git_dir / "objects").rglob("*"):
            if p.is_file():
                p.unlink()
    elif damage == "head-file":
        (src.git_dir / "HEAD").write_text("garbage\n")
    else:
        shutil.rmtree(src.git_dir)
        src.git_dir.mkdir()
    work.write("vms/c.yaml", "c: 3\n")
    third = work.commit("third")
    work.git("push", "-q", "origin", "main")
    src.fetch()
    assert src.head() == third
    files = src.snapshot(third).files
    assert (files.read("vms/a.yaml"), files.read("vms/c.yaml")) == (b"a: 1\n", b"c: 3\n")


def test_unreachable_remote_is_a_transient_source_error(tmp_path: Path) -> None:
    src = source_for(f"file://{tmp_path}/missing.git", tmp_path / "state")
    with pytest.raises(SourceError) as info:
        src.fetch()
    assert info.value.transient


def test_local_repository_reads_the_commit_not_the_work_tree(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("vms/a.yaml", "a: committed\n")
    sha = git_repo.commit()
    git_repo.write("vms/a.yaml", "a: dirty\n")
    src = GitSource(SourceConfig(str(git_repo.path)), str(tmp_path / "state"))
    assert not src.remote
    src.fetch()  # no-op
    assert src.head() == sha
    assert src.snapshot(sha).files.read("vms/a.yaml") == b"a: committed\n"
    assert src.watch_dir() == git_repo.path / ".git"


def test_credentials_go_by_file_reference(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("TOPSECRET\n")
    key = tmp_path / "key"
    key.write_text("not a key")
    creds = Credentials(ssh_key_file=str(key), username="deploy", password_file=str(token))
    src = GitSource(SourceConfig("https://example.invalid/r.git", credentials=creds), str(tmp_path / "s"))
    env = src._env()
    assert "TOPSECRET" not in "\n".join(env.values())
    assert str(token) in "\n".join(env.values())
    assert str(key) in env["GIT_SSH_COMMAND"]
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    # git itself gets the secret from the file when it asks for credentials.
    filled = subprocess.run(
        ["git", "credential", "fill"], input="protocol=https\nhost=example.invalid\n\n",
        capture_output=True, text=True, env=env, check=True,
    ).stdout  # fmt: skip
    assert "username=deploy\n" in filled
    assert "password=TOPSECRET\n" in filled


# -- signatures ---------------------------------------------------------------------------


@pytest.fixture
def ssh_keys(tmp_path: Path) -> tuple[Path, Path, Path]:
    trusted = ssh_key(tmp_path, "trusted")
    stranger = ssh_key(tmp_path, "stranger")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"ops@example.invalid {(tmp_path / 'trusted.pub').read_text()}")
    return trusted, stranger, allowed


def test_ssh_signed_head_verifies(
    tmp_path: Path, git_repo: GitRepo, ssh_keys: tuple[Path, Path, Path]
) -> None:
    trusted, _stranger, allowed = ssh_keys
    ssh_sign_config(git_repo, trusted)
    git_repo.write("a.yaml", "a: 1\n")
    sha = git_repo.commit("signed")
    src = GitSource(SourceConfig(str(git_repo.path), verify=Verify("ssh", str(allowed))), str(tmp_path / "s"))
    src.verify("", sha)  # does not raise


@pytest.mark.parametrize("signer", ["unsigned", "stranger"])
def test_ssh_unverified_head_is_refused(
    tmp_path: Path, git_repo: GitRepo, ssh_keys: tuple[Path, Path, Path], signer: str
) -> None:
    _trusted, stranger, allowed = ssh_keys
    ssh_sign_config(git_repo, stranger if signer == "stranger" else None)
    git_repo.write("a.yaml", "a: 1\n")
    sha = git_repo.commit(signer)
    src = GitSource(SourceConfig(str(git_repo.path), verify=Verify("ssh", str(allowed))), str(tmp_path / "s"))
    with pytest.raises(SignatureError, match=f"commit {sha[:12]}: ssh signature did not verify") as info:
        src.verify("", sha)
    assert not info.value.transient
    assert info.value.commit == sha[:12]  # the commit refused, as a field (state.json's failed_commit)


def test_every_commit_since_the_last_applied_must_verify(
    tmp_path: Path, git_repo: GitRepo, ssh_keys: tuple[Path, Path, Path]
) -> None:
    trusted, _stranger, allowed = ssh_keys
    ssh_sign_config(git_repo, trusted)
    git_repo.write("a.yaml", "a: 1\n")
    applied = git_repo.commit("applied")
    ssh_sign_config(git_repo, None)
    git_repo.write("a.yaml", "a: 2\n")
    sneaked = git_repo.commit("unsigned in the middle")
    ssh_sign_config(git_repo, trusted)
    git_repo.write("a.yaml", "a: 3\n")
    head = git_repo.commit("signed head")
    src = GitSource(SourceConfig(str(git_repo.path), verify=Verify("ssh", str(allowed))), str(tmp_path / "s"))
    src.verify("", head)  # head alone verifies
    src2 = GitSource(
        SourceConfig(str(git_repo.path), verify=Verify("ssh", str(allowed))), str(tmp_path / "s")
    )
    with pytest.raises(SignatureError, match=f"commit {sneaked[:12]}"):
        src2.verify(applied, head)
    assert src2.commits_to_verify(applied, head) == [head, sneaked]


def gpg_agent_running(home: Path) -> bool:
    """Whether a gpg-agent listens on ``home``'s socket (a connect, which starts nothing)."""
    path = subprocess.run(
        ["gpgconf", "--homedir", str(home), "--list-dirs", "agent-socket"],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout.strip()  # fmt: skip
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(path)
        except OSError:
            return False
    return True


@pytest.fixture
def gpg_home(tmp_path: Path) -> Iterator[tuple[dict[str, str], str, Path]]:
    home = tmp_path / "gnupg-signer"
    home.mkdir(mode=0o700)
    env = {"GNUPGHOME": str(home)}
    subprocess.run(
        ["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Ops <ops@example.invalid>", "ed25519", "sign", "never"],
        check=True, capture_output=True, env={**os.environ, **env}, timeout=120,
    )  # fmt: skip
    out = subprocess.run(
        ["gpg", "--batch", "--with-colons", "--list-secret-keys"],
        check=True, capture_output=True, text=True, env={**os.environ, **env},
    ).stdout  # fmt: skip
    fpr = next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:"))
    pub = tmp_path / "ops.asc"
    pub.write_bytes(
        subprocess.run(
            ["gpg", "--batch", "--armor", "--export", fpr],
            check=True,
            capture_output=True,
            env={**os.environ, **env},
        ).stdout
    )
    yield env, fpr, pub
    # The signer's own agent (key generation and signing need one) goes with the test.
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True, check=False)


@pytest.fixture
def gpg_state() -> Iterator[Path]:
    """A short state directory: gpg finds no agent socket in a keyring whose path is near
    the 108 bytes of a socket address (a pytest-xdist worker's tmp_path is 10 longer)."""
    with tempfile.TemporaryDirectory(prefix="rt-gpg-") as state:
        yield Path(state)


def test_gpg_signed_and_unsigned(
    tmp_path: Path, git_repo: GitRepo, gpg_home: tuple[dict[str, str], str, Path]
) -> None:
    # A state directory deep enough that the keyring's socket addresses would not fit in
    # 108 bytes: gpg is reached through a short link (``short_keyring``).
    gpg_state = tmp_path / ("state-dir-of-a-long-path-" * 4)
    assert len(str(gpg_state / "s" / "gnupg" / ("0" * 16) / "S.gpg-agent.browser")) > 108
    env, fpr, pub = gpg_home
    git_repo.write("a.yaml", "a: 1\n")
    git(git_repo.path, "add", "-A")
    git(git_repo.path, "-c", "gpg.format=openpgp", "commit", "-q", f"-S{fpr}", "-m", "signed", env=env)
    signed = git_repo.git("rev-parse", "HEAD")
    src = GitSource(SourceConfig(str(git_repo.path), verify=Verify("gpg", str(pub))), str(gpg_state / "s"))
    src.verify("", signed)
    git_repo.write("a.yaml", "a: 2\n")
    unsigned = git_repo.commit("unsigned")
    with pytest.raises(SignatureError, match=f"commit {unsigned[:12]}: gpg signature did not verify"):
        src.verify(signed, unsigned)
    # An ssh allowed-signers check must not accept a gpg signature, and the reverse.
    allowed = tmp_path / "allowed_signers"
    allowed.write_text("")
    ssh_src = GitSource(
        SourceConfig(str(git_repo.path), verify=Verify("ssh", str(allowed))), str(gpg_state / "s2")
    )
    with pytest.raises(SignatureError):
        ssh_src.verify("", signed)


def test_signatures_are_checked_in_the_remote_mirror(
    tmp_path: Path, remote: tuple[Path, GitRepo], ssh_keys: tuple[Path, Path, Path]
) -> None:
    bare, work = remote
    trusted, _stranger, allowed = ssh_keys
    ssh_sign_config(work, trusted)
    work.write("vms/a.yaml", "a: signed\n")
    signed = work.commit("signed")
    work.git("push", "-q", "origin", "main")
    src = source_for(f"file://{bare}", tmp_path / "state", verify=Verify("ssh", str(allowed)))
    src.fetch()
    src.verify("", src.head())
    ssh_sign_config(work, None)
    work.write("vms/a.yaml", "a: unsigned\n")
    unsigned = work.commit("unsigned")
    work.git("push", "-q", "origin", "main")
    src.fetch()
    with pytest.raises(SignatureError, match=f"commit {unsigned[:12]}"):
        src.verify(signed, src.head())


def test_gpg_verification_leaves_no_agent_running(
    gpg_state: Path, git_repo: GitRepo, gpg_home: tuple[dict[str, str], str, Path]
) -> None:
    env, fpr, pub = gpg_home
    git_repo.write("a.yaml", "a: 1\n")
    git(git_repo.path, "add", "-A")
    git(git_repo.path, "-c", "gpg.format=openpgp", "commit", "-q", f"-S{fpr}", "-m", "signed", env=env)
    signed = git_repo.git("rev-parse", "HEAD")
    src = GitSource(SourceConfig(str(git_repo.path), verify=Verify("gpg", str(pub))), str(gpg_state / "s"))
    src.verify("", signed)
    (keyring,) = (gpg_state / "s" / "gnupg").iterdir()
    assert not gpg_agent_running(keyring)
    git_repo.write("a.yaml", "a: 2\n")
    unsigned = git_repo.commit("unsigned")
    with pytest.raises(SignatureError):
        src.verify(signed, unsigned)
    assert not gpg_agent_running(keyring)
