"""What a merge does to the repository's other objects a VM reads: instancetypes and
preferences whose content moved (``revision_changes``), Secrets created, deleted or
changed (``secret_changes``), each with the VMs it reaches; and the unified diff both
the PR diff's spec diffs and these use (``unified``).

Input: the expanded VMs and the built objects of base and head (``Desired``). Output:
``RevisionChange`` and ``SecretChange`` records, which ``prdiff.report`` words. Pure.
"""

from __future__ import annotations

import difflib
import json
from typing import TYPE_CHECKING

from reconciler import manifests
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.desired import Desired
    from reconciler.model import ExpandedVM, RevisionInfo

InfoKey = tuple[str, str, str]  # (kind, namespace, name)


@dataclass(frozen=True, slots=True)
class RevisionUse:
    subject: str
    pinned: bool  # kept on base's revision (the host captured it when the VM was first applied)


@dataclass(frozen=True, slots=True)
class RevisionChange:
    """An instancetype or preference whose content differs between base and head."""

    role: str  # "instancetype" | "preference"
    kind: str
    name: str
    namespace: str
    base_hash: str
    head_hash: str
    vms: tuple[RevisionUse, ...]  # every head VM it reaches, by subject
    spec_diff: str = ""


@dataclass(frozen=True, slots=True)
class SecretChange:
    """A Secret of the repository whose content differs between base and head, by name
    only; ``encrypted``: read from SOPS files without the keys (what changed is unknown)."""

    namespace: str
    name: str
    change: str  # "created" | "deleted" | "changed"
    encrypted: bool
    vms: tuple[str, ...]  # the VMs it reaches, by subject (head's; base's for a deleted one)


def unified(old: list[str], new: list[str], old_name: str, new_name: str) -> str:
    lines = list(difflib.unified_diff(old, new, old_name, new_name, n=3))
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _role(info: RevisionInfo) -> str:
    return "preference" if "Preference" in info.kind else "instancetype"


def _key(info: RevisionInfo) -> InfoKey:
    return (info.kind, info.namespace, info.name)


def _repository_infos(vm: ExpandedVM) -> list[tuple[InfoKey, RevisionInfo, bool]]:
    """The VM's instancetype and preference as the repository holds them (a pinned one's
    newer revision), each with whether the VM is pinned to another."""
    out = []
    for info in (vm.instancetype, vm.preference):
        if info is None:
            continue
        key = _key(info)
        newer = next((r for r in vm.newer_revisions if _key(r) == key), None) if vm.newer_revisions else None
        out.append((key, info if newer is None else newer, newer is not None))
    return out


def revision_changes(base: Sequence[ExpandedVM], head: Sequence[ExpandedVM]) -> tuple[RevisionChange, ...]:
    """Instancetypes / preferences whose repository content moved, and every head VM they
    reach: the repository's objects, never a VM's pin (a VM pinned to another revision, by
    base's capture or ``git:<commit>``, reports the repository's in ``newer_revisions``)."""
    base_infos: dict[InfoKey, RevisionInfo] = {}
    for vm in base:
        for key, info, _pinned in _repository_infos(vm):
            base_infos.setdefault(key, info)
    head_infos: dict[InfoKey, RevisionInfo] = {}
    reached: list[tuple[InfoKey, ExpandedVM, bool]] = []
    for vm in head:
        for key, info, pinned in _repository_infos(vm):
            head_infos.setdefault(key, info)
            reached.append((key, vm, pinned))
    moved = [
        k for k in sorted(base_infos.keys() & head_infos.keys()) if base_infos[k].hash != head_infos[k].hash
    ]
    users: dict[InfoKey, list[RevisionUse]] = {key: [] for key in moved}  # the VMs of a moved object only
    for key, vm, pinned in reached:
        if key in users:
            users[key].append(RevisionUse(vm.subject, pinned=pinned))
    changes: list[RevisionChange] = []
    for key in moved:
        old, new = base_infos[key], head_infos[key]
        changes.append(
            RevisionChange(
                role=_role(new),
                kind=new.kind,
                name=new.name,
                namespace=new.namespace,
                base_hash=old.hash,
                head_hash=new.hash,
                vms=tuple(sorted(users.get(key, []), key=lambda u: u.subject)),
                spec_diff=unified(
                    _captured_yaml(old),
                    _captured_yaml(new),
                    f"base:{new.kind}/{new.name}",
                    f"head:{new.kind}/{new.name}",
                ),
            )
        )
    return tuple(changes)


def secret_changes(base: Desired, head: Desired) -> tuple[SecretChange, ...]:
    """The repository's Secrets created, deleted or changed by the merge, each with the
    VMs it reaches. Compared by content (in clear with keys; without, by ciphertext:
    a sealed Secret changes when its encrypted value does)."""
    old = {(k[1], k[2]): m for k, m in base.objects.items() if k[0] == "Secret"}
    new = {(k[1], k[2]): m for k, m in head.objects.items() if k[0] == "Secret"}
    out: list[SecretChange] = []
    for key in sorted(old.keys() | new.keys()):
        was, now = old.get(key), new.get(key)
        if was is not None and now is not None and was.obj == now.obj:
            continue
        change = "created" if was is None else "deleted" if now is None else "changed"
        users = base.expanded if now is None else head.expanded
        ref = f"{key[0] or 'default'}/{key[1]}"
        vms = tuple(sorted(vm.subject for vm in users if ref in vm.secrets.names()))
        sealed = any(m is not None and m.sealed for m in (was, now))
        out.append(SecretChange(key[0], key[1], change, sealed, vms))
    return tuple(out)


def _captured_yaml(info: RevisionInfo) -> list[str]:
    try:
        obj = json.loads(info.data) if info.data else {}
    except json.JSONDecodeError:
        return []
    return manifests.dump_documents([obj]).splitlines(keepends=True) if obj else []
