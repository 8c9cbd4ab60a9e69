"""Source: read the tree of one git commit (never the work tree), or a plain directory.

Input: a repository location and a ref. Output: a ``SourceSnapshot`` whose ``files``
is a read-only ``FileView``. I/O (git). Must never read a dirty work tree for a commit,
and never hand out a path outside the repository root (``..`` and symlinks included).
``init_repository`` is the one writer: the first commit of a repository ``reconciler
import`` has just written.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.errors import ManifestError, SourceError
from reconciler.manifests import limits
from reconciler.manifests.paths import join_path
from reconciler.model import SourceSnapshot
from reconciler.model.identifiers import is_remote_url, normalized_remote
from reconciler.source.files import DirView as DirView  # re-exported: the file views live here
from reconciler.source.tree import GitTreeView as GitTreeView
from reconciler.source.tree import corrupt_object
from reconciler.wording.escape import printable

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import git

# GitPython (and gitdb) are imported by the functions that read git, not here: a build
# of a work tree (``DirView``, reached through this package) starts without them.


def clean_path(path: str, base: str = "") -> str:
    """Join ``path`` onto ``base`` lexically and refuse anything that leaves the root.

    Returns a POSIX path relative to the root ("" is the root itself).
    """
    return join_path(base, path)


def open_repo(path: str | os.PathLike[str]) -> git.Repo:
    import git

    try:
        return git.Repo(path, search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as err:
        raise SourceError(f"{path}: not a git repository") from err


def work_tree_root(path: str | os.PathLike[str]) -> tuple[str, str] | None:
    """The work tree holding ``path`` (found upwards, as git does) and ``path`` relative
    to its top (``""`` at the top); ``None`` outside a work tree (a bare repository too).
    Asked of git itself (``rev-parse``): a command that reads one commit starts without
    GitPython."""
    import subprocess

    start = Path(path)
    if not start.is_dir():  # a file in the work tree is found from its directory
        if not start.exists():
            return None
        start = start.parent
    try:
        found = subprocess.run(
            ["git", "-C", os.fspath(start), "rev-parse", "--show-toplevel", "--show-cdup"],
            capture_output=True,
            check=False,
        )
    except OSError:  # no git, or no such directory
        return None
    lines = found.stdout.decode("utf-8", "surrogateescape").split("\n")
    if found.returncode != 0 or len(lines) < 2 or not lines[0]:
        return None
    top = lines[0]  # with its symbolic links resolved: the path as given, when it is the same
    given = os.path.normpath(start.absolute() / lines[1])
    if given != top and Path(given).resolve() == Path(top).resolve():
        top = given
    try:
        prefix = Path(path).resolve().relative_to(Path(top).resolve()).as_posix()
    except ValueError:  # reached through a symlink from elsewhere
        return None
    return top, "" if prefix == "." else prefix


def first_parents(path: str | os.PathLike[str], commit: str, limit: int) -> list[str]:
    """The first-parent ancestors of ``commit`` (not itself), newest first, at most
    ``limit`` (what a host that applied every merge of a branch applied before it)."""
    import git

    repo = open_repo(path)
    try:
        out = str(repo.git.rev_list("--first-parent", f"--max-count={limit + 1}", commit)).split()
    except git.GitCommandError as err:
        raise SourceError(f"{printable(str(path))}: cannot list the history of {commit[:12]}") from err
    return out[1:]


def former_identity(path: str | os.PathLike[str]) -> str:
    """What older versions named the repository at ``path`` by when its remote is a local
    path (that path, normalized): marks of that owner are this one's, re-marked. "" when
    the remote is not a local path."""
    import git

    try:
        repo = git.Repo(path, search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return ""
    remotes = {r.name: r for r in repo.remotes}
    name = "origin" if "origin" in remotes else (next(iter(remotes)) if len(remotes) == 1 else "")
    url = next(iter(remotes[name].urls), "") if name else ""
    if not url or (is_remote_url(url) and not url.lower().startswith("file:")):
        return ""
    if not is_remote_url(url):  # a path, relative to the repository
        url = str((Path(repo.working_tree_dir or repo.git_dir) / url).resolve())
    return normalized_remote(url)


def repository_identity(path: str | os.PathLike[str]) -> str:
    """What names the repository at ``path`` whichever clone it is: the normalized URL of
    its remote (``origin``, else its only remote, else the current branch's upstream)
    when that is a network URL, else ``git:<root commit>`` (the oldest commit without a
    parent reachable from HEAD: a remote that is a local path names no repository), else
    (no commit yet) its absolute path."""
    import git

    try:
        repo = git.Repo(path, search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return str(Path(path).resolve())
    remotes = {r.name: r for r in repo.remotes}
    name = "origin" if "origin" in remotes else (next(iter(remotes)) if len(remotes) == 1 else "")
    if not name and remotes and not repo.head.is_detached:
        tracking = repo.head.reference.tracking_branch()
        name = tracking.remote_name if tracking is not None else ""
    if name:
        url = next(iter(remotes[name].urls), "")
        # A local path (or file:// URL) is no identity: a clone of a clone would be
        # another owner than the repository it was cloned from. The root commit is.
        if url and is_remote_url(url) and not url.lower().startswith("file:"):
            return normalized_remote(url)
    try:
        roots = repo.git.rev_list("--max-parents=0", "HEAD").split()
    except git.GitCommandError:
        roots = []
    if roots:
        oldest = min(roots, key=lambda sha: (repo.commit(sha).committed_date, sha))
        return f"git:{oldest}"
    return str(Path(path).resolve())


_SHA = re.compile(r"^[0-9a-f]{40}$")
_HEX = re.compile(r"^[0-9a-f]{7,40}$")


def resolve_commit(repo: git.Repo, ref: str = "HEAD", location: str = "") -> git.Commit:
    """The commit ``ref`` names, in any form git itself takes (``HEAD@{yesterday}``, ``@{-1}``,
    ``:/message``, ``v1^{commit}``); anything else is a one-line ``SourceError`` naming
    ``location`` (default: the git directory)."""
    import git
    from gitdb.exc import BadName, BadObject

    where = f"{printable(location or str(repo.git_dir))}: cannot resolve ref {printable(repr(ref))}"
    try:
        if _SHA.match(ref):
            return repo.commit(ref)
        if not ref or "\0" in ref:
            raise SourceError(where)
        sha = repo.git.rev_parse("--verify", "--quiet", "--end-of-options", ref).strip()
        return repo.commit(sha)  # peels a tag; a tree or a blob is an error
    except (BadName, BadObject, ValueError, KeyError, NotImplementedError, git.GitCommandError) as err:
        hint = ""
        if (Path(repo.git_dir) / "shallow").exists():
            hint = (
                ": this is a shallow clone without that history; fetch it "
                "(actions/checkout: fetch-depth: 0; or git fetch --unshallow)"
            )
        raise SourceError(f"{where} to a commit{hint}") from err


def init_repository(path: str | os.PathLike[str], files: Sequence[str], message: str) -> str:
    """Make ``path`` a new git repository whose first commit holds ``files`` (paths
    relative to it, already written); the commit's sha."""
    import git

    repo = git.Repo.init(path)
    repo.index.add(sorted(files))
    author = git.Actor("reconciler import", "reconciler@localhost")
    return str(repo.index.commit(message, author=author, committer=author).hexsha)


def read_snapshot(repo_path: str | os.PathLike[str], ref: str = "HEAD") -> SourceSnapshot:
    """The tree of ``ref`` in the repository at ``repo_path``, read with git's plumbing
    (``source.catfile``: a command that reads one commit starts without GitPython)."""
    from reconciler.source.catfile import read_commit

    return read_commit(repo_path, ref)


def snapshot_reader(repo_path: str | os.PathLike[str], location: str = "") -> Callable[[str], SourceSnapshot]:
    """``read_snapshot`` for many refs of one repository (``revisionName: git:<commit>``
    pins): the repository is opened once, at the first read, git's object readers are
    kept (a hex sha is looked up without starting git), and commits of one tree share one
    file view, so N pins cost N object reads, not N repository starts. ``location``: how
    the snapshots and errors name the repository (default ``repo_path``; the daemon's
    mirror is named by its source's URL). GitPython is imported at the first read: a
    revision without such pins never starts it."""
    where = location or str(repo_path)
    opened: list[git.Repo] = []
    views: dict[str, SourceSnapshot] = {}

    def read(ref: str) -> SourceSnapshot:
        import git
        from gitdb.exc import BadName, BadObject

        if not opened:
            try:
                opened.append(open_repo(repo_path))
            except SourceError as err:
                raise SourceError(f"{printable(where)}: not a git repository") from err
        repo = opened[0]
        commit = None
        if _HEX.match(ref):
            with contextlib.suppress(BadName, BadObject, ValueError, KeyError, git.GitCommandError):
                commit = repo.commit(ref)
        if commit is None:
            commit = resolve_commit(repo, ref, location)
        tree = str(commit.tree.hexsha)
        seen = views.get(tree)
        if seen is None:
            seen = views[tree] = snapshot_of(repo, commit, where, ref)
            return seen
        return SourceSnapshot(
            repo=seen.repo,
            ref=ref,
            commit=str(commit.hexsha),
            files=seen.files,
            message=str(commit.message).strip(),
            committed_at=float(commit.committed_date),
            tree=tree,
        )

    return read


def snapshot_of(repo: git.Repo, commit: git.Commit, location: str, ref: str) -> SourceSnapshot:
    import git

    try:
        listing = str(repo.git.ls_tree("-r", "-t", "-z", "--full-tree", commit.hexsha))
    except git.GitCommandError as err:
        raise SourceError(f"{location}: cannot read tree of {commit.hexsha}") from err
    view = GitTreeView(listing, str(commit.hexsha), _odb_reader(repo, str(commit.hexsha)))
    return SourceSnapshot(
        repo=location,
        ref=ref,
        commit=str(commit.hexsha),
        files=view,
        message=str(commit.message).strip(),
        committed_at=float(commit.committed_date),
        tree=str(commit.tree.hexsha),
    )


def _odb_reader(repo: git.Repo, commit: str) -> Callable[[str, str], bytes]:
    """A blob's bytes from GitPython's object database; an object git cannot read (a
    corrupt or missing object: GitPython raises ValueError and others) is a
    ``SourceError``."""
    import git
    from gitdb.exc import BadName, BadObject

    def read(sha: str, path: str) -> bytes:
        try:
            stream = repo.odb.stream(bytes.fromhex(sha))
            if problem := limits.blob_problem(stream.size):  # checked before reading it
                raise ManifestError(problem, path)
            return bytes(stream.read())
        except (ValueError, OSError, git.GitError, BadName, BadObject) as err:
            raise SourceError(corrupt_object(str(repo.git_dir), sha, path, commit, err)) from err

    return read
