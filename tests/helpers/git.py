"""A real git repository in a temporary directory, committed to by the test.

Input: a directory. Output: ``GitRepo`` (write, remove and commit files; run git in it).
Runs git in that directory only.

A new repository and its commits are written as git writes them (the ``.git`` skeleton
of ``git init``, loose zlib objects, the branch ref, a version-2 index matching the
commit) without a git process: a test's fixture repository used to cost four processes
plus three per commit. A work tree git itself must judge (a ``.gitignore``, a nested
repository, a FIFO or other special file) or a repository configured otherwise (signing,
another author, hooks) is committed with ``git add -A`` and ``git
commit`` as before. ``tests/unit/test_git_helper.py`` checks the result with git's
``fsck``, ``status`` and ``ls-files``.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import time
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

NAME, EMAIL = "Test", "test@example.invalid"
CONFIG = f"""\
[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = false
\tlogallrefupdates = true
[user]
\temail = {EMAIL}
\tname = {NAME}
[commit]
\tgpgsign = false
"""


class _GitJudges(Exception):
    """The work tree holds something only git itself should decide about."""


def run_git(repo: Path, *args: str) -> None:
    """git ``args`` in the existing repository ``repo``, committing as the test's author."""
    subprocess.run(
        ["git", "-c", f"user.email={EMAIL}", "-c", f"user.name={NAME}", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


class GitRepo:
    """A real git repository in a temp dir, committed to by the test."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        if (path / ".git").exists():  # an existing repository: git sets it up
            self.git("init", "-q", "-b", "main")
            self.git("config", "user.email", EMAIL)
            self.git("config", "user.name", NAME)
            self.git("config", "commit.gpgsign", "false")
            return
        dot = path / ".git"
        for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags", "info"):
            (dot / sub).mkdir(parents=True)
        (dot / "HEAD").write_text("ref: refs/heads/main\n")
        (dot / "config").write_text(CONFIG)

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.path, check=True, capture_output=True, text=True
        ).stdout.strip()

    def write(self, rel: str, text: str) -> Path:
        p = self.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p

    def remove(self, rel: str) -> None:
        self.git("rm", "-q", "-r", rel)

    def commit(self, message: str = "change") -> str:
        try:
            return self._commit_objects(message)
        except _GitJudges:
            self.git("add", "-A")
            self.git("commit", "-q", "--allow-empty", "-m", message)
            return self.git("rev-parse", "HEAD")

    # -- the objects git would write ------------------------------------------------------

    def _store(self, kind: str, body: bytes) -> bytes:
        raw = f"{kind} {len(body)}\0".encode() + body
        digest = hashlib.sha1(raw, usedforsecurity=False).digest()
        hexsha = digest.hex()
        obj = self.path / ".git" / "objects" / hexsha[:2] / hexsha[2:]
        if not obj.exists():
            obj.parent.mkdir(exist_ok=True)
            tmp = obj.with_name(f"tmp_{os.getpid()}_{hexsha[2:]}")
            tmp.write_bytes(zlib.compress(raw, 1))
            tmp.replace(obj)
        return digest

    def _tree(self, here: Path, entries: list[tuple[bytes, os.stat_result, bytes]]) -> bytes | None:
        """The tree of directory ``here`` (``None``: nothing tracked under it); the files
        under it appended to ``entries`` (path in the repository, stat, blob id)."""
        items: list[tuple[bytes, bytes, bytes]] = []  # (sort key, mode, name + id)
        for child in here.iterdir():
            name = os.fsencode(child.name)
            if name == b".git" and here == self.path:
                continue
            if name in (b".git", b".gitignore", b".gitattributes", b".gitmodules"):
                raise _GitJudges
            st = child.lstat()
            if stat.S_ISDIR(st.st_mode):
                sub = self._tree(child, entries)
                if sub is not None:
                    items.append((name + b"/", b"40000", name + b"\0" + sub))
                continue
            if stat.S_ISLNK(st.st_mode):
                mode, blob = b"120000", os.fsencode(child.readlink())
            elif stat.S_ISREG(st.st_mode):
                mode = b"100755" if st.st_mode & stat.S_IXUSR else b"100644"
                blob = child.read_bytes()
            else:
                raise _GitJudges
            sha = self._store("blob", blob)
            entries.append((os.fsencode(child.relative_to(self.path)), st, sha))
            items.append((name, mode, name + b"\0" + sha))
        if not items:
            return None
        items.sort()
        return self._store("tree", b"".join(mode + b" " + rest for _, mode, rest in items))

    def _head_ref(self) -> tuple[str, str | None]:
        """The ref HEAD names (``HEAD`` itself when detached) and its commit, if any."""
        dot = self.path / ".git"
        head = (dot / "HEAD").read_text().strip()
        ref = head.removeprefix("ref: ") if head.startswith("ref: ") else "HEAD"
        loose = dot / ref
        if loose.exists():
            return ref, loose.read_text().strip()
        packed = dot / "packed-refs"
        if packed.exists():
            for line in packed.read_text().splitlines():
                sha, _, name = line.partition(" ")
                if name == ref:
                    return ref, sha
        return ref, None

    def _own_config(self) -> None:
        """Raise ``_GitJudges`` unless the repository commits as set up here: a test that
        configured signing, another author or hooks gets git's own commit."""
        dot = self.path / ".git"
        section, seen = "", set()
        for raw in (dot / "config").read_text().splitlines():
            line = raw.strip()
            if line.startswith("["):
                section = line.strip("[]").split()[0].lower()
            elif "=" in line:
                key, _, value = line.partition("=")
                seen.add((f"{section}.{key.strip().lower()}", value.strip()))
        mine = {("user.email", EMAIL), ("user.name", NAME), ("commit.gpgsign", "false")}
        judged = {k for k, _ in seen if k.startswith(("user.", "commit.", "gpg.", "i18n.", "core.hookspath"))}
        if judged - {k for k, _ in mine} or not mine <= seen:
            raise _GitJudges
        hooks = dot / "hooks"
        if hooks.is_dir() and any(not p.name.endswith(".sample") for p in hooks.iterdir()):
            raise _GitJudges

    def _commit_objects(self, message: str) -> str:
        self._own_config()
        entries: list[tuple[bytes, os.stat_result, bytes]] = []
        tree = self._tree(self.path, entries) or self._store("tree", b"")
        ref, parent = self._head_ref()
        stamp = f"{int(time.time())} +0000"
        who = f"{NAME} <{EMAIL}> {stamp}"
        body = f"tree {tree.hex()}\n" + (f"parent {parent}\n" if parent else "")
        body += f"author {who}\ncommitter {who}\n\n{message.rstrip()}\n"
        sha = self._store("commit", body.encode()).hex()
        self._write_index(entries)
        target = self.path / ".git" / ref
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(sha + "\n")
        return sha

    def _write_index(self, entries: list[tuple[bytes, os.stat_result, bytes]]) -> None:
        """A version-2 index of ``entries`` with their stat data: ``git status`` clean."""
        out = [b"DIRC", (2).to_bytes(4, "big"), len(entries).to_bytes(4, "big")]
        for path, st, sha in sorted(entries, key=lambda e: e[0]):
            if stat.S_ISLNK(st.st_mode):
                mode = 0o120000
            else:
                mode = 0o100755 if st.st_mode & stat.S_IXUSR else 0o100644
            fields = (
                int(st.st_ctime),
                st.st_ctime_ns % 1_000_000_000,
                int(st.st_mtime),
                st.st_mtime_ns % 1_000_000_000,
                st.st_dev,
                st.st_ino,
                mode,
                st.st_uid,
                st.st_gid,
                st.st_size,
            )
            entry = b"".join((f & 0xFFFFFFFF).to_bytes(4, "big") for f in fields)
            entry += sha + min(len(path), 0xFFF).to_bytes(2, "big") + path
            entry += b"\0" * (8 - (len(entry) % 8))
            out.append(entry)
        data = b"".join(out)
        index = self.path / ".git" / "index"
        tmp = index.with_name("index.tmp")
        tmp.write_bytes(data + hashlib.sha1(data, usedforsecurity=False).digest())
        tmp.replace(index)
