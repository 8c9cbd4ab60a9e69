"""reconcile_once(): call the stages in order, nothing else.

Input: a source snapshot, an entry path, a host connection and its settings.
Output: the ``Plan`` and a ``ReconcileStatus``. A commit with any build, expansion or
render error is not applied at all: the host keeps the last good state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from reconciler import catalog as catalog_stage
from reconciler import expand as expand_stage
from reconciler import limits, manifests, overlays, render, source
from reconciler.causes import summarize as summarize_failures
from reconciler.errors import ManifestError, ReconcilerError, RenderError
from reconciler.escape import printable
from reconciler.expand.pins import CatalogAt, git_pins
from reconciler.hostconfig import HostConfig
from reconciler.hostfacts import FactsError, HostFacts, check_domain, facts_from_json, stable_view
from reconciler.hypervisor import Hypervisor
from reconciler.model import (
    ApplyResult,
    ExpandedVM,
    FieldPath,
    FileView,
    LiveDomain,
    Manifest,
    Plan,
    Reason,
    ReconcileStatus,
    RenderedDomain,
    RevisionInfo,
    SourceSnapshot,
    domain_name,
)
from reconciler.plan import PlanCache, PlanPolicy, build_plan
from reconciler.render.interfaces import pod_network_note


@dataclass(frozen=True, slots=True)
class Desired:
    """Everything a revision asks for, rendered for one host."""

    revision: str
    rendered: tuple[RenderedDomain, ...]
    expanded: tuple[ExpandedVM, ...] = ()
    errors: tuple[str, ...] = ()
    failed_names: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    reason: Reason = Reason.SUCCEEDED
    # VMs this host cannot run (checked against its facts): not defined, the others proceed.
    host_errors: tuple[str, ...] = ()

    @property
    def all_errors(self) -> tuple[str, ...]:
        return self.errors + self.host_errors


@dataclass(frozen=True, slots=True)
class HostTarget:
    """One libvirt host this process drives."""

    uri: str
    config: HostConfig
    policy: PlanPolicy = field(default_factory=PlanPolicy)


def pins_from_live(live: Sequence[LiveDomain]) -> dict[str, dict[str, RevisionInfo]]:
    """Captured instancetype/preference revisions by domain name, from ownership marks."""
    pins: dict[str, dict[str, RevisionInfo]] = {}
    for d in live:
        if d.mark is None:
            continue
        for rev in d.mark.revisions:
            role = "preference" if "Preference" in rev.kind else "instancetype"
            pins.setdefault(d.name, {})[role] = rev
    return pins


def build_catalog_at(files: FileView, entry: str) -> catalog_stage.Catalog:
    """Overlays + catalog for one tree; errors point at the field's line."""
    return catalog_stage.build_catalog(overlays.build(files, entry), files.read)


def git_catalog_at(repo: str, entry: str) -> CatalogAt:
    """For ``revisionName: git:<commit>``: the catalog as built at another commit of ``repo``."""

    def catalog_at(commit: str) -> tuple[str, catalog_stage.Catalog]:
        snap = source.read_snapshot(repo, commit)
        return snap.commit, build_catalog_at(snap.files, entry)

    return catalog_at


def merge_pins(
    *layers: Mapping[str, Mapping[str, RevisionInfo]] | None,
) -> dict[str, dict[str, RevisionInfo]]:
    """Later layers win per VM and role (a host's captured revision beats a git: pin)."""
    out: dict[str, dict[str, RevisionInfo]] = {}
    for layer in layers:
        for key, roles in (layer or {}).items():
            out.setdefault(key, {}).update(roles)
    return out


@dataclass(slots=True)
class _Memo:
    manifest: Manifest  # held, so identity stays meaningful
    context: tuple[object, ...]
    expanded: ExpandedVM | None = None
    error: ManifestError | None = None
    rendered: RenderedDomain | None = None
    render_error: str = ""
    host_errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # the expanded VM's, kept when the VM itself is not


@dataclass(slots=True)
class PipelineCache:
    """Per-VM expansion and rendering results of earlier revisions, kept by the caller.

    The overlay engine returns the very same ``Manifest`` objects for documents whose
    inputs did not change, so a VM is re-expanded and re-rendered only when its own
    document is new, or when the catalog (instancetypes, preferences, presets, volume
    sources), its pins, the host config or the host's capabilities changed. A hit
    returns what the same pure computation returned before: ``desired_state`` stays
    a function of its inputs. Nothing here mutates a cached object.

    ``keep_expanded=False`` (the daemon, which only plans and applies) keeps the
    rendered domains but not the expanded VMs: ``Desired.expanded`` is then always
    empty (their warnings are kept), and an idle daemon holds ~8 MiB less per 1000 VMs.
    """

    plan: PlanCache = field(default_factory=PlanCache)
    keep_expanded: bool = True
    memo: dict[int, _Memo] = field(default_factory=dict)
    catalog_objs: tuple[object, ...] = ()
    host: HostConfig | None = None
    generation: int = 0
    hits: int = 0
    misses: int = 0

    def context(self, cat: catalog_stage.Catalog, host: HostConfig, caps: render.HostCaps) -> int:
        """A generation number that changes whenever a VM-independent input changes."""
        objs = tuple(m.obj for m in cat.objects.values() if m.kind != "VirtualMachine")
        same = (
            self.host is host
            and len(objs) == len(self.catalog_objs)
            and all(a is b for a, b in zip(objs, self.catalog_objs, strict=True))
        )
        if not same:
            self.catalog_objs, self.host = objs, host
            self.generation += 1
            self.memo.clear()
        return self.generation

    def lookup(self, vm: Manifest, context: tuple[object, ...]) -> _Memo | None:
        got = self.memo.get(id(vm))
        if got is not None and got.manifest is vm and got.context == context:
            self.hits += 1
            return got
        self.misses += 1
        return None

    def store(self, memo: _Memo, keep: set[int]) -> None:
        keep.add(id(memo.manifest))
        self.memo[id(memo.manifest)] = memo

    def prune(self, keep: set[int]) -> None:
        """Forget VMs that left the revision (bounded memory)."""
        for key in [k for k in self.memo if k not in keep]:
            del self.memo[key]


def desired_state(
    snapshot: SourceSnapshot,
    entry: str,
    host: HostConfig,
    caps: render.HostCaps,
    pinned: Mapping[str, Mapping[str, RevisionInfo]] | None = None,
    follow: bool = False,
    catalog_at: CatalogAt | None = None,
    cache: PipelineCache | None = None,
    facts: HostFacts | None = None,
) -> Desired:
    """Build -> catalog -> expand -> render for one revision. Pure given the snapshot
    (and ``catalog_at``, which reads other commits for ``revisionName: git:<commit>``).
    With ``facts``, every rendered domain is checked against what the host offers; a
    VM the host would refuse is left out of ``rendered`` and named in ``host_errors``."""
    try:
        cat = build_catalog_at(snapshot.files, entry)
    except ManifestError as err:
        return Desired(snapshot.commit, (), errors=(str(err),), reason=Reason.BUILD_FAILED)
    except RecursionError:  # a budget in manifests.py should have caught it first
        message = f"{entry or '.'}: input nested too deeply to build"
        return Desired(snapshot.commit, (), errors=(message,), reason=Reason.BUILD_FAILED)
    problems: list[str] = []
    if catalog_at is not None:
        pinned = merge_pins(git_pins(cat, catalog_at, problems), pinned)
    memos = _expand_and_render(cat, host, caps, pinned or {}, follow, snapshot.files, cache, facts)
    expanded = [m.expanded for m in memos if m.expanded is not None]
    vm_warnings = tuple(w for m in memos for w in m.warnings)
    expand_errors = [m.error for m in memos if m.error is not None]
    clashes = _identity_clashes(memos, snapshot.files.read) + _device_clashes(
        memos, host, snapshot.files.read
    )
    rendered = [m.rendered for m in memos if m.rendered is not None and not m.host_errors]
    errors = problems + [str(e) for e in expand_errors] + [m.render_error for m in memos if m.render_error]
    errors += clashes
    failed = [
        domain_name(m.manifest.namespace, m.manifest.name)
        for m in memos
        if m.rendered is None or m.host_errors
    ]
    reason = Reason.SUCCEEDED
    if expand_errors or problems:
        reason = Reason.EXPANSION_FAILED
    elif errors:
        reason = Reason.RENDER_FAILED
    warnings = tuple(cat.warnings) + vm_warnings
    return Desired(
        snapshot.commit,
        tuple(rendered),
        tuple(expanded),
        tuple(errors),
        tuple(n for n in failed if n),
        warnings,
        reason,
        tuple(e for m in memos for e in m.host_errors),
    )


def _expand_and_render(
    cat: catalog_stage.Catalog,
    host: HostConfig,
    caps: render.HostCaps,
    pinned: Mapping[str, Mapping[str, RevisionInfo]],
    follow: bool,
    files: FileView,
    cache: PipelineCache | None,
    facts: HostFacts | None = None,
) -> list[_Memo]:
    """Expand and render every VM (one VM's error never stops the others)."""
    generation = cache.context(cat, host, caps) if cache is not None else 0
    keep: set[int] = set()
    out: list[_Memo] = []
    current: dict[tuple[str, str, str], RevisionInfo | None] = {}
    for vm in cat.vms:
        pins = _effective_pins(expand_stage.pins_for(pinned, vm), vm, cat, current)
        context = (generation, tuple(sorted(pins.items())) if pins else (), follow, caps, facts)
        memo = cache.lookup(vm, context) if cache is not None else None
        if memo is None:
            memo = _Memo(vm, context)
            try:
                memo.expanded = expand_stage.expand_vm(vm, cat, pins, follow)
            except ManifestError as err:
                memo.error = err
            if memo.expanded is not None:
                memo.warnings = memo.expanded.warnings
                try:
                    memo.rendered = render.render_domain(memo.expanded, host, caps)
                except RenderError as err:
                    memo.render_error = _render_error_text(memo.expanded, err, files.read)
                if memo.rendered is not None and facts is not None:
                    memo.host_errors = unrunnable(memo.expanded, memo.rendered, host, facts, files.read)
                if cache is not None and not cache.keep_expanded:
                    memo.expanded = None
        if cache is not None:
            cache.store(memo, keep)
        out.append(memo)
    if cache is not None:
        cache.prune(keep)
    return out


def _identity_clashes(memos: Sequence[_Memo], read: Callable[[str], bytes]) -> list[str]:
    """One error per VM whose UUID or MAC address another VM of the revision already uses."""
    done = [(m, m.rendered) for m in memos if m.rendered is not None]
    uuids = ((d.uuid, (m, d)) for m, d in done)
    macs = ((mac, (m, d)) for m, d in done for mac, _ in d.macs)
    out: list[str] = []
    for what, pairs in (("UUID", uuids), ("MAC address", macs)):
        for value, (a, first), (b, later) in limits.duplicates(pairs):
            field = "spec.template.spec.domain.firmware.uuid"
            if what != "UUID":
                field = next(f for mac, f in later.macs if mac == value)
            also = f"{what} {value} is also used by {first.subject} ({a.manifest.where()})"
            err = RenderError(later.subject, also, field)
            out.append(_render_error_text_at(b.manifest, err, read))
    return out


def _device_clashes(memos: Sequence[_Memo], host: HostConfig, read: Callable[[str], bytes]) -> list[str]:
    """One error per VM passing through a host device another VM of this host already has:
    one device, one VM."""
    mine = [
        (m, m.rendered)
        for m in memos
        if m.rendered is not None
        and (m.rendered.hostname == host.name if m.rendered.hostname else host.claim_unselected)
    ]
    pairs = ((dev, (m, d)) for m, d in mine for dev, _ in d.host_devices)
    out: list[str] = []
    for value, (a, first), (b, later) in limits.duplicates(pairs):
        field = next(f for dev, f in later.host_devices if dev == value)
        also = f"host device {value} is also passed through to {first.subject} ({a.manifest.where()})"
        out.append(_render_error_text_at(b.manifest, RenderError(later.subject, also, field), read))
    return out


def _effective_pins(
    pins: Mapping[str, RevisionInfo] | None,
    vm: Manifest,
    cat: catalog_stage.Catalog,
    current: dict[tuple[str, str, str], RevisionInfo | None],
) -> Mapping[str, RevisionInfo] | None:
    """``pins`` without those equal to the repository's current revision of their object.

    Expanding with such a pin replays the very object the repository holds, so the
    result is the unpinned one; dropping it lets a VM whose pins are all current share
    its expansion with an unpinned build (``diff`` builds base unpinned and head with
    base's pins). A matcher naming a ``revisionName`` keeps its pin (it selects by it).
    """
    if not pins:
        return pins
    spec = vm.obj.get("spec")
    out: dict[str, RevisionInfo] = {}
    for role, info in pins.items():
        matcher = spec.get(role) if isinstance(spec, dict) else None
        if isinstance(matcher, dict) and matcher.get("revisionName"):
            out[role] = info
            continue
        key = (info.kind, info.namespace, info.name)
        if key not in current:
            obj = cat.get(*key)
            try:
                current[key] = expand_stage.revision_info(obj.obj, info.namespace) if obj else None
            except (KeyError, TypeError, ValueError):  # malformed: expansion reports it
                current[key] = None
        if current[key] != info:
            out[role] = info
    return out or None


def unrunnable(
    vm: ExpandedVM,
    rendered: RenderedDomain,
    host: HostConfig,
    facts: HostFacts,
    read: Callable[[str], bytes],
) -> tuple[str, ...]:
    """One ``file:line:col: vm/x: field: cannot run on host H: ...`` line per missing fact."""
    used = {v.backing for v in rendered.volumes if v.backing}
    images = {img.path: ref for ref, img in sorted(host.images.items()) if img.path in used}
    problems = check_domain(rendered.xml, vm.vm, facts, images)
    where = f" {facts.host}" if facts.host else ""
    return tuple(
        _render_error_text(
            vm,
            RenderError(rendered.subject, f"cannot run on host{where}: {p.message}", p.field or None),
            read,
        )
        for p in problems
    )


def _render_error_text(vm: ExpandedVM, err: RenderError, read: Callable[[str], bytes]) -> str:
    return _render_error_text_at(vm.source, err, read)


def _render_error_text_at(source: Manifest, err: RenderError, read: Callable[[str], bytes]) -> str:
    """``file:line:col: message``, at the field when it can be found in the VM's file."""
    where = source.where()
    if err.field and source.path:
        try:
            line, col = manifests.locate(read(source.path), source.line, parse_field_path(err.field))
        except (ManifestError, OSError, ValueError, KeyError, IndexError):
            line = col = 0
        if line:
            where = f"{printable(source.path)}:{line}:{col}"
    return f"{where}: {err}"


def parse_field_path(text: str) -> FieldPath:
    """``spec.template.spec.volumes[0].hostDisk.path`` -> ``("spec", ..., 0, "hostDisk", "path")``."""
    out: list[str | int] = []
    for part in text.split("."):
        name, _, rest = part.partition("[")
        if name:
            out.append(name)
        while rest:
            index, _, rest = rest.partition("]")
            out.append(int(index))
            rest = rest.lstrip("[")
    return tuple(out)


def plan_host(
    desired: Desired,
    live: Sequence[LiveDomain],
    policy: PlanPolicy,
    *,
    now: float | None = None,
    cache: PlanCache | None = None,
) -> Plan:
    """The plan for one host. A revision with errors is not applied at all, so its plan
    is its errors alone: no VM is created, changed or (however broken the overlay)
    deleted on its account."""
    if desired.errors:
        by_name = {d.name: d for d in live}
        failed = tuple((n, by_name.get(n)) for n in sorted(set(desired.failed_names)))
        return Plan(revision=desired.revision, changes=(), errors=desired.all_errors, failed=failed)
    plan = build_plan(
        desired.revision,
        desired.rendered,
        live,
        policy,
        desired.all_errors,
        desired.failed_names,
        now=now,
        cache=cache,
    )
    newer = newer_revision_notes(desired, {c.name for c in plan.changes})
    return replace(plan, warnings=plan.warnings + newer) if newer else plan


def newer_revision_notes(desired: Desired, names: set[str]) -> tuple[str, ...]:
    """One line per VM of ``names`` pinned to an instancetype/preference revision older
    than the repository's (what ``diff`` reports as a revision change, said by plan too)."""
    out = []
    for vm in desired.expanded:
        if vm.newer_revisions and vm.name in names:
            what = ", ".join(f"{r.kind} {r.name}" for r in vm.newer_revisions)
            out.append(
                f"{vm.subject}: the repository holds a newer revision of {what} than the one captured "
                "for it; it moves there when its revisionName is changed or cleared, or with "
                "instancetypeRevisions: follow"
            )
    return tuple(out)


def facts_file_note(host: HostConfig, snapshot: SourceSnapshot, facts: HostFacts) -> str:
    """A plan line when the repository's copy of this host's facts (``factsFile``) is
    missing or no longer matches the host (figures that change while it runs aside)."""
    path = host.facts_file
    if not path:
        return ""
    refresh = f"refresh it with `reconciler host-facts --connect URI -o {path}`"
    try:
        kept = facts_from_json(snapshot.files.read(path), path)
    except (OSError, KeyError):
        return f"host {host.name}: factsFile {path} is not in the repository; {refresh}"
    except FactsError as err:
        return f"host {host.name}: {err}; {refresh}"
    ours, theirs = stable_view(kept), stable_view(facts)
    differ = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
    if not differ:
        return ""
    return (
        f"host {host.name}: {path} no longer matches this host (differs in {', '.join(differ)}): "
        f"CI checks against stale facts; {refresh}"
    )


def reconcile_once(
    snapshot: SourceSnapshot,
    entry: str,
    target: HostTarget,
    hv: Hypervisor,
    dry_run: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.time,
    cache: PipelineCache | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[Plan, ReconcileStatus]:
    """One pass: read the host, build the revision, plan, and (unless ``dry_run``) apply.

    ``cache`` (kept by the caller per host) lets a resync skip comparisons it already made.
    """
    started = clock()
    t0 = time.monotonic()
    live = hv.list_domains()
    facts = hv.host_facts(img.path for img in target.config.images.values())
    follow = target.config.instancetype_revisions == "follow"
    catalog_at = git_catalog_at(snapshot.repo, entry)
    desired = desired_state(
        snapshot, entry, target.config, facts.caps, pins_from_live(live), follow, catalog_at, cache, facts
    )
    if cache is not None:
        cache.plan.retain(d.name for d in desired.rendered)
    plan = plan_host(desired, live, target.policy, now=started, cache=cache.plan if cache else None)
    notes = (pod_network_note(target.config, facts.caps), facts_file_note(target.config, snapshot, facts))
    if any(notes):
        plan = replace(plan, warnings=(*plan.warnings, *(n for n in notes if n)))

    def status(reason: Reason, results: tuple[ApplyResult, ...] = (), message: str = "") -> ReconcileStatus:
        applied = snapshot.commit if reason == Reason.SUCCEEDED and not dry_run else ""
        return ReconcileStatus(
            reason=reason,
            attempted_revision=snapshot.commit,
            applied_revision=applied,
            started_at=started,
            duration_ms=int((time.monotonic() - t0) * 1000),
            results=results,
            message=message,
        )

    if desired.errors:
        return plan, status(desired.reason, message="; ".join(desired.errors))
    unrunnable = "; ".join(desired.host_errors)
    if dry_run:
        return plan, status(Reason.RENDER_FAILED if unrunnable else Reason.SUCCEEDED, message=unrunnable)
    from reconciler import apply as apply_stage  # here: validate and diff never load the apply stage

    try:
        results = apply_stage.apply_plan(
            plan, hv, apply_stage.HostResources(target.config), should_stop, clock, progress
        )
    except ReconcilerError as err:
        return plan, status(Reason.APPLY_FAILED, message=str(err))
    failed = [r for r in results if not r.ok]
    if failed:
        message = "; ".join(m for m in (summarize_failures(failed), unrunnable) if m)
        return plan, status(Reason.APPLY_FAILED, results, message)
    if unrunnable:  # the other VMs are applied; these wait for a change of git or host
        return plan, status(Reason.RENDER_FAILED, results, unrunnable)
    if plan.prune_refused:  # the rest is applied; the revision is not, until the prunes may go
        return plan, status(Reason.PRUNE_FAILED, results, plan.prune_refused)
    return plan, status(Reason.SUCCEEDED, results)
