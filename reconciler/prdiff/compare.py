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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler import manifests
from reconciler.compare import provenance
from reconciler.compare.cache import CompareCache
from reconciler.context import Context
from reconciler.desired import Desired, PipelineCache, desired_state
from reconciler.desired.pins import build_catalog_at, pins_from_live
from reconciler.model import (
    ExpandedVM,
    LiveDomain,
    Problem,
    RenderedDomain,
    RevisionInfo,
    Rollout,
    SourceSnapshot,
    VMKey,
)
from reconciler.model.changes import Action, Change, Plan
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
from reconciler.prdiff.objects import RevisionChange, SecretChange, revision_changes, secret_changes, unified
from reconciler.render.placement import held_from_live
from reconciler.settings.policy import PlanPolicy

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from reconciler.expand.pins import CatalogAt
    from reconciler.hostfacts import HostFacts
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model.refusal import PruneRefusal
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
    refs = _Refs(base_snapshot, head_snapshot, entry, host, caps, facts, ctx, keys, catalog_at, ancestors)
    base, head, base_live = refs.both(None)
    captured = refs.captured(base, head)
    if captured is not None:  # base as a host holds it: the revisions captured when each VM was first applied
        base, head, base_live = refs.both(captured)
    if head.host_errors or head.elsewhere:  # a PR is checked for every host it names
        head = dataclasses.replace(head, errors=head.every_error, host_errors=(), elsewhere=())
    return compare_desired(
        base,
        head,
        rollout=Rollout(host.rollout) if policy is None else policy.rollout,
        follow=refs.follow,
        base_ref=base_snapshot.ref,
        head_ref=head_snapshot.ref,
        entry=entry,
        sources=_sources(head_snapshot, head),
        policy=policy,
        stated=stated,
        live=base_live,
    )


@dataclass(frozen=True, slots=True)
class _Refs:
    """The two refs ``diff_snapshots`` builds, and what it builds them with (one
    ``PipelineCache``: a VM the same at both is expanded and rendered once)."""

    base: SourceSnapshot
    head: SourceSnapshot
    entry: str
    host: HostConfig
    caps: HostCaps
    facts: HostFacts | None
    context: Context
    keys: Keys | None
    catalog_at: CatalogAt | None
    ancestors: Callable[[], Sequence[str]] | None
    cache: PipelineCache = dataclasses.field(default_factory=PipelineCache)

    @property
    def follow(self) -> bool:
        return self.host.instancetype_revisions == "follow"

    def build(self, snapshot: SourceSnapshot, **given: Any) -> Desired:
        return desired_state(
            snapshot,
            self.entry,
            self.host,
            self.caps,
            catalog_at=self.catalog_at,
            cache=self.cache,
            context=self.context,
            keys=self.keys,
            **given,
        )

    def both(
        self, captured: Mapping[VMKey, Mapping[str, RevisionInfo]] | None
    ) -> tuple[Desired, Desired, tuple[LiveDomain, ...]]:
        """Base (with the revisions a host ``captured``), head built with the pins and
        placements base's simulated host holds, and that host's domains."""
        base = self.build(self.base, pinned=captured)
        base_live = simulated_live(base)
        pins = None if self.follow else pins_from_live(base_live)
        held = held_from_live(base_live)  # dedicated CPUs and mediated devices stay where base placed them
        head = self.build(self.head, pinned=pins, follow=self.follow, facts=self.facts, held=held)
        return base, head, base_live

    def captured(self, base: Desired, head: Desired) -> dict[VMKey, dict[str, RevisionInfo]] | None:
        """The revisions a host captured of the VMs head newly rolls forward (``history``);
        ``None`` when there are none."""
        if self.follow or self.catalog_at is None or self.ancestors is None:
            return None
        rolled = history.rolled(base.objects, head.objects)
        if not rolled:
            return None
        base_cat = build_catalog_at(self.base.files, self.entry, self.context, self.keys)
        return history.captured_pins(base_cat, self.base.commit, rolled, self.ancestors, self.catalog_at)


def _sources(snapshot: SourceSnapshot, head: Desired) -> provenance.Sources:
    """Where head's instancetypes and preferences live (head's catalog)."""
    return provenance.Sources(objects=head.objects, read=snapshot.files.read)


def _unhosted(domains: Iterable[RenderedDomain]) -> list[RenderedDomain]:
    # The diff covers the whole repository, whichever host each VM is assigned to.
    return [dataclasses.replace(d, hostname="") if d.hostname else d for d in domains]


@dataclass(frozen=True, slots=True)
class _Sides:
    """What the entries of a PR diff read of both revisions, by VM key."""

    base: Mapping[VMKey, RenderedDomain]
    head: Mapping[VMKey, RenderedDomain]
    base_expanded: Mapping[VMKey, ExpandedVM]
    head_expanded: Mapping[VMKey, ExpandedVM]
    base_failed: frozenset[VMKey]
    sources: provenance.Sources | None
    pruning: bool | None  # None: any host, pruning or not
    prune_refused: PruneRefusal | None  # the prune guard tripped: why

    @classmethod
    def of(
        cls,
        base: Desired,
        head: Desired,
        sources: provenance.Sources | None,
        pruning: bool | None,
        plan: Plan,
    ) -> _Sides:
        return cls(
            {d.key: d for d in base.rendered},
            {d.key: d for d in head.rendered},
            {vm.key: vm for vm in base.expanded},
            {vm.key: vm for vm in head.expanded},
            frozenset(base.failed),
            sources,
            pruning,
            plan.prune_refused,
        )


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
    live: Sequence[LiveDomain] | None = None,
) -> PRDiff:
    """Compare two built revisions per VM. ``head`` must be built with base's pins (see above).

    ``policy``: the host's plan policy (``config.targets``); its rollout wins over ``rollout``.
    ``live``: base's simulated host (``simulated_live(base)``), when the caller made it."""
    live = simulated_live(base) if live is None else live  # a live domain holds no host name
    policy = simulated_policy(policy, rollout)
    plan = _simulated_plan(head, live, policy)
    sides = _Sides.of(base, head, sources, None if stated is None else policy.prune, plan)
    entries: list[VMEntry] = []
    for c in plan.changes:
        made = _entry(c, sides)
        if made is not None:
            entries.append(made)
    kind_order = {EntryKind.CREATED: 0, EntryKind.DELETED: 1, EntryKind.CHANGED: 2}
    entries.sort(key=lambda e: (kind_order[e.kind], e.name))
    return PRDiff(
        base_ref=base_ref,
        base_commit=base.revision,
        head_ref=head_ref,
        head_commit=head.revision,
        entry=entry,
        vms=tuple(entries),
        revisions=revision_changes(base.expanded, head.expanded),
        secrets=() if head.errors else secret_changes(base, head),
        unchanged=len(plan.changes) - len(entries),
        errors=tuple(head.errors),
        base_errors=tuple(base.errors),
        # A disk's size is a note of its VM's entry (``volume_notes``), not a warning again.
        warnings=_new_warnings(base.warnings, head.warnings)
        + tuple(w for w in plan.warnings if w.notice != Notice.DISK_NOT_RESIZED),
        follow=follow,
        rollout=policy.rollout.value,
        policy=stated,
        batches=(pace_plan(plan, policy.pacing, None, now=0.0).pacing or Paced()).batches,  # every VM Ready
    )


def _simulated_plan(head: Desired, live: Sequence[LiveDomain], policy: PlanPolicy) -> Plan:
    """The plan of a host holding base (``live``) for head; a broken head is its errors
    alone: never "every VM deleted"."""
    if head.errors:
        return Plan(revision=head.revision, changes=(), errors=head.errors)
    desired = _unhosted(head.rendered)
    # A domain rendered once for both refs (see diff_snapshots) is the same definition.
    plan_cache = CompareCache()
    live_by_key = {d.key: d for d in live}
    for d in desired:
        was = live_by_key.get(d.key)
        if was is not None:
            plan_cache.put_same(d, was)
    return build_plan(head.revision, desired, live, policy, (), head.failed, cache=plan_cache, define=False)


def _entry(c: Change, sides: _Sides) -> VMEntry | None:
    """The entry of one change of the plan (``None``: the VM is unchanged)."""
    old_vm, new_vm = sides.base_expanded.get(c.key), sides.head_expanded.get(c.key)
    spec_diff = _spec_diff(old_vm, new_vm)
    if c.action == Action.CREATE:
        d = sides.head[c.key]
        notes: tuple[str, ...] = (
            ("did not build at base: compared as new",) if c.key in sides.base_failed else ()
        )
        notes += passthrough_notes(None, d)
        made = vm_entry(c, EntryKind.CREATED, d, "", created(c, d), spec_diff, notes)
        return dataclasses.replace(made, attributes=tuple(provenance.create_attributes(d)))
    if c.desired is None:  # left git
        b = sides.base[c.key]
        what = deleted(c, sides.prune_refused, sides.pruning)
        return vm_entry(c, EntryKind.DELETED, b, "", what, "", ())
    if c.is_noop and not spec_diff:
        return None
    d = sides.head[c.key]
    at_base = sides.base[c.key]
    notes = host_move(at_base.hostname, d.hostname) + volume_notes(at_base, d) + passthrough_notes(at_base, d)
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
    changes = provenance.explain(c.fields, old_vm, new_vm, sides.sources, d.passthrough)
    return vm_entry(c, EntryKind.CHANGED, d, cls, what, spec_diff, notes, changes)


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


def _spec_diff(old: ExpandedVM | None, new: ExpandedVM | None) -> str:
    if new is None or (old is not None and old.vm == new.vm):
        return ""
    # Labels read like git's <rev>:<path>.
    old_name = f"base:{old.source.path}" if old is not None else "/dev/null"
    return unified(_yaml(old), _yaml(new), old_name, f"head:{new.source.path}")
