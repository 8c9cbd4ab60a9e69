"""A commit's tree as a file view: paths resolved inside the tree (symlinks followed,
never out of the root), blobs read through the reader it is given.

Input: the commit's ``git ls-tree -r -t -z`` listing and a blob reader (GitPython's
object database, or one ``git cat-file --batch`` process: ``source.catfile``). Output:
the ``FileView`` the overlay engine reads through. Pure but for the reader.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from reconciler.errors import OverlayError
from reconciler.manifests.paths import join_path
from reconciler.wording.escape import printable

if TYPE_CHECKING:
    from collections.abc import Callable

SYMLINK_MODE = 0o120000
TREE_MODE = 0o040000
GITLINK_MODE = 0o160000  # a submodule: a commit of another repository
_MAX_LINKS = 40


def corrupt_object(git_dir: str, sha: str, path: str, commit: str, err: Exception) -> str:
    """What a blob git cannot read (a corrupt or missing object) is said as: the source's
    fault, not ours."""
    return (
        f"{git_dir}: cannot read object {sha[:12]} ({path}) of commit "
        f"{commit[:12]}: the repository is corrupt: {type(err).__name__}"
    )


class GitTreeView:
    """FileView over one commit's tree: its ``git ls-tree -r -t -z`` listing, its blobs
    read through ``read_blob(sha, path)`` (which raises ``SourceError`` for an object
    git cannot read, ``ManifestError`` for one too large).

    It remembers what was asked of it in this process (``consulted``: the paths read,
    looked up or tested, present or not; ``listed``: the directories listed), so a
    command can say which edits of the work tree its build did not read."""

    def __init__(self, listing: str, commit: str, read_blob: Callable[[str, str], bytes]) -> None:
        self._commit = commit
        self._read_blob = read_blob
        self.consulted: set[str] = set()
        self.listed: set[str] = set()
        # path -> (mode, hexsha); directories map to their children.
        self._resolved: dict[str, str] = {}
        self._entries: dict[str, tuple[int, str]] = {}
        self._children: dict[str, list[str]] = {"": []}
        self._links = False  # whether the tree holds a symlink at all
        for record in listing.split("\0"):
            if not record:
                continue
            meta, path = record.split("\t", 1)
            mode_s, _type, sha = meta.split(" ")
            mode = int(mode_s, 8)
            self._entries[path] = (mode, sha)
            self._links = self._links or mode == SYMLINK_MODE
            parent = posixpath.dirname(path)
            self._children.setdefault(parent, []).append(posixpath.basename(path))
            if mode == TREE_MODE:
                self._children.setdefault(path, [])

    @property
    def commit(self) -> str:
        return self._commit

    def _resolve(self, path: str) -> str:
        """Follow symlinks inside the tree; refuse links that leave the root. A commit's
        tree never changes: each path is resolved once per view."""
        hit = self._resolved.get(path)
        if hit is None:
            if not self._links and path in self._entries:
                return path  # a path of the tree itself, and no link on the way to it
            hit = self._resolved[path] = self._resolve_uncached(path)
        return hit

    def _resolve_uncached(self, path: str) -> str:
        path = join_path("", path)
        for _ in range(_MAX_LINKS):
            parts = path.split("/") if path else []
            resolved = ""
            for i, part in enumerate(parts):
                cur = f"{resolved}/{part}" if resolved else part
                entry = self._entries.get(cur)
                if entry is not None and entry[0] == SYMLINK_MODE:
                    target = self._blob(entry[1], cur).decode()
                    try:
                        rest = "/".join(parts[i + 1 :])
                        cur = join_path(resolved, posixpath.join(target, rest) if rest else target)
                    except OverlayError as err:
                        raise OverlayError(f"symlink {cur!r} points outside the repository root") from err
                    path = cur
                    break
                resolved = cur
            else:
                return resolved
        raise OverlayError(f"too many levels of symlinks at {path!r}")

    def read(self, path: str) -> bytes:
        self.consulted.add(path)
        real = self._resolve(path)
        entry = self._entries.get(real)
        if entry is None or entry[0] == TREE_MODE:
            raise FileNotFoundError(path)
        if entry[0] == GITLINK_MODE:  # its commit is another repository's: nothing to read here
            raise OverlayError(
                f"{printable(path)} is a git submodule: its files are not part of this commit "
                "(commit the files themselves instead)"
            )
        return self._blob(entry[1], path)

    def _blob(self, sha: str, path: str) -> bytes:
        return self._read_blob(sha, path)

    def exists(self, path: str) -> bool:
        self.consulted.add(path)
        try:
            real = self._resolve(path)
        except OverlayError:
            return False
        entry = self._entries.get(real)
        return real == "" or (entry is not None and entry[0] != GITLINK_MODE)

    def is_dir(self, path: str) -> bool:
        try:
            real = self._resolve(path)
        except OverlayError:
            return False
        return real == "" or (real in self._entries and self._entries[real][0] == TREE_MODE)

    def listdir(self, path: str) -> list[str]:
        self.listed.add(path)
        real = self._resolve(path)
        if real not in self._children:
            raise NotADirectoryError(path)
        return sorted(self._children[real])

    def blob_id(self, path: str) -> str | None:
        self.consulted.add(path)
        try:
            real = self._resolve(path)
        except OverlayError:
            return None
        entry = self._entries.get(real)
        return entry[1] if entry else None
