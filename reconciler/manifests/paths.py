"""Repository paths: joined lexically, never above the repository root.

Input: a directory and a relative path from a kustomization or a VM (repository
paths, ``/``-separated). Output: the joined path, or an ``OverlayError``. Pure.
"""

from __future__ import annotations

import posixpath

from reconciler.errors import OverlayError


def join_path(base: str, rel: str) -> str:
    """Join lexically; refuse absolute paths and anything above the root (an overlay
    build remembers the paths it joined: ``overlays.loader.Loader.join``)."""
    if rel.startswith("/"):
        raise OverlayError(f"absolute path {rel!r} is not allowed: paths are relative to the kustomization")
    simple = f"{base}/{rel}" if base and rel else base or rel
    parts = simple.split("/")
    if simple and "" not in parts and "." not in parts and ".." not in parts:
        return simple  # nothing to resolve: what normpath would return
    joined = posixpath.normpath(posixpath.join(base, rel)) if (base or rel) else "."
    if joined == ".":
        return ""
    if joined == ".." or joined.startswith("../"):
        raise OverlayError(f"path {rel!r} leaves the repository root")
    return joined
