"""Pins for ``revisionName: git:<commit>``: the referenced object as it was at that commit.

Input: the catalog being expanded and ``catalog_at(commit) -> (full sha, Catalog)``,
the caller's way of building the repository at a commit (the only I/O, injected).
Output: ``{VMKey: {"instancetype"|"preference": RevisionInfo}}`` to pass to
``expand_all`` as ``pinned``. A commit that cannot be read or built, or that lacks the
object, yields an ``UnreadRevision`` naming the cause: the expansion reports it as the
VM's one error, at its ``revisionName`` (never a second "not supplied" one). Each
commit is built once. Must never raise for a bad pin.
"""

from __future__ import annotations

from collections.abc import Callable

from reconciler.catalog import CLUSTER_KINDS, Catalog
from reconciler.errors import ReconcilerError
from reconciler.expand.matcher import git_commits, resolve_kind
from reconciler.expand.revision import revision_info
from reconciler.expand.tree import RuleError
from reconciler.model import Obj, RevisionInfo, UnreadRevision, VMKey

CatalogAt = Callable[[str], tuple[str, Catalog]]


MATCHERS = "matchers"  # the tag of ``matcher_facts`` in ``Catalog.fact``


def matcher_facts(vm: Obj) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """What the pins read of a VM's document, derived at once (``Catalog.fact`` under
    ``MATCHERS``, so a later stage unpacks no resting tree for its share): (matcher,
    commit) of each ``revisionName: git:<commit>``, and the matchers (``instancetype``,
    ``preference``) that name a ``revisionName`` at all."""
    spec = vm.get("spec")
    named = spec.items() if isinstance(spec, dict) else ()
    return tuple(git_commits(spec).items()), tuple(
        role for role, matcher in named if isinstance(matcher, dict) and matcher.get("revisionName")
    )


def git_pins(catalog: Catalog, catalog_at: CatalogAt) -> dict[VMKey, dict[str, RevisionInfo]]:
    """Pins for every VM matcher using ``revisionName: git:<commit>``; a pin that cannot
    be read is an ``UnreadRevision`` with its cause."""
    pins: dict[VMKey, dict[str, RevisionInfo]] = {}
    built: dict[str, tuple[str, Catalog] | str] = {}
    for vm_key, vm in catalog.keyed_vms():
        namespace = vm_key.namespace
        for key, commit in catalog.fact(vm, MATCHERS, matcher_facts)[0]:
            if commit not in built:
                try:
                    built[commit] = catalog_at(commit)
                except ReconcilerError as err:
                    built[commit] = str(err)
            matcher = vm.obj["spec"][key]
            try:
                kind = resolve_kind(key, matcher)
            except RuleError:
                continue  # the expansion reports the bad kind with its location
            ns = "" if kind in CLUSTER_KINDS else namespace
            name = str(matcher.get("name") or "")
            at = built[commit]
            if isinstance(at, str):
                pins.setdefault(vm_key, {})[key] = UnreadRevision(kind, name, ns, commit=commit, cause=at)
                continue
            full_commit, old = at
            found = old.get(kind, ns, name)
            if found is None:
                where = f"{ns}/{name}" if ns else name
                cause = f"commit {full_commit[:12]} has no {kind} {where!r}"
                pins.setdefault(vm_key, {})[key] = UnreadRevision(
                    kind, name, ns, commit=full_commit, cause=cause
                )
                continue
            pins.setdefault(vm_key, {})[key] = revision_info(found.obj, ns, full_commit, old.revisions)
    return pins
