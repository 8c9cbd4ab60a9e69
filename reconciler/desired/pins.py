"""The revision pins of the desired state: the revisions a host's domains captured, and
the catalogs of other commits that ``revisionName: git:<commit>`` pins name.

Input: the live domains of a host (their ownership marks), a reader of other commits
(the caller's git: ``source.snapshot_reader``), an entry path, the caller's
``context.Context`` and SOPS keys. Output: the captured instancetype and preference
revisions by VM (``pins_from_live``), layers of pins merged (``merge_pins``), a
``CatalogAt`` that builds the catalog at a commit (each tree once, at most
``MAX_PIN_TREES`` of them), and a VM's pins without those equal to the repository's
current revision (``effective_pins``, so it shares its expansion with an unpinned
build). Pure: never imports git or the host; another commit is read through the
caller's reader.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler import catalog as catalog_stage
from reconciler import expand as expand_stage
from reconciler import overlays
from reconciler.catalog import CatalogCache
from reconciler.context import Context
from reconciler.errors import ManifestError
from reconciler.expand.pins import MATCHERS, matcher_facts

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from reconciler.expand.pins import CatalogAt
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import FileView, LiveDomain, Manifest, Obj, RevisionInfo, SourceSnapshot, VMKey
    from reconciler.model.trees import Shelf


def pins_from_live(live: Sequence[LiveDomain]) -> dict[VMKey, dict[str, RevisionInfo]]:
    """Captured instancetype/preference revisions by VM, from ownership marks."""
    pins: dict[VMKey, dict[str, RevisionInfo]] = {}
    for d in live:
        if d.mark is None:
            continue
        for rev in d.mark.revisions:
            role = "preference" if "Preference" in rev.kind else "instancetype"
            pins.setdefault(d.key, {})[role] = rev
    return pins


MAX_PIN_TREES = 32  # distinct trees of ``revisionName: git:<commit>`` pins built per revision


def build_catalog_at(
    files: FileView, entry: str, context: Context | None = None, keys: Keys | None = None
) -> catalog_stage.Catalog:
    """Overlays + catalog for one tree; errors point at the field's line. ``context``:
    the caller's caches and mapper (without it, a cold build); ``keys``: what
    SOPS-encrypted files are opened with (``overlays.build``)."""
    ctx = context if context is not None else Context()
    built = overlays.build(files, entry, ctx.cache(overlays.OverlayCache), ctx.mapper, keys)
    cat = catalog_stage.build_catalog(built, files.read, ctx.cache(CatalogCache))
    said = built.warnings if isinstance(built, overlays.Built) else ()
    return replace(cat, warnings=(*said, *cat.warnings)) if said else cat  # the build's too


def rest_documents(context: Context) -> Shelf:
    """From now on the documents of ``context``'s overlay cache rest packed between
    builds (the daemon's: ``OverlayCache.rest_trees``); the shelf, to settle."""
    return context.cache(overlays.OverlayCache).rest_trees()


def git_catalog_at(
    read: Callable[[str], SourceSnapshot],
    entry: str,
    context: Context | None = None,
    keys: Keys | None = None,
) -> CatalogAt:
    """For ``revisionName: git:<commit>``: the catalog as built at another commit, which
    ``read`` (the caller's git, e.g. ``source.snapshot_reader`` of the repository) reads,
    with the caller's caches (the daemon builds it again at every reconcile). Commits of
    one tree are built once, and at most ``MAX_PIN_TREES`` trees are built (each is a
    build of the repository): the cost of pins stays linear in the revision's size."""
    by_tree: dict[str, catalog_stage.Catalog] = {}
    built = [0]

    def catalog_at(commit: str) -> tuple[str, catalog_stage.Catalog]:
        snap = read(commit)
        cat = by_tree.get(snap.tree) if snap.tree else None
        if cat is None:
            if built[0] >= MAX_PIN_TREES:
                raise ManifestError(
                    f"more than {MAX_PIN_TREES} distinct trees are pinned in this revision "
                    "(each is a build of the repository): pin fewer commits"
                )
            built[0] += 1
            cat = build_catalog_at(snap.files, entry, context, keys)
            if snap.tree:
                by_tree[snap.tree] = cat
        return snap.commit, cat

    return catalog_at


def merge_pins(
    *layers: Mapping[VMKey, Mapping[str, RevisionInfo]] | None,
) -> dict[VMKey, dict[str, RevisionInfo]]:
    """Later layers win per VM and role (a ``git:<commit>`` pin that was read beats a
    host's captured revision: the matcher names that commit, the capture may be of another)."""
    out: dict[VMKey, dict[str, RevisionInfo]] = {}
    for layer in layers:
        for key, roles in (layer or {}).items():
            out.setdefault(key, {}).update(roles)
    return out


def effective_pins(
    pins: Mapping[str, RevisionInfo] | None,
    vm: Manifest,
    cat: catalog_stage.Catalog,
    current: dict[tuple[str, str, str], RevisionInfo | None],
) -> Mapping[str, RevisionInfo] | None:
    """``pins`` without those equal to the repository's current revision of their object.

    Expanding with such a pin replays the very object the repository holds, so the
    result is the unpinned one; dropping it lets a VM whose pins are all current share
    its expansion with an unpinned build (``diff`` builds base unpinned and head with
    base's pins). A matcher naming a ``revisionName`` keeps its pin (it selects by it).
    """
    if not pins:
        return pins
    named = cat.fact(vm, MATCHERS, matcher_facts)[1]  # read with its git pins: its tree is not read again
    out: dict[str, RevisionInfo] = {}
    for role, info in pins.items():
        if role in named:
            out[role] = info
            continue
        key = (info.kind, info.namespace, info.name)
        if key not in current:
            obj = cat.get(*key)
            try:
                current[key] = _current(cat, obj, info.namespace) if obj else None
            except (KeyError, TypeError, ValueError):  # malformed: expansion reports it
                current[key] = None
        if current[key] != info:
            out[role] = info
    return out or None


def _current(cat: catalog_stage.Catalog, obj: Manifest, namespace: str) -> RevisionInfo:
    """The revision of the repository's object, kept per document by the catalog cache."""

    def revision(tree: Obj) -> RevisionInfo:
        return expand_stage.revision_info(tree, namespace)

    return cat.fact(obj, f"revision {namespace}", revision)
