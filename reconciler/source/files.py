"""A file view over a directory on disk (``reconciler build DIR``, ``-f`` files, tests).

Input: a root directory. Output: the ``FileView`` the overlay engine reads through:
paths relative to the root, resolved once each and confined to it (a symlink that
leads out is refused, a loop is an error), only regular files read (see
``limits.read_regular_file``). Never imports git: ``build`` starts without it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from reconciler.errors import OverlayError
from reconciler.manifests import limits
from reconciler.manifests.paths import join_path

__all__ = ["DirView"]


class DirView:
    """FileView over a directory on disk (for ``build DIR`` and ``-f`` files).

    Each path is resolved once per view, one component at a time on top of its
    parent's resolution (a symlink is followed with ``realpath`` where one is met),
    and confined to the root: nothing outside it is ever read, listed or stat'ed
    as if inside. A view is meant for one build; a tree changed under it may show
    stale resolutions, and stale answers of ``exists``, ``is_dir`` and ``blob_id``
    (each path's status is asked of the system once per view: a build asks it of
    the same few hundred paths thousands of times).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self._root_s = str(self.root)
        self._prefix = self._root_s.rstrip("/") + "/"
        self._resolved: dict[str, str] = {"": self._root_s}
        self._reals: dict[str, str] = {}  # a path as asked -> its real path
        self._stats: dict[str, os.stat_result | None] = {}  # real path -> its status (None: none)

    def _real(self, path: str) -> str:
        real = self._reals.get(path)
        if real is None:
            real = self._reals[path] = self._resolve(join_path("", path), path)
        return real

    def _resolve(self, rel: str, shown: str) -> str:
        hit = self._resolved.get(rel)
        if hit is not None:
            return hit
        parent, _, name = rel.rpartition("/")
        joined = self._resolve(parent, shown).rstrip("/") + "/" + name
        try:
            is_link = stat.S_ISLNK(os.lstat(joined).st_mode)
        except OSError:  # missing (or under a non-directory): nothing to follow
            is_link = False
        real = joined
        if is_link:
            try:
                real = os.path.realpath(joined, strict=True)
            except FileNotFoundError:  # a dangling link: where it points, for the check below
                real = os.path.realpath(joined)
            except OSError as err:  # ELOOP
                raise OverlayError(f"path {shown!r}: a symlink loop") from err
            if real != self._root_s and not real.startswith(self._prefix):
                raise OverlayError(f"path {shown!r} resolves outside the repository root (symlink?)")
        self._resolved[rel] = real
        return real

    def _stat(self, path: str) -> os.stat_result | None:
        """The status of ``path`` (symlinks followed), once per view; None: no such file,
        or one outside the root."""
        try:
            real = self._real(path)
        except OverlayError:
            return None
        if real in self._stats:
            return self._stats[real]
        try:
            st: os.stat_result | None = os.stat(real)  # noqa: PTH116 - hot path: str, not Path
        except (OSError, ValueError):
            st = None
        self._stats[real] = st
        return st

    def read(self, path: str) -> bytes:
        return limits.read_regular_file(self._real(path), path)

    def exists(self, path: str) -> bool:
        return self._stat(path) is not None

    def is_dir(self, path: str) -> bool:
        st = self._stat(path)
        return st is not None and stat.S_ISDIR(st.st_mode)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(self._real(path)))  # noqa: PTH208 - hot path: str, not Path

    def blob_id(self, path: str) -> str | None:
        st = self._stat(path)
        if st is None or not stat.S_ISREG(st.st_mode):
            return None
        return f"{path}:{st.st_mtime_ns}:{st.st_size}"
