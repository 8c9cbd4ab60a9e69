"""One commit read with git's own plumbing, without GitPython.

Input: a repository path (its work tree's top, or a git directory) and a ref. Output:
a ``SourceSnapshot`` whose ``files`` is a ``GitTreeView``. I/O (git): ``git rev-parse``
names the commit, ``git ls-tree`` lists its tree, and one ``git cat-file --batch``
process reads its objects, one round trip each. What the commands that read one
commit use (``build --ref``, ``diff``, ``plan``): GitPython's import and its start-up
processes cost more than such a command's reading. The errors are GitPython's path's.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import subprocess
import threading
import weakref
from pathlib import Path
from typing import IO, TYPE_CHECKING

from reconciler.errors import ManifestError, SourceError
from reconciler.manifests import limits
from reconciler.model import SourceSnapshot
from reconciler.source.tree import GitTreeView, corrupt_object
from reconciler.wording.escape import printable

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

_HEX40 = frozenset("0123456789abcdef")
_MAX_TAGS = 16  # tags of tags followed to a commit
_CHUNK = 1 << 20
PREFETCH = 512  # blobs asked of git in one round trip: a small tree's at once, else a directory's
_PREFETCH_BYTES = 32 << 20  # what a snapshot holds read ahead, at most
_MANIFEST = (".yaml", ".yml", ".json")  # the files a build reads (with ``Kustomization``)


class MissingObject(LookupError):
    """``git cat-file`` has no such object (or the name is ambiguous)."""


class CatFile:
    """A ``git cat-file --batch`` process over one repository, started at the first read
    and ended with this object (or at exit). Safe to share between threads."""

    def __init__(self, repo_path: str) -> None:
        self._repo_path = repo_path
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        if self._proc is None:
            self._proc = subprocess.Popen(
                ["git", "-C", self._repo_path, "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            weakref.finalize(self, _stop, self._proc)
        stdin, stdout = self._proc.stdin, self._proc.stdout
        if stdin is None or stdout is None:  # never: both are pipes
            raise OSError("git cat-file has no pipes")
        return stdin, stdout

    def read(self, name: str, path: str = "") -> tuple[str, bytes]:
        """The type and content of object ``name``; ``MissingObject`` when git has none,
        ``ManifestError`` (at ``path``) for a blob over ``limits.MAX_FILE_BYTES``, OSError
        when the process is gone."""
        if "\n" in name or not name:
            raise MissingObject(name)
        with self._lock:
            stdin, stdout = self._pipes()
            stdin.write(name.encode() + b"\n")
            stdin.flush()
            header = stdout.readline()
            parts = header.split()
            if len(parts) != 3:  # "<name> missing", "<name> ambiguous", or the process died
                if not header:
                    raise OSError(f"git cat-file ended reading {name}")
                raise MissingObject(name)
            kind, size = parts[1].decode(), int(parts[2])
            if kind == "blob" and (problem := limits.blob_problem(size)):
                _skip(stdout, size + 1)  # never held: read past it
                raise ManifestError(problem, path)
            data = stdout.read(size)
            stdout.read(1)  # the line feed after the content
            if len(data) != size:
                raise OSError(f"git cat-file ended reading {name}")
            return kind, data

    def blobs(self, shas: Sequence[str], budget: int) -> dict[str, bytes]:
        """The blobs of ``shas`` asked of git together, in one round trip (at most
        ``PREFETCH``: the requests fit in the pipe, so writing them never waits for git):
        those git has as blobs within ``limits.MAX_FILE_BYTES``, while their bytes stay
        within ``budget``. The rest are left out: a read of one alone says why."""
        out: dict[str, bytes] = {}
        with self._lock:
            stdin, stdout = self._pipes()
            stdin.write(b"".join(sha.encode() + b"\n" for sha in shas[:PREFETCH]))
            stdin.flush()
            for sha in shas[:PREFETCH]:
                parts = stdout.readline().split()
                if len(parts) != 3:  # missing, or the process died (then the next read says so)
                    if not parts:
                        break
                    continue
                size = int(parts[2])
                if parts[1] != b"blob" or limits.blob_problem(size) or size > budget:
                    _skip(stdout, size + 1)
                    continue
                data = stdout.read(size)
                stdout.read(1)
                if len(data) != size:
                    break
                budget -= size
                out[sha] = data
        return out


def _skip(stream: IO[bytes], size: int) -> None:
    while size > 0:
        got = stream.read(min(size, _CHUNK))
        if not got:
            return
        size -= len(got)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _git(repo_path: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", repo_path, *args], capture_output=True, check=False)


def _git_dir(repo_path: str, ref: str) -> tuple[str, str]:
    """The git directory of the repository at ``repo_path`` (its top or its git
    directory: not a directory below either, as GitPython opens it) and what ``ref``
    names ("" when it names nothing)."""
    proc = _git(repo_path, "rev-parse", "--absolute-git-dir", "--show-prefix", "--verify", "--quiet",
                "--end-of-options", ref)  # fmt: skip
    lines = proc.stdout.decode(errors="surrogateescape").split("\n")
    if len(lines) < 2 or not lines[0].startswith("/"):  # no git directory: a ref git refuses prints it
        raise SourceError(f"{repo_path}: not a git repository")
    git_dir, prefix = lines[0], lines[1]
    top = os.path.realpath(repo_path)
    if os.path.realpath(git_dir) != top and (prefix or not Path(repo_path, ".git").exists()):
        raise SourceError(f"{repo_path}: not a git repository")
    sha = lines[2].strip() if proc.returncode == 0 and len(lines) > 2 else ""
    return git_dir, sha


def read_commit(repo_path: str | os.PathLike[str], ref: str = "HEAD") -> SourceSnapshot:
    """The tree of ``ref`` in the repository at ``repo_path`` (``source.read_snapshot``)."""
    location = str(repo_path)
    if not Path(location).is_dir():
        raise SourceError(f"{location}: not a git repository")
    git_dir, sha = _git_dir(location, ref if ref and "\0" not in ref else "HEAD")
    where = f"{printable(git_dir)}: cannot resolve ref {printable(repr(ref))}"
    if not ref or "\0" in ref:
        raise SourceError(where)
    objects = CatFile(location)
    name = ref if len(ref) == 40 and _HEX40.issuperset(ref) else sha
    commit, body = _peeled(objects, name, where, git_dir)
    headers, message = _commit_parts(body)
    tree = headers.get("tree", "")
    proc = _git(location, "ls-tree", "-r", "-t", "-z", "--full-tree", commit)
    if proc.returncode != 0:
        raise SourceError(f"{location}: cannot read tree of {commit}")
    listing = proc.stdout.decode(errors="replace")
    committer = headers.get("committer", "").rsplit(" ", 2)
    committed_at = float(committer[1]) if len(committer) == 3 and committer[1].isdigit() else 0.0
    encoding = headers.get("encoding", "utf-8")
    try:
        text = message.decode(encoding, "replace")
    except LookupError:  # an encoding Python does not know
        text = message.decode("utf-8", "replace")

    def read_blob(blob: str, path: str) -> bytes:
        try:
            kind, data = objects.read(blob, path)
        except (MissingObject, OSError) as err:
            raise SourceError(corrupt_object(git_dir, blob, path, commit, err)) from err
        if kind != "blob":
            raise SourceError(corrupt_object(git_dir, blob, path, commit, ValueError(kind)))
        return data

    return SourceSnapshot(
        repo=location,
        ref=ref,
        commit=commit,
        files=GitTreeView(listing, commit, _read_ahead(objects, listing, read_blob)),
        message=text.strip(),
        committed_at=committed_at,
        tree=tree,
    )


def _read_ahead(
    objects: CatFile, listing: str, read_blob: Callable[[str, str], bytes]
) -> Callable[[str, str], bytes]:
    """``read_blob`` with the manifests of the tree read ahead at the second read of a
    scope: all of them in one round trip when they are at most ``PREFETCH``, else those
    of the directory read from, ``PREFETCH`` a round trip (a cold build reads a
    kustomization's neighbours: one wait for git per directory's ``PREFETCH`` files,
    not per file). The first read of a scope is of its file alone:
    a build whose caches hold the rest (the daemon's after a one-file commit) reads only
    what changed."""
    by_dir: dict[str, list[str]] = {}
    for record in listing.split("\0"):
        meta, _, path = record.partition("\t")
        if meta.startswith(("100644 blob ", "100755 blob ")) and (
            path.endswith(_MANIFEST) or posixpath.basename(path) == "Kustomization"
        ):
            by_dir.setdefault(posixpath.dirname(path), []).append(meta[-40:])
    every = [sha for shas in by_dir.values() for sha in shas]
    held: dict[str, bytes] = {}
    asked: set[str | None] = set()  # the directories read ahead (None: the whole tree)
    once: set[str | None] = set()  # the scopes read from once, one file alone
    alone: set[str] = set()  # the blobs so read: read again, they are no scope's second read
    left = _PREFETCH_BYTES  # bytes still to be read ahead

    def read(blob: str, path: str) -> bytes:
        nonlocal left
        data = held.get(blob)
        if data is None:
            scope = None if len(every) <= PREFETCH else posixpath.dirname(path)
            if scope not in once:
                once.add(scope)
                alone.add(blob)
            elif blob in alone:
                pass
            elif scope not in asked:
                asked.add(scope)
                ahead = every if scope is None else by_dir.get(scope, [])
                if len(ahead) > 1:
                    with contextlib.suppress(OSError):  # the read itself says what is wrong
                        for start in range(0, len(ahead), PREFETCH):  # a round trip per PREFETCH
                            got = objects.blobs(ahead[start : start + PREFETCH], left)
                            left -= sum(map(len, got.values()))
                            held.update(got)
                data = held.get(blob)
        return data if data is not None else read_blob(blob, path)

    return read


def _peeled(objects: CatFile, name: str, where: str, git_dir: str) -> tuple[str, bytes]:
    """The sha and body of the commit ``name`` names, tags peeled; a tree, a blob or
    nothing is a ``SourceError`` (with the shallow clone's hint)."""
    for _ in range(_MAX_TAGS):
        try:
            kind, body = objects.read(name) if name else ("", b"")
        except (MissingObject, OSError):
            kind, body = "", b""
        if kind == "commit":
            return name, body  # a full sha: rev-parse's, the ref itself, or a tag's object
        if kind != "tag":
            break
        target = body.split(b"\n", 1)[0]
        if not target.startswith(b"object "):
            break
        name = target[len(b"object ") :].decode()
    hint = ""
    if (Path(git_dir) / "shallow").exists():
        hint = (
            ": this is a shallow clone without that history; fetch it "
            "(actions/checkout: fetch-depth: 0; or git fetch --unshallow)"
        )
    raise SourceError(f"{where} to a commit{hint}")


def _commit_parts(body: bytes) -> tuple[dict[str, str], bytes]:
    """A commit object's headers (the first of each name; continuation lines, a
    signature's, skipped) and its message."""
    head, _, message = body.partition(b"\n\n")
    headers: dict[str, str] = {}
    for line in head.split(b"\n"):
        if not line or line.startswith(b" "):
            continue
        key, _, value = line.partition(b" ")
        headers.setdefault(key.decode(errors="replace"), value.decode(errors="replace"))
    return headers, message
