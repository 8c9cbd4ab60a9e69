"""Host resources handed out to VMs: one pool, deterministic, stable, never shared.

Input: what each VM of one host needs from a pool (a count, by domain name), the pool
in the order it is handed out, and what each domain of the host holds now (read back
from its live definition, the record of an earlier allocation). Output: the items per
VM and, for each VM that does not fit, how many items were free and which domains
hold the rest. Pure and deterministic: a VM keeps what it holds while those items stay
in the pool and no other domain kept them; the others take the first free items, VMs
in name order. Domains that need nothing from the pool keep what they hold. Used for
dedicated CPUs (``render.cputune``) and mediated devices (``render.mdev``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

from reconciler.model import VMKey
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Shortage:
    """Why a VM did not fit: the free items left and the domains holding the others."""

    free: int
    holders: tuple[str, ...]

    def held_by(self, most: int = 5) -> str:
        """``vm/a, vm/b`` (at most ``most`` named), or "" when nobody holds any."""
        shown = ", ".join(VMKey.from_domain(h).subject for h in self.holders[:most])
        return shown + (" and more" if len(self.holders) > most else "")


@dataclass(frozen=True, slots=True)
class Allocation(Generic[T]):
    """Items per domain name, and the domains that did not fit."""

    items: Mapping[str, tuple[T, ...]]
    short: Mapping[str, Shortage]


def allocate(
    needs: Sequence[tuple[str, int]],
    pool: Sequence[T],
    held: Mapping[str, tuple[T, ...]],
    fit: Callable[[list[T], int], tuple[T, ...]] | None = None,
) -> Allocation[T]:
    """Give every domain of ``needs`` its count of items from ``pool`` (see the module
    doc); ``fit`` picks ``count`` of the free items (default: the first ones)."""
    allowed = set(pool)
    taken: dict[T, str] = {}
    wanted = {name for name, _ in needs}
    for name, items in sorted(held.items()):
        if name not in wanted:  # another domain of the host keeps its items
            taken.update({x: name for x in items if x in allowed and x not in taken})
    out: dict[str, tuple[T, ...]] = {}
    for name, count in sorted(needs):
        items = held.get(name, ())
        kept = len(items) == count and len(set(items)) == count and set(items) <= allowed
        if kept and not set(items) & taken.keys():
            out[name] = items
            taken.update(dict.fromkeys(items, name))
    short: dict[str, Shortage] = {}
    for name, count in sorted(needs):
        if name in out:
            continue
        free = [x for x in pool if x not in taken]
        if len(free) < count:
            short[name] = Shortage(len(free), tuple(sorted(set(taken.values()))))
            continue
        chosen = fit(free, count) if fit is not None else tuple(free[:count])
        out[name] = chosen
        taken.update(dict.fromkeys(chosen, name))
    return Allocation(out, short)
