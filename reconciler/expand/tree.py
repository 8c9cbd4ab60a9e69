"""Small helpers for plain ``dict``/``list`` object trees (no library types).

Pure. "Unset" follows KubeVirt's Go types: absent, ``None``, ``""``, ``0`` and
``False`` all read as unset for plain scalars; maps and lists are unset only
when absent or ``None``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.manifests import clone

if TYPE_CHECKING:
    from reconciler.model import Obj

__all__ = ["clone"]  # kept here for the expansion modules


def dig(tree: Any, *path: str | int) -> Any:
    """``tree[path[0]][path[1]]...`` or None if any step is missing."""
    cur = tree
    for part in path:
        if isinstance(part, str):
            if not isinstance(cur, dict):
                return None
            cur = cur.get(part)
        elif not isinstance(cur, list) or not -len(cur) <= part < len(cur):
            return None
        else:
            cur = cur[part]
        if cur is None:
            return None
    return cur


def ensure(tree: Obj, key: str) -> Obj:
    """``tree[key]`` as a dict, created when absent or null."""
    cur = tree.get(key)
    if not isinstance(cur, dict):
        cur = {}
        tree[key] = cur
    return cur


def ensure_list(tree: Obj, key: str) -> list[Any]:
    cur = tree.get(key)
    if not isinstance(cur, list):
        cur = []
        tree[key] = cur
    return cur


def present(tree: Any, key: str) -> bool:
    """A pointer/map/list field is set (``{}`` counts as set, ``null`` does not)."""
    return isinstance(tree, dict) and tree.get(key) is not None


def empty(value: Any) -> bool:
    """A Go scalar at its zero value."""
    return value is None or value == "" or value == 0 or value is False


class RuleError(Exception):
    """A rule rejects the VM. ``field`` is the VM field to point at; the caller adds file and line."""

    def __init__(self, message: str, field: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def canonical(value: Any) -> str:
    """Compact, key-sorted JSON for messages."""
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
