"""Pins for ``revisionName: git:<commit>``: the referenced object as it was at that commit.

Input: the catalog being expanded and ``catalog_at(commit) -> (full sha, Catalog)``,
the caller's way of building the repository at a commit (the only I/O, injected).
Output: ``{VMKey: {"instancetype"|"preference": RevisionInfo}}`` to pass to
``expand_all`` as ``pinned``. A commit that cannot be built or lacks the object yields
no pin (the expansion then reports the revision as not supplied, or the ``catalog_at``
error as a ``Problem`` at the VM's file and line). Each commit is built once.
"""

from __future__ import annotations

from collections.abc import Callable

from reconciler.catalog import CLUSTER_KINDS, Catalog
from reconciler.errors import ReconcilerError
from reconciler.expand.matcher import git_commits, resolve_kind
from reconciler.expand.revision import revision_info
from reconciler.expand.tree import RuleError
from reconciler.model import Problem, RevisionInfo, VMKey

CatalogAt = Callable[[str], tuple[str, Catalog]]


def git_pins(
    catalog: Catalog, catalog_at: CatalogAt, problems: list[Problem] | None = None
) -> dict[VMKey, dict[str, RevisionInfo]]:
    """Pins for every VM matcher using ``revisionName: git:<commit>``; failures go to ``problems``."""
    pins: dict[VMKey, dict[str, RevisionInfo]] = {}
    built: dict[str, tuple[str, Catalog] | None] = {}
    for vm_key, vm in catalog.keyed_vms():
        namespace = vm_key.namespace
        for key, commit in git_commits(vm.obj.get("spec")).items():
            if commit not in built:
                try:
                    built[commit] = catalog_at(commit)
                except ReconcilerError as err:
                    built[commit] = None
                    if problems is not None:
                        problems.append(
                            Problem(
                                f"revision git:{commit}: {err}", path=vm.path, line=vm.line if vm.path else 0
                            )
                        )
            at = built[commit]
            if at is None:
                continue
            full_commit, old = at
            matcher = vm.obj["spec"][key]
            try:
                kind = resolve_kind(key, matcher)
            except RuleError:
                continue  # the expansion reports the bad kind with its location
            ns = "" if kind in CLUSTER_KINDS else namespace
            found = old.get(kind, ns, str(matcher.get("name") or ""))
            if found is not None:
                pins.setdefault(vm_key, {})[key] = revision_info(found.obj, ns, full_commit, old.revisions)
    return pins
