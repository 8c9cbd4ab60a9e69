"""Name references: after renames (prefix, suffix, hash, patches), references follow their objects.

Input: the built records and the merged transformer config's name-reference field
specs (kustomize's default table, pinned in ``data/kustomize/namereference.json``, and
the repository's ``configurations:``). Output: the records with every reference to a
renamed object rewritten to its new name, as kustomize's ``nameref`` filter does: a
reference is a string, a list of strings, or a map with ``name`` (and ``namespace``,
as RBAC subjects are); the referral is chosen among the objects the referrer can see by
its previous names, the reference's kind, a ``roleRef``'s kind, the namespace, and then
by the same name prefixes and suffixes (the same base); a reference still ambiguous is an
``OverlayError`` at the referrer's file:line.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler.errors import OverlayError
from reconciler.overlays.resource import (
    MISSING,
    FieldSpec,
    Res,
    ResId,
    changed_paths,
    effective_ns,
    is_cluster_scoped,
    update_path,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from reconciler.overlays.config import NameRef, TransformerConfig


def fix_name_references(items: list[Res], config: TransformerConfig) -> list[Res]:
    refs = config.name_references
    for r in items:
        if r.cur.kind == "RoleBinding":
            _subject_namespaces(r)  # a blank subject namespace is an error, renamed or not
    if not refs or not any(r.prev for r in items):
        return items
    by_kind: dict[str, list[tuple[NameRef, FieldSpec]]] = {}
    for ref in refs:
        for fs in ref.specs:
            by_kind.setdefault(fs.kind, []).append((ref, fs))
    out = []
    for r in items:
        org = r.org
        filters = [
            (ref, fs) for ref, fs in (*by_kind.get(org.kind, ()), *by_kind.get("", ())) if fs.applies_to(org)
        ]
        if not filters:
            out.append(r)
            continue
        candidates = _could_be_referenced(items, r)
        obj = r.obj
        used: list[Res] = []
        for ref, fs in filters:
            fixer = _NameFixer(ref, fs, r, candidates)
            obj = update_path(obj, fs.path, False, fixer.fix)
            used += fixer.used
        if obj is r.obj:
            out.append(r)
            continue
        # The reference now names what a generator (or a rename) made: it was set there.
        where = used[0] if used else r
        set_by = tuple((p, where.path, where.line) for p in changed_paths(r.obj, obj))
        out.append(replace(r, obj=obj, set_by=(*r.set_by, *set_by)))
    return out


def _cluster(rid: ResId) -> bool:
    return is_cluster_scoped(rid.group, rid.kind)


def _could_be_referenced(items: Sequence[Res], referrer: Res) -> list[Res]:
    """kustomize's ``SubsetThatCouldBeReferencedByResource``: a cluster-scoped referrer
    sees everything; a namespaced one sees cluster-scoped objects, its own namespace and,
    for a RoleBinding, the namespaces of its ServiceAccount subjects."""
    me = referrer.cur
    if _cluster(me):
        return list(items)
    bound = _subject_namespaces(referrer)
    mine = effective_ns(me)
    return [c for c in items if _cluster(c.cur) or effective_ns(c.cur) == mine or (c.cur.namespace in bound)]


def _subject_namespaces(r: Res) -> frozenset[str]:
    if r.cur.kind != "RoleBinding":
        return frozenset()
    subjects = r.obj.get("subjects")
    if not isinstance(subjects, list):
        return frozenset()
    out = set()
    for s in subjects:
        if not isinstance(s, dict) or "namespace" not in s or "kind" not in s:
            continue
        if s["kind"] == "ServiceAccount":
            if not isinstance(s["namespace"], str):
                raise OverlayError(f"Invalid Input: namespace is blank for resource {r.cur}", r.path, r.line)
            out.add(s["namespace"])
    return frozenset(out)


def _same_ending(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    if len(a) > len(b):
        a, b = b, a
    return b[len(b) - len(a) :] == a if a else len(b) == 0


def _affixes_equal(c: Res, referrer: Res, allow_empty: bool) -> bool:
    pre_ok = (allow_empty and (not c.prefixes or not referrer.prefixes)) or _same_ending(
        c.prefixes, referrer.prefixes
    )
    suf_ok = (allow_empty and (not c.suffixes or not referrer.suffixes)) or _same_ending(
        c.suffixes, referrer.suffixes
    )
    return pre_ok and suf_ok


def _selected(rid: ResId, group: str, version: str, kind: str) -> bool:
    return (
        (not group or rid.group == group)
        and (not version or rid.version == version)
        and (not kind or rid.kind == kind)
    )


class _NameFixer:
    """Rewrites the references at one field spec of one referrer (kustomize's ``nameref.Filter``)."""

    def __init__(self, ref: NameRef, spec: FieldSpec, referrer: Res, candidates: list[Res]) -> None:
        self.ref = ref
        self.spec = spec
        self.referrer = referrer
        self.candidates = candidates
        self.used: list[Res] = []  # the referrals references were rewritten to

    def _role_ref_ok(self) -> Callable[[Res], bool]:
        if self.spec.path[-2:] != ("roleRef", "name"):
            return lambda c: True
        role_ref = self.referrer.obj.get("roleRef")
        if not isinstance(role_ref, dict) or role_ref.get("apiGroup") is None or role_ref.get("kind") is None:
            return lambda c: True
        group, kind = str(role_ref["apiGroup"]), str(role_ref["kind"])
        return lambda c: any(_selected(p, group, "", kind) for p in c.prev)

    def _same_namespace_ok(self) -> Callable[[Res], bool]:
        me = self.referrer.cur
        if _cluster(me):
            return lambda c: True
        return lambda c: (
            _cluster(c.cur) or c.cur.kind == "ServiceAccount" or effective_ns(c.cur) == effective_ns(me)
        )

    def select(self, old: str, candidates: list[Res], with_ns: bool) -> Res | None:
        ref = self.ref
        role_ok, ns_ok = self._role_ref_ok(), self._same_namespace_ok()
        found = [
            c
            for c in candidates
            if any(p.name == old for p in c.prev)
            and any(_selected(p, ref.group, ref.version, ref.kind) for p in c.prev)
            and role_ok(c)
            and ns_ok(c)
        ]
        if len(found) == 1:
            return found[0]
        found = [c for c in found if _affixes_equal(c, self.referrer, True)]
        if len(found) > 1:
            found = [c for c in found if _affixes_equal(c, self.referrer, False)]
        if len(found) <= 1:
            return found[0] if found else None
        first = found[0]
        if all(
            c.cur.name == first.cur.name and (not with_ns or c.cur.namespace == first.cur.namespace)
            for c in found
        ):
            return first
        raise OverlayError(
            "found multiple possible referrals: "
            + ", ".join(str(c.cur) for c in found)
            + f" (for {old!r} in {self.referrer.cur})",
            self.referrer.path,
            self.referrer.line,
        )

    def _by_namespace(self, node: dict[str, Any]) -> list[Res]:
        if "namespace" not in node:
            return self.candidates
        ns = node["namespace"]
        by_org = [c for c in self.candidates if not _cluster(c.org) and effective_ns(c.org) == ns]
        if by_org:
            return by_org
        return [c for c in self.candidates if not _cluster(c.cur) and effective_ns(c.cur) == ns]

    def fix(self, old: Any) -> Any:
        if isinstance(old, str):
            found = self.select(old, self.candidates, with_ns=False)
            if found is None:
                return MISSING
            self.used.append(found)
            return MISSING if found.cur.name == old else found.cur.name
        if isinstance(old, dict):
            name = old.get("name")
            if "name" not in old:
                raise OverlayError(
                    f"{self.referrer.cur}: updating name reference in {'/'.join(self.spec.path)!r}: "
                    "path config error; no 'name' field in node",
                    self.referrer.path,
                    self.referrer.line,
                )
            if not isinstance(name, str):
                return MISSING
            found = self.select(name, self._by_namespace(old), with_ns=True)
            if found is None:
                return MISSING
            self.used.append(found)
            ns = found.cur.namespace
            if found.cur.name == name and not ns:
                return MISSING
            new = {**old, "name": found.cur.name}
            if ns:
                new["namespace"] = ns
            return MISSING if new == old else new
        return MISSING
