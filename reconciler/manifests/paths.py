"""Repository paths: joined lexically, never above the repository root.

Input: a directory and a relative path from a kustomization or a VM (repository
paths, ``/``-separated). Output: the joined path, or an ``OverlayError``. Pure.
"""

from __future__ import annotations

import functools
import posixpath

from reconciler.errors import OverlayError


@functools.lru_cache(maxsize=65536)
def join_path(base: str, rel: str) -> str:
    """Join lexically; refuse absolute paths and anything above the root (memoized: a
    build joins the same few hundred paths tens of thousands of times)."""
    if rel.startswith("/"):
        raise OverlayError(f"absolute path {rel!r} is not allowed: paths are relative to the kustomization")
    joined = posixpath.normpath(posixpath.join(base, rel)) if (base or rel) else "."
    if joined == ".":
        return ""
    if joined == ".." or joined.startswith("../"):
        raise OverlayError(f"path {rel!r} leaves the repository root")
    return joined
