"""Name references: after renames (prefix, suffix, hash), references follow their objects.

Input: the built records and the merged transformer config's name-reference field
specs. Output: the records with every reference to a renamed object rewritten to its
new name (an ambiguous reference is an ``OverlayError`` at the referrer's file:line).
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
    from reconciler.overlays.config import TransformerConfig


def fix_name_references(items: list[Res], config: TransformerConfig) -> list[Res]:
    by_kind: dict[str, list[tuple[Any, FieldSpec]]] = {}
    for ref in config.name_references:
        for fs in ref.specs:
            by_kind.setdefault(fs.kind, []).append((ref, fs))
    if not by_kind:
        return items
    renamed = [r for r in items if r.prev]
    if not renamed:
        return items
    out = []
    for r in items:
        cur = r.cur
        specs = [*by_kind.get(cur.kind, ()), *by_kind.get("", ())]
        obj = r.obj
        used: list[Res] = []
        for ref, fs in specs:
            if not fs.applies_to(cur):
                continue
            fixer = _NameFixer(ref, r, renamed)
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


class _NameFixer:
    """Rewrites one reference (a name string) to the referral's current name."""

    def __init__(self, ref: Any, referrer: Res, candidates: list[Res]) -> None:
        self.ref = ref
        self.referrer = referrer
        self.candidates = candidates
        self.used: list[Res] = []  # the referrals references were rewritten to

    def _gvk_ok(self, rid: ResId) -> bool:
        ref = self.ref
        return (
            (not ref.group or rid.group == ref.group)
            and (not ref.version or rid.version == ref.version)
            and (not ref.kind or rid.kind == ref.kind)
        )

    def resolve(self, old: str) -> str | None:
        me = self.referrer.cur
        me_cluster = is_cluster_scoped(me.group, me.kind)
        found = []
        for c in self.candidates:
            if not any(p.name == old for p in c.prev):
                continue
            if not any(self._gvk_ok(p) for p in c.prev):
                continue
            cur = c.cur
            if (
                not me_cluster
                and not is_cluster_scoped(cur.group, cur.kind)
                and cur.kind != "ServiceAccount"
                and effective_ns(cur) != effective_ns(me)
            ):
                continue
            found.append(c)
        if len(found) > 1:
            same = [
                c
                for c in found
                if c.prefixes == self.referrer.prefixes and c.suffixes == self.referrer.suffixes
            ]
            if same:
                found = same
        if not found:
            return None
        names = {c.cur.name for c in found}
        if len(names) > 1:
            raise OverlayError(
                f"{self.referrer.cur}: found multiple possible referrals for {old!r}: "
                + ", ".join(str(c.cur) for c in found),
                self.referrer.path,
                self.referrer.line,
            )
        self.used.append(found[0])
        return found[0].cur.name

    def fix(self, old: Any) -> Any:
        if isinstance(old, str):
            new = self.resolve(old)
            return MISSING if new is None or new == old else new
        if isinstance(old, list):
            changed = False
            out = []
            for item in old:
                if isinstance(item, str):
                    new = self.resolve(item)
                    if new is not None and new != item:
                        changed = True
                        out.append(new)
                        continue
                out.append(item)
            return out if changed else MISSING
        if isinstance(old, dict) and isinstance(old.get("name"), str):
            if old.get("kind") and old.get("kind") != self.ref.kind:
                return MISSING
            new = self.resolve(old["name"])
            return MISSING if new is None or new == old["name"] else {**old, "name": new}
        return MISSING
