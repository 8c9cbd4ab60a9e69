"""What merging one git ref into another does to the VMs: the hostless dry-run diff.

Input: two ``SourceSnapshot``s (base and head), the entry path, a ``HostConfig`` and
``HostCaps`` and, as ``config.targets`` resolves them for a host, its plan policy and
the daemon's policy to state (``diff_snapshots``), or two already built ``Desired``
states (``compare_desired``), and the SOPS keys (``SEALED`` without: an encrypted
Secret read as stand-ins of its ciphertext). Output: a ``PRDiff`` record (its errors and
warnings ``Problem`` records, VMs paired by ``VMKey``; the Secrets created, deleted or
changed, by name, ``encrypted`` when read sealed), which ``prdiff.report`` words as text,
markdown and JSON (``format_text``, ``format_markdown``, ``format_json``; the JSON schema is
documented in ``docs/diff-json.md``).

How a host would see the merge is simulated with the daemon's own code: every VM of base
is taken as defined on a host by base's revision (mark from ``ownership.mark_for``,
running unless ``Halted``), its captured instancetype / preference revisions read back
with ``desired.pins.pins_from_live``, head built with those pins by ``desired_state``,
and ``plan.build_plan`` (fields classed by ``compare.changes``) decides every action, its
restarts' batches ``plan.pace`` (every VM Ready). ``entry`` only words the plan's verdict.

Pure: no libvirt (not even imported), clock, network or environment; git only through the snapshots given.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from reconciler import manifests
from reconciler.compare import provenance
from reconciler.compare.cache import CompareCache
from reconciler.context import Context
from reconciler.desired import Desired, PipelineCache, desired_state
from reconciler.desired.pins import build_catalog_at, pins_from_live
from reconciler.model import (
    ExpandedVM,
    Problem,
    RenderedDomain,
    RevisionInfo,
    Rollout,
    SourceSnapshot,
)
from reconciler.model.changes import Action, Plan
from reconciler.model.problems import Notice
from reconciler.model.rollout import Paced
from reconciler.plan.build import build_plan
from reconciler.plan.pace import pace_plan
from reconciler.prdiff import history
from reconciler.prdiff.entry import (
    NO_DOMAIN_CHANGE,
    EntryKind,
    VMEntry,
    changed,
    created,
    deleted,
    entry_class,
    host_move,
    passthrough_notes,
    vm_entry,
    volume_notes,
)
from reconciler.prdiff.history import simulated_live
from reconciler.render.placement import held_from_live
from reconciler.settings.policy import PlanPolicy

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from reconciler.expand.pins import CatalogAt
    from reconciler.hostfacts import HostFacts
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model.rollout import Batch
    from reconciler.render import HostCaps
    from reconciler.settings.host import HostConfig

# 2: per-VM "changes" in KubeVirt fields; 3: a field change's values are "before" and
# "after" (as plan's JSON), a created VM's "attributes" (docs/diff-json.md)
SCHEMA_VERSION = 3
# GitHub refuses comments over 65536 characters; leave room for the cut note.
MARKDOWN_LIMIT = 60_000
TEXT_MAX_WARNINGS = 20
MARKDOWN_MAX_ERRORS = 50  # errors / warnings listed in a comment; JSON lists them all
SHORT_SHA = 12


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

    def words(self) -> str:
        """``Secret db-creds changed (encrypted)``: the name, never a value."""
        ns = "" if self.namespace in ("", "default") else f"{self.namespace}/"
        return f"Secret {ns}{self.name} {self.change}" + (" (encrypted)" if self.encrypted else "")


@dataclass(frozen=True, slots=True)
class StatedPolicy:
    """The daemon's policy a diff assumed (``diff --config FILE [--host NAME]``), as the
    report states it; rollout and instancetypeRevisions are the report's own settings."""

    config: str  # the daemon's configuration file
    host: str  # the host spoken for
    prune: bool
    max_prune_percent: int
    restart_windows: tuple[str, ...] = ()  # each window in words (``0 2 * * 6 (UTC) for 2h``)


@dataclass(frozen=True, slots=True)
class PRDiff:
    base_ref: str
    base_commit: str
    head_ref: str
    head_commit: str
    entry: str
    vms: tuple[VMEntry, ...]
    revisions: tuple[RevisionChange, ...] = ()
    secrets: tuple[SecretChange, ...] = ()
    unchanged: int = 0
    errors: tuple[Problem, ...] = ()  # head: the gate
    base_errors: tuple[Problem, ...] = ()  # reported, never fatal
    # Head's warnings that base did not have, then the plan's (the prune guard): worded
    # one line per cause by the report.
    warnings: tuple[Problem, ...] = ()
    follow: bool = False  # instancetypeRevisions: follow
    rollout: str = Rollout.STAGE.value
    policy: StatedPolicy | None = None  # the daemon's policy assumed (``diff --config``), stated
    batches: tuple[Batch, ...] = ()  # the restarts a host would make, in batches (plan/pace.py)

    def count(self, kind: EntryKind) -> int:
        return sum(1 for v in self.vms if v.kind == kind)

    def count_class(self, change_class: str) -> int:
        return sum(1 for v in self.vms if v.kind == EntryKind.CHANGED and v.change_class == change_class)

    @property
    def has_changes(self) -> bool:
        return bool(self.vms or self.revisions)

    @property
    def exit_code(self) -> int:
        """0 no change, 2 changes, 1 error in head (like ``terraform plan -detailed-exitcode``)."""
        if self.errors:
            return 1
        return 2 if self.has_changes else 0


# -- building -----------------------------------------------------------------------


def diff_snapshots(
    base_snapshot: SourceSnapshot,
    head_snapshot: SourceSnapshot,
    entry: str,
    host: HostConfig,
    caps: HostCaps,
    facts: HostFacts | None = None,
    context: Context | None = None,
    *,
    policy: PlanPolicy | None = None,
    stated: StatedPolicy | None = None,
    keys: Keys | None = None,
    catalog_at: CatalogAt | None = None,
    ancestors: Callable[[], Sequence[str]] | None = None,
) -> PRDiff:
    """Build, expand and render both refs as the daemon does, then compare them.
    ``ancestors``: base's first-parent ancestors, newest first (the caller's git): a VM
    head rolls forward is simulated at base with the revisions a host captured
    (``prdiff.history``).
    ``catalog_at``: other commits built, for ``git:<commit>`` pins (as validate reads them).
    ``keys``: what SOPS files are opened with; ``SEALED`` (no keys) reads them as
    stand-ins, an encrypted Secret that changed is reported "(encrypted)".

    ``host`` and ``policy`` are a host's target as ``config.targets`` resolves it (the
    host config with the daemon-wide policy applied, and the plan policy); without a
    policy, a host with pruning on and the host config's rollout. ``stated``: the
    daemon's policy the report says it assumed (``diff --config``).

    Work is shared between the two refs: a file whose blob is the same at both is parsed
    once (the overlay cache), a VM whose document and expansion inputs are the same at
    both is expanded and rendered once (one ``PipelineCache``), and a domain rendered
    once is not compared with itself (``compare_desired``).

    With ``facts`` (a host's exported facts) a head VM that host could not run is an
    error of the head, as ``plan`` on that host would report it. ``context``: the
    caller's caches and mapper."""
    ctx = context if context is not None else Context()
    follow = host.instancetype_revisions == "follow"
    cache = PipelineCache()
    build = partial(desired_state, entry=entry, host=host, caps=caps, catalog_at=catalog_at, cache=cache)
    base = build(base_snapshot, context=ctx, keys=keys)
    base_live = simulated_live(base)
    pins = None if follow else pins_from_live(base_live)
    held = held_from_live(base_live)  # dedicated CPUs and mediated devices stay where base placed them
    head = build(head_snapshot, pinned=pins, follow=follow, facts=facts, held=held, context=ctx, keys=keys)
    rolled = (
        {}
        if follow or catalog_at is None or ancestors is None
        else history.rolled(base.objects, head.objects)
    )
    if rolled:  # base as a host holds it: the revisions captured when each VM was first applied
        assert catalog_at is not None
        assert ancestors is not None
        base_cat = build_catalog_at(base_snapshot.files, entry, ctx, keys)
        captured = history.captured_pins(base_cat, base_snapshot.commit, rolled, ancestors, catalog_at)
        base = build(base_snapshot, pinned=captured, context=ctx, keys=keys)
        base_live = simulated_live(base)
        pins = pins_from_live(base_live)
        held = held_from_live(base_live)
        head = build(
            head_snapshot, pinned=pins, follow=follow, facts=facts, held=held, context=ctx, keys=keys
        )
    if head.host_errors or head.elsewhere:  # a PR is checked for every host it names
        head = dataclasses.replace(head, errors=head.every_error, host_errors=(), elsewhere=())
    return compare_desired(
        base,
        head,
        rollout=Rollout(host.rollout) if policy is None else policy.rollout,
        follow=follow,
        base_ref=base_snapshot.ref,
        head_ref=head_snapshot.ref,
        entry=entry,
        sources=_sources(head_snapshot, head),
        policy=policy,
        stated=stated,
    )


def _sources(snapshot: SourceSnapshot, head: Desired) -> provenance.Sources:
    """Where head's instancetypes and preferences live (head's catalog)."""
    return provenance.Sources(objects=head.objects, read=snapshot.files.read)


def _unhosted(domains: Iterable[RenderedDomain]) -> list[RenderedDomain]:
    # The diff covers the whole repository, whichever host each VM is assigned to.
    return [dataclasses.replace(d, hostname="") for d in domains]


def compare_desired(
    base: Desired,
    head: Desired,
    rollout: Rollout = Rollout.STAGE,
    follow: bool = False,
    base_ref: str = "",
    head_ref: str = "",
    entry: str = "",
    sources: provenance.Sources | None = None,
    policy: PlanPolicy | None = None,
    stated: StatedPolicy | None = None,
) -> PRDiff:
    """Compare two built revisions per VM. ``head`` must be built with base's pins (see above).

    ``policy``: the host's plan policy (``config.targets``); its rollout wins over ``rollout``."""
    live = simulated_live(base)  # a live domain holds no host name: no unhosted copy of base
    policy = simulated_policy(policy, rollout)
    rollout = policy.rollout
    if head.errors:  # a broken head is its errors alone: never "every VM deleted"
        plan = Plan(revision=head.revision, changes=(), errors=head.errors)
    else:
        desired = _unhosted(head.rendered)
        # A domain rendered once for both refs (see diff_snapshots) is the same definition.
        plan_cache = CompareCache()
        live_by_key = {d.key: d for d in live}
        for d in desired:
            was = live_by_key.get(d.key)
            if was is not None:
                plan_cache.put_same(d, was)
        plan = build_plan(
            head.revision, desired, live, policy, (), head.failed, cache=plan_cache, define=False
        )

    base_by_key = {d.key: d for d in base.rendered}
    head_by_key = {d.key: d for d in head.rendered}
    base_expanded = {vm.key: vm for vm in base.expanded}
    head_expanded = {vm.key: vm for vm in head.expanded}
    base_failed = set(base.failed)

    entries: list[VMEntry] = []
    unchanged = 0
    for c in plan.changes:
        old_vm, new_vm = base_expanded.get(c.key), head_expanded.get(c.key)
        spec_diff = _spec_diff(old_vm, new_vm)
        if c.action == Action.CREATE:
            d = head_by_key[c.key]
            notes: tuple[str, ...] = (
                ("did not build at base: compared as new",) if c.key in base_failed else ()
            )
            notes += passthrough_notes(None, d)
            made = vm_entry(c, EntryKind.CREATED, d, "", created(c, d), spec_diff, notes)
            entries.append(dataclasses.replace(made, attributes=tuple(provenance.create_attributes(d))))
        elif c.desired is None:  # left git
            b = base_by_key[c.key]
            pruning = None if stated is None else policy.prune  # None: any host, pruning or not
            entries.append(
                vm_entry(c, EntryKind.DELETED, b, "", deleted(c, plan.prune_refused, pruning), "", ())
            )
        elif c.is_noop and not spec_diff:
            unchanged += 1
        else:
            d = head_by_key[c.key]
            at_base = base_by_key[c.key]
            notes = (
                host_move(at_base.hostname, d.hostname)
                + volume_notes(at_base, d)
                + passthrough_notes(at_base, d)
            )
            moved = at_base.hostname != d.hostname
            if c.is_noop and moved:  # the definition is the same; where it runs is not
                cls = NO_DOMAIN_CHANGE
                what, notes = notes[0], notes[1:]
            elif c.is_noop:
                cls = NO_DOMAIN_CHANGE
                what = "the expanded spec changed but the domain definition did not: nothing to apply"
            else:
                cls = entry_class(c.fields)
                what = changed(c, d)
            changes = provenance.explain(c.fields, old_vm, new_vm, sources, d.passthrough)
            entries.append(vm_entry(c, EntryKind.CHANGED, d, cls, what, spec_diff, notes, changes))

    kind_order = {EntryKind.CREATED: 0, EntryKind.DELETED: 1, EntryKind.CHANGED: 2}
    entries.sort(key=lambda e: (kind_order[e.kind], e.name))
    return PRDiff(
        base_ref=base_ref,
        base_commit=base.revision,
        head_ref=head_ref,
        head_commit=head.revision,
        entry=entry,
        vms=tuple(entries),
        revisions=_revision_changes(base.expanded, head.expanded),
        secrets=() if head.errors else secret_changes(base, head),
        unchanged=unchanged,
        errors=tuple(head.errors),
        base_errors=tuple(base.errors),
        # A disk's size is a note of its VM's entry (``volume_notes``), not a warning again.
        warnings=_new_warnings(base.warnings, head.warnings)
        + tuple(w for w in plan.warnings if w.notice != Notice.DISK_NOT_RESIZED),
        follow=follow,
        rollout=rollout.value,
        policy=stated,
        batches=(pace_plan(plan, policy.pacing, None, now=0.0).pacing or Paced()).batches,  # every VM Ready
    )


def simulated_policy(policy: PlanPolicy | None, rollout: Rollout = Rollout.STAGE) -> PlanPolicy:
    """The plan policy of the simulated host that holds base: the host's own (rollout,
    prune and its guard, restart windows) for every VM of the repository, whichever
    host it selects; with none, pruning on (the report words hosts with pruning off)."""
    if policy is None:
        return PlanPolicy(host="", claim_unselected=True, prune=True, rollout=rollout)
    return dataclasses.replace(
        policy,
        host="",
        claim_unselected=True,
        owner="",
        prune_base=None,
        prune_held=None,
        elsewhere=None,
        restart_now=False,
        restart_staged=False,
    )


def _new_warnings(base: Sequence[Problem], head: Sequence[Problem]) -> tuple[Problem, ...]:
    """Head's warnings that base did not have: a pull request answers for what it adds."""
    old = set(base)
    return tuple(w for w in dict.fromkeys(head) if w not in old)


def _yaml(vm: ExpandedVM | None) -> list[str]:
    if vm is None:
        return []
    return manifests.dump_documents([vm.vm]).splitlines(keepends=True)


def _unified(old: list[str], new: list[str], old_name: str, new_name: str) -> str:
    lines = list(difflib.unified_diff(old, new, old_name, new_name, n=3))
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _spec_diff(old: ExpandedVM | None, new: ExpandedVM | None) -> str:
    if new is None or (old is not None and old.vm == new.vm):
        return ""
    # Labels read like git's <rev>:<path>.
    old_name = f"base:{old.source.path}" if old is not None else "/dev/null"
    return _unified(_yaml(old), _yaml(new), old_name, f"head:{new.source.path}")


def _role(info: RevisionInfo) -> str:
    return "preference" if "Preference" in info.kind else "instancetype"


def _key(info: RevisionInfo) -> tuple[str, str, str]:
    return (info.kind, info.namespace, info.name)


def _revision_changes(base: Sequence[ExpandedVM], head: Sequence[ExpandedVM]) -> tuple[RevisionChange, ...]:
    """Instancetypes / preferences whose repository content moved, and every head VM they
    reach: the repository's objects, never a VM's pin (a VM pinned to another revision, by
    base's capture or ``git:<commit>``, reports the repository's in ``newer_revisions``)."""
    base_infos: dict[tuple[str, str, str], RevisionInfo] = {}
    for vm in base:
        newer = {_key(r): r for r in vm.newer_revisions}
        for info in (vm.instancetype, vm.preference):
            if info is not None:
                base_infos.setdefault(_key(info), newer.get(_key(info), info))
    head_infos: dict[tuple[str, str, str], RevisionInfo] = {}
    users: dict[tuple[str, str, str], list[RevisionUse]] = {}
    for vm in head:
        newer = {_key(r): r for r in vm.newer_revisions}
        for info in (vm.instancetype, vm.preference):
            if info is None:
                continue
            key = _key(info)
            repo_info = newer.get(key, info)
            head_infos.setdefault(key, repo_info)
            users.setdefault(key, []).append(RevisionUse(vm.subject, pinned=key in newer))
    changes: list[RevisionChange] = []
    for key in sorted(base_infos.keys() & head_infos.keys()):
        old, new = base_infos[key], head_infos[key]
        if old.hash == new.hash:
            continue
        changes.append(
            RevisionChange(
                role=_role(new),
                kind=new.kind,
                name=new.name,
                namespace=new.namespace,
                base_hash=old.hash,
                head_hash=new.hash,
                vms=tuple(sorted(users.get(key, []), key=lambda u: u.subject)),
                spec_diff=_unified(
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
