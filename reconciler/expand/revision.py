"""Captured instancetype / preference revisions: what a VM was expanded with.

Input: an instancetype or preference object (a catalog document, a
ControllerRevision's ``data``, or a pinned ``RevisionInfo``). Output: its
canonical JSON and hash, and the object back from a captured copy. The
captured object is ``apiVersion``, ``kind``, ``metadata.name`` (and
``namespace`` for namespaced kinds) and ``spec``: labels and annotations of the
object itself do not make a new revision. ``hash`` = sha256 of ``data``. Pure.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from reconciler.model import Obj, RevisionInfo


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def captured_object(obj: Obj, namespace: str) -> Obj:
    metadata: Obj = {"name": str((obj.get("metadata") or {}).get("name") or "")}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": obj.get("apiVersion") or "",
        "kind": obj.get("kind") or "",
        "metadata": metadata,
        "spec": obj.get("spec") or {},
    }


def revision_info(
    obj: Obj,
    namespace: str,
    commit: str = "",
    memo: dict[tuple[int, str, str], tuple[object, RevisionInfo]] | None = None,
) -> RevisionInfo:
    """The RevisionInfo of ``obj`` (namespace ``""`` for cluster kinds). ``memo``: where
    ``obj`` is a catalog object, the catalog's (``Catalog.revisions``, by identity): every
    VM using one instancetype asks for it, and they all hold one copy of its JSON."""
    if memo is None:
        return _revision_info(obj, namespace, commit)
    key = (id(obj), namespace, commit)
    got = memo.get(key)
    if got is not None and got[0] is obj:
        return got[1]
    info = _revision_info(obj, namespace, commit)
    memo[key] = (obj, info)
    return info


def _revision_info(obj: Obj, namespace: str, commit: str) -> RevisionInfo:
    captured = captured_object(obj, namespace)
    data = canonical_json(captured)
    return RevisionInfo(
        kind=str(captured["kind"]),
        name=str(captured["metadata"]["name"]),
        namespace=namespace,
        hash=hashlib.sha256(data.encode()).hexdigest(),
        commit=commit,
        data=data,
    )


def replay(info: RevisionInfo) -> Obj:
    """The captured object of a pinned revision. Raises ValueError if ``data`` is not one."""
    try:
        obj = json.loads(info.data)
    except json.JSONDecodeError as err:
        raise ValueError(f"captured revision data is not JSON: {err.msg}") from err
    if not isinstance(obj, dict) or not isinstance(obj.get("spec", {}), dict):
        raise ValueError("captured revision data holds no object with a spec")
    return obj


HASH_PREFIX = "sha256:"
MIN_HASH_PREFIX = 7


def revision_name(info: RevisionInfo) -> str:
    """The name a VM's ``revisionName`` can use for a captured revision: ``<object>-<hash[:12]>``."""
    return f"{info.name}-{info.hash[:12]}"


def names_revision(rev: str, info: RevisionInfo) -> bool:
    """``rev`` selects ``info``: its ``revision_name``, or ``[sha256:]<hash or a prefix of 7+ hex digits>``."""
    if not rev or not info.hash:
        return False
    if rev == revision_name(info):
        return True
    digest = rev.removeprefix(HASH_PREFIX)
    return len(digest) >= MIN_HASH_PREFIX and info.hash.startswith(digest)
