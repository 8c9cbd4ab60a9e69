"""Overlays: build a directory of a repository snapshot like ``kustomize build``.

Input: a read-only ``FileView`` of one snapshot and an entry directory relative to its
root. Output: ``Manifest`` records in kustomize's order, each naming the file and line
it came from (generated objects name their kustomization). Pure: all bytes come through
the view, nothing outside its root is read, no remote bases, no plugins, no exec.

With a kustomization file (``kustomization.yaml``, ``kustomization.yml``,
``Kustomization``) the entry is built like kustomize 5 builds it; without one, every
``*.yaml``/``*.yml`` file below the entry is read, in path order.

Sharing: returned objects are shared with the build cache (and between builds). Treat
them as read-only — the project rule for every stage — and deep-copy before changing
one. Parsed files are cached by the view's ``blob_id`` and every per-object step is
memoised in the caller's ``OverlayCache``, so a rebuild after a one-file commit only
redoes that file's objects, and hands out the very same ``Manifest`` for every other
document (the identity promise of ``context.py``). Resource files are parsed through
the caller's mapper (``context.Mapper``).

Errors: ``OverlayError(message, path, line, column)`` naming the kustomization file and
the line of the entry at fault, or ``ManifestError`` for a YAML problem in a file.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from reconciler.context import SERIAL
from reconciler.errors import OverlayError
from reconciler.manifests.paths import join_path
from reconciler.model import Manifest
from reconciler.overlays.cache import OverlayCache
from reconciler.overlays.engine import KUSTOMIZATION_FILES, Builder
from reconciler.overlays.output import manifest

if TYPE_CHECKING:
    from collections.abc import Iterable

    from reconciler.context import Mapper
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import FileView, Problem

__all__ = [
    "OverlayCache",
    "OverlayError",
    "build",
    "entry_directories",
    "find_kustomization",
]


def find_kustomization(files: FileView, directory: str) -> str | None:
    """The kustomization file of ``directory``, or None."""
    return Builder(files, OverlayCache()).find_kustomization(join_path("", directory))


def entry_directories(files: FileView, near: str = "", limit: int = 5) -> list[str]:
    """Directories holding a kustomization, those most like ``near`` first (at most
    ``limit``): the candidates a wrong ``--path`` is told about."""
    found: list[str] = []
    queue = [""]
    seen = 0
    while queue and len(found) < 200 and seen < 2000:
        d = queue.pop(0)
        seen += 1
        try:
            names = sorted(files.listdir(d))
        except (OSError, KeyError, ValueError):
            continue
        if any(n in KUSTOMIZATION_FILES for n in names):
            found.append(d or ".")
        for n in names:
            sub = f"{d}/{n}" if d else n
            if not n.startswith(".") and files.is_dir(sub):
                queue.append(sub)
    return sorted(found, key=lambda d: -difflib.SequenceMatcher(None, d, near).ratio())[:limit]


class Built(tuple[Manifest, ...]):
    """A build's manifests (a tuple), and the warnings of the build (``Problem``s at the
    kustomization's file:line: a patch whose target matches nothing), which change no
    byte of its output."""

    warnings: tuple[Problem, ...]

    def __new__(cls, items: Iterable[Manifest], warnings: tuple[Problem, ...] = ()) -> Built:
        out = super().__new__(cls, items)
        out.warnings = warnings
        return out


def build(
    files: FileView,
    entry: str,
    cache: OverlayCache | None = None,
    mapper: Mapper = SERIAL,
    keys: Keys | None = None,
) -> tuple[Manifest, ...]:
    """Build ``entry`` (a directory relative to the view's root); see the module docstring.
    Without ``cache`` the build is cold (nothing is kept). ``keys``: what SOPS-encrypted
    files are opened with (None: such a file is an error; ``SEALED``: read without
    keys, values as stand-ins)."""
    cache = cache if cache is not None else OverlayCache()
    entry = join_path("", entry.strip("/") if entry not in ("", ".", "./") else "")
    if not files.is_dir(entry):
        found = entry_directories(files, entry)
        hint = f"; entry directories here: {', '.join(found)}" if found else ""
        raise OverlayError(f"{entry or '.'} is not a directory{hint}")
    with cache.lock:
        cache.begin()
        try:
            builder = Builder(files, cache, keys, mapper)
            if builder.find_kustomization(entry) is None:
                return _plain(builder, entry)
            built = builder.build(entry)
            return Built(cache.memo_each(("manifest",), built, manifest, None), tuple(builder.warnings))
        finally:
            cache.end()


def _plain(builder: Builder, entry: str) -> tuple[Manifest, ...]:
    files, cache = builder.files, builder.cache
    out: list[Manifest] = []
    overlays: list[str] = []
    paths = _yaml_files(files, entry, overlays)
    if overlays:  # patches and bases would be read as objects: a forgotten --path
        shown = ", ".join(sorted(overlays)[:5]) + (", …" if len(overlays) > 5 else "")
        raise OverlayError(
            f"{entry or '.'} has no kustomization file but directories below it do ({shown}): "
            "their files are overlay input, not objects; give the entry directory (--path), "
            f"or add a kustomization.yaml to {entry or '.'} listing them"
        )
    for path in paths:
        blob = builder.blob(path)
        key = None if blob is None else f"plain:{blob}"
        docs = cache.docs_get(path, key)
        if docs is None:
            docs = builder.plain_documents(path)
            cache.docs_put(path, key, docs)
        out.extend(docs)
    return tuple(out)


def _yaml_files(files: FileView, directory: str, overlays: list[str]) -> list[str]:
    """The YAML files below ``directory``; directories holding a kustomization go to ``overlays``."""
    found: list[str] = []
    for name in files.listdir(directory):
        if name.startswith("."):
            continue
        path = join_path(directory, name)
        if files.is_dir(path):
            found.extend(_yaml_files(files, path, overlays))
        elif name in KUSTOMIZATION_FILES:
            overlays.append(directory)
        elif name.endswith((".yaml", ".yml")):
            found.append(path)
    return sorted(found)
