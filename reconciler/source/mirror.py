"""The daemon's git source: a local repository, or a remote mirrored into the state dir.

Input: a ``SourceConfig`` and the state directory. Output: the head commit of the
configured branch, ``SourceSnapshot``s of a commit's tree (through ``reconciler.source``),
a reader of other commits for ``revisionName: git:<commit>`` pins (from the mirror, never
the URL), and signature verification of the commits a reconcile would apply. I/O (git).

A remote is kept as a bare mirror under ``<state dir>/source/``: fetched with
``--force --prune`` so force-pushes and deleted branches show up as they are; a clone
that git can no longer read is removed and cloned again. Reads come from a commit's
tree, never a work tree. git runs with the user's and the system's git config
ignored, with no terminal prompts, and with credentials passed by file reference
(the secret itself never appears on a command line or in a log).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from reconciler import source
from reconciler.errors import ConfigError, SignatureError, SourceError
from reconciler.manifests.config import read_config_file
from reconciler.wording.escape import log_text, printable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from reconciler.model import SourceSnapshot
    from reconciler.source.settings import SourceConfig

log = structlog.get_logger("reconciler.source.mirror")

GIT_TIMEOUT_S = 300.0
MAX_VERIFY_COMMITS = 1000
# The private keyring's gpg.conf: verifying needs no secret key, so gpg starts no
# gpg-agent or dirmngr that would outlive the daemon.
NO_AGENT = "no-autostart\n"
# A Unix socket's address holds 108 bytes: gpg fails (rather than finding no agent) when
# its keyring's ``S.gpg-agent.browser`` would not fit, so a longer keyring is reached
# through a short link.
MAX_SOCKET_PATH = 107


def _quote_helper(path: str) -> str:
    return shlex.quote(path)


class GitSource:
    """One configured repository and branch. Not thread-safe: used by the daemon loop only."""

    def __init__(self, config: SourceConfig, state_dir: str) -> None:
        self.config = config
        self.state_dir = Path(state_dir)
        self.remote = config.remote
        if self.remote:
            digest = hashlib.sha256(config.repo.encode()).hexdigest()[:16]
            self.git_dir = self.state_dir / "source" / f"{digest}.git"
        else:
            self.git_dir = Path(config.repo)
        self._verified: set[str] = set()
        # The unreadable object a fresh clone did not mend: the remote lacks it too, and
        # cloning again on every retry would only repeat the download.
        self._unmended = ""

    # -- git plumbing -------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(
            GIT_TERMINAL_PROMPT="0",
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_ASKPASS="/bin/false" if Path("/bin/false").exists() else "false",
            LC_ALL="C",
        )
        cfg: list[tuple[str, str]] = [("safe.directory", "*"), ("protocol.ext.allow", "never")]
        creds = self.config.credentials
        if creds.ssh_key_file:
            ssh = ["ssh", "-i", creds.ssh_key_file, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"]
            if creds.known_hosts_file:
                ssh += [
                    "-o",
                    f"UserKnownHostsFile={creds.known_hosts_file}",
                    "-o",
                    "StrictHostKeyChecking=yes",
                ]
            env["GIT_SSH_COMMAND"] = shlex.join(ssh)
        if creds.password_file:
            user = creds.username or "git"
            helper = (
                f'!f() {{ test "$1" = get || exit 0; echo username={_quote_helper(user)}; '
                f"printf 'password=%s\\n' \"$(cat {_quote_helper(creds.password_file)})\"; }}; f"
            )
            cfg.append(("credential.helper", helper))
        env["GIT_CONFIG_COUNT"] = str(len(cfg))
        for i, (k, v) in enumerate(cfg):
            env[f"GIT_CONFIG_KEY_{i}"] = k
            env[f"GIT_CONFIG_VALUE_{i}"] = v
        return env

    def _git(
        self,
        *args: str,
        git_dir: Path | None = None,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        timeout: float = GIT_TIMEOUT_S,
    ) -> subprocess.CompletedProcess[str]:
        cmd = ["git"]
        if git_dir is not None:
            cmd += ["--git-dir", str(git_dir)]
        full_env = self._env()
        if env:
            full_env.update(env)
        try:
            proc = subprocess.run(
                [*cmd, *args], capture_output=True, text=True, env=full_env, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as err:
            raise SourceError(f"{self.config.shown}: git {args[0]} timed out after {timeout:.0f}s") from err
        if check and proc.returncode != 0:
            raise SourceError(f"{self.config.shown}: git {args[0]} failed: {git_stderr(proc.stderr)}")
        return proc

    def _repo_dir(self) -> Path:
        """The directory GitPython opens: a local repository's work tree or the mirror."""
        return self.git_dir

    # -- remote mirror ------------------------------------------------------------------

    def _healthy(self) -> bool:
        if not (self.git_dir / "HEAD").is_file():
            return False
        proc = self._git("rev-parse", "--git-dir", git_dir=self.git_dir, check=False, timeout=60)
        if proc.returncode != 0:
            return False
        refs = self._git(
            "for-each-ref", "--format=%(objectname)", "refs/heads", git_dir=self.git_dir, check=False
        )
        if refs.returncode != 0:
            return False
        heads = [h for h in refs.stdout.split() if h]
        if not heads:
            return True
        fsck = self._git(
            "fsck", "--connectivity-only", "--no-dangling", "--no-progress", *heads,
            git_dir=self.git_dir, check=False, timeout=600,
        )  # fmt: skip
        return fsck.returncode == 0

    def _clone(self) -> None:
        parent = self.git_dir.parent
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{self.git_dir.name}.tmp-"))
        try:
            self._git("clone", "--bare", "--quiet", "--no-tags", "--", self.config.repo, str(tmp / "m.git"))
            # Mirror every branch as-is: force-pushes overwrite, deletions prune.
            self._git("config", "remote.origin.fetch", "+refs/heads/*:refs/heads/*", git_dir=tmp / "m.git")
            if self.git_dir.exists():
                shutil.rmtree(self.git_dir)
            (tmp / "m.git").rename(self.git_dir)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        log.info("cloned", repo=self.config.shown, into=str(self.git_dir))

    def fetch(self) -> None:
        """Bring the mirror up to date (no-op for a local repository). Re-clones a corrupt mirror."""
        if not self.remote:
            return
        if not (self.git_dir / "HEAD").is_file():
            self._clone()
            return
        proc = self._git(
            "fetch", "--quiet", "--force", "--prune", "--no-tags", "origin", git_dir=self.git_dir, check=False
        )
        if proc.returncode == 0 and self._head_readable():
            return
        if self._healthy():
            raise SourceError(f"{self.config.shown}: git fetch failed: {git_stderr(proc.stderr)}")
        log.warning("mirror is corrupt: cloning again", repo=self.config.shown, path=str(self.git_dir))
        self._clone()

    def _head_readable(self) -> bool:
        try:
            sha = self.head()
        except SourceError:
            return True  # a missing branch is not corruption
        proc = self._git("cat-file", "-e", f"{sha}^{{tree}}", git_dir=self.git_dir, check=False, timeout=60)
        return proc.returncode == 0

    def recover(self, unreadable: str = "") -> bool:
        """Called when reading a fetched commit failed: re-clone a mirror that is broken.

        ``unreadable`` names an object git could not read (a corrupt blob passes the
        connectivity check): the mirror is then cloned again whatever the check says.
        Returns whether it was cloned again (a local repository never is). An object the
        last clone already failed to bring is not cloned for again: the remote lacks it.
        """
        if not self.remote or (not unreadable and self._healthy()):
            return False
        if unreadable and unreadable == self._unmended:
            log.warning("object unreadable in a fresh clone too: not cloning again", repo=self.config.shown)
            return False
        log.warning(
            "mirror is corrupt: cloning again",
            repo=self.config.shown,
            path=str(self.git_dir),
            **({"error": unreadable} if unreadable else {}),
        )
        self._clone()
        self._unmended = unreadable
        return True

    def is_ancestor(self, old: str, new: str) -> bool | None:
        """Whether ``new`` descends from ``old`` (None when ``old`` is not in the repository)."""
        if not old or not self.has_commit(old):
            return None
        proc = self._git(
            "-C", str(self.git_dir), "merge-base", "--is-ancestor", old, new, check=False, timeout=120
        )  # fmt: skip
        if proc.returncode in (0, 1):
            return proc.returncode == 0
        raise SourceError(
            f"{self.config.shown}: cannot compare {old[:12]} and {new[:12]}: {_last_line(proc.stderr)}"
        )

    def related(self, old: str, new: str) -> bool | None:
        """Whether the two commits share any history (a merge base); None when ``old`` is
        not in the repository. A force-push of another repository's history shares none."""
        if not old or not self.has_commit(old):
            return None
        proc = self._git("-C", str(self.git_dir), "merge-base", old, new, check=False, timeout=120)
        if proc.returncode in (0, 1):
            return proc.returncode == 0
        raise SourceError(
            f"{self.config.shown}: cannot compare {old[:12]} and {new[:12]}: {_last_line(proc.stderr)}"
        )

    # -- reads --------------------------------------------------------------------------

    def _ref(self) -> str:
        if self.config.branch:
            return f"refs/heads/{self.config.branch}"
        return "HEAD"

    def head(self) -> str:
        """The full sha the configured branch points at now."""
        ref = self._ref()
        git_dir = self.git_dir if self.remote else None
        args = ("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if git_dir is None:
            proc = self._git("-C", str(self.git_dir), *args, check=False, timeout=60)
        else:
            proc = self._git(*args, git_dir=git_dir, check=False, timeout=60)
        sha = proc.stdout.strip()
        if proc.returncode != 0 or not sha:
            if not self.remote and not self.git_dir.exists():
                raise SourceError(f"{self.config.shown}: no such repository{private_tmp_note(self.git_dir)}")
            where = "on the remote (deleted?)" if self.remote else "in the repository"
            what = f"branch {self.config.branch!r}" if self.config.branch else "HEAD"
            raise SourceError(f"{self.config.shown}: {what} not found {where}")
        return sha

    def snapshot(self, sha: str) -> SourceSnapshot:
        repo = source.open_repo(self._repo_dir())
        commit = source.resolve_commit(repo, sha)
        return source.snapshot_of(repo, commit, self.config.shown, self.config.branch or "HEAD")

    def mended_snapshot(self, sha: str) -> SourceSnapshot:
        """The revision ``sha``; one that cannot be read is read once more after
        ``recover`` (a broken mirror cloned again)."""
        try:
            return self.snapshot(sha)
        except SourceError:
            self.recover()
            return self.snapshot(sha)

    def reader(self) -> Callable[[str], SourceSnapshot]:
        """Reads other commits of this repository (``revisionName: git:<commit>`` pins)
        where ``snapshot`` reads: a remote's mirror, never its URL. Opened at its first
        read; make one per reconcile (a mirror cloned again is another repository)."""
        return source.snapshot_reader(self._repo_dir(), self.config.shown)

    def watch_dir(self) -> Path | None:
        """The git directory whose refs a local repository's watcher follows (None for a remote)."""
        if self.remote:
            return None
        return Path(source.open_repo(self.git_dir).git_dir)

    def has_commit(self, sha: str) -> bool:
        if not sha:
            return False
        proc = self._git(
            "-C", str(self.git_dir), "cat-file", "-e", f"{sha}^{{commit}}", check=False, timeout=60
        )
        return proc.returncode == 0

    # -- signatures ---------------------------------------------------------------------

    def commits_to_verify(self, applied: str, head: str) -> list[str]:
        """``head`` and every commit since ``applied`` (just ``head`` when ``applied`` is unknown)."""
        if not applied or applied == head or not self.has_commit(applied):
            return [head]
        proc = self._git(
            "-C", str(self.git_dir), "rev-list", f"--max-count={MAX_VERIFY_COMMITS + 1}", head, f"^{applied}",
            check=False, timeout=120,
        )  # fmt: skip
        commits = [c for c in proc.stdout.split() if c]
        if proc.returncode != 0:
            raise SourceError(f"{self.config.shown}: cannot list commits {applied[:12]}..{head[:12]}")
        if len(commits) > MAX_VERIFY_COMMITS:
            raise SignatureError(
                f"{head[:12]}: more than {MAX_VERIFY_COMMITS} commits since the last applied "
                f"{applied[:12]}: refusing to verify them all"
            )
        return commits or [head]

    def _gnupg_home(self) -> Path:
        """A private keyring holding only the configured keys (re-imported when the file changes)."""
        verify = self.config.verify
        assert verify is not None
        try:
            keys = read_config_file(verify.keys)
        except (OSError, ConfigError) as err:
            raise SignatureError(f"source.verify.keys: {printable(str(err))}") from err
        digest = hashlib.sha256(keys).hexdigest()[:16]
        home = self.state_dir / "gnupg" / digest
        conf = home / "gpg.conf"
        if (home / ".imported").exists() and not conf.exists():
            conf.write_text(NO_AGENT)
            self._stop_gpg_agent(home)  # started for a keyring made before no-autostart
        if not (home / ".imported").exists():
            home.mkdir(parents=True, exist_ok=True, mode=0o700)
            home.chmod(0o700)
            conf.write_text(NO_AGENT)
            with short_keyring(home) as reach:
                proc = subprocess.run(
                    ["gpg", "--batch", "--quiet", "--homedir", str(reach), "--import", verify.keys],
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=60,
                )
            if proc.returncode != 0:
                raise SignatureError(f"{verify.keys}: cannot import the gpg keys: {_last_line(proc.stderr)}")
            (home / ".imported").touch()
        return home

    def verify(self, applied: str, head: str) -> None:
        """Raise ``SignatureError`` naming the first commit that does not verify."""
        verify = self.config.verify
        if verify is None:
            return
        empty = self.state_dir / "gnupg" / "empty"
        if verify.mode == "gpg":
            home = self._gnupg_home()
            signers = os.devnull
        else:
            empty.mkdir(parents=True, exist_ok=True, mode=0o700)
            home, signers = empty, verify.keys
        todo = [c for c in self.commits_to_verify(applied, head) if c not in self._verified]
        with short_keyring(home) as reach:
            self._verify_each(todo, reach, signers)

    def _verify_each(self, todo: Sequence[str], home: Path, signers: str) -> None:
        verify = self.config.verify
        assert verify is not None
        for sha in reversed(todo):  # oldest first: report the first bad one
            proc = self._git(
                "-C", str(self.git_dir),
                "-c", f"gpg.ssh.allowedSignersFile={signers}",
                "-c", "gpg.program=gpg",
                "-c", "gpg.ssh.program=ssh-keygen",
                "verify-commit", sha,
                check=False, env={"GNUPGHOME": str(home)}, timeout=60,
            )  # fmt: skip
            if proc.returncode != 0:
                detail = _last_line(proc.stderr) or "no signature"
                raise SignatureError(
                    f"commit {sha[:12]}: {verify.mode} signature did not verify: {detail}", sha[:12]
                )
            self._verified.add(sha)

    def _stop_gpg_agent(self, home: Path) -> None:
        """Stop any gpg-agent or dirmngr an older keyring (without ``no-autostart``) started."""
        if shutil.which("gpgconf"):
            subprocess.run(
                ["gpgconf", "--homedir", str(home), "--kill", "all"],
                capture_output=True,
                check=False,
                timeout=30,
            )


@contextmanager
def short_keyring(home: Path) -> Iterator[Path]:
    """``home``, or a short link to it while gpg runs when its sockets' addresses would not fit."""
    if len(str(home / "S.gpg-agent.browser")) <= MAX_SOCKET_PATH:
        yield home
        return
    with tempfile.TemporaryDirectory(prefix="rgpg-") as short:
        link = Path(short) / "k"
        link.symlink_to(home)
        yield link


MAX_STDERR = 2000


def git_stderr(text: str, limit: int = MAX_STDERR) -> str:
    """All of git's stderr on one line (lines joined by `` | ``), control characters escaped
    (a remote's ``remote:`` lines are foreign text), at most ``limit`` characters: the
    middle is cut, the first and the last lines (git's hints and its verdict) are kept."""
    lines = [log_text(ln.strip()) for ln in text.strip().splitlines() if ln.strip()]
    joined = " | ".join(lines)
    if len(joined) <= limit:
        return joined
    head = limit // 4
    cut = len(joined) - limit
    return f"{joined[:head]} ... [{cut} characters cut] ... {joined[len(joined) - (limit - head) :]}"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def short(shas: Sequence[str]) -> str:
    return ", ".join(s[:12] for s in shas)


def private_tmp_note(path: Path) -> str:
    """Why a path under /tmp or /var/tmp may be missing when systemd runs the daemon: the
    unit's ``PrivateTmp=yes`` gives it a /tmp of its own ("" elsewhere)."""
    under = str(path).startswith(("/tmp/", "/var/tmp/"))
    if not under or not os.environ.get("INVOCATION_ID"):
        return ""
    return (
        " (the service runs with systemd's PrivateTmp=yes: its /tmp and /var/tmp are its own, "
        "so a repository there is not the one you see; put it elsewhere, e.g. under /srv)"
    )
