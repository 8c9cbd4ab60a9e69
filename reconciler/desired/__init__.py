"""The pure desired-state pipeline: a snapshot -> built -> expanded -> rendered domains.

Input: a ``SourceSnapshot``, an entry path, a host config and its capabilities (and,
for pins, the live domains' captured revisions; for SOPS files, the keys the caller
loaded, or ``SEALED``). Output: a ``Desired`` (rendered domains,
expanded VMs, errors and warnings as ``Problem`` records: an exception of a stage becomes
one here, at the VM's file and line). Pure: no host, daemon, CLI or git is imported
(another commit's catalog is read through the caller's reader); the daemon,
``plan``/``apply``, ``validate`` and the PR diff all build through here. The caller
passes its ``context.Context`` (the overlay and catalog caches, the mapper) and its
``PipelineCache`` for the host. The VMs to expand and render go through the mapper as
pure work (no file is read); a VM whose work met an error is done again here, with the
revision's files at hand to point the error at its line.

Rendering runs in three phases, each domain's element tree built once and never parsed
back: per VM, its draft (``render.render_draft``, checked against the host's facts on
the tree; cached per VM); per host, the placement of dedicated CPUs and mediated devices
(``render.placement``); then each domain is serialized once (``render.finish``). Only the
drafts of VMs that want placement are kept (their trees), with their last serialization.

The revision pins (the revisions a host's domains captured, the catalogs of other
commits that ``git:<commit>`` pins name) are ``desired.pins``'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import TYPE_CHECKING

from reconciler import catalog as catalog_stage
from reconciler import expand as expand_stage
from reconciler import render
from reconciler.compare.cache import CompareCache
from reconciler.context import SERIAL, Context, RevisionCache
from reconciler.desired.pins import build_catalog_at, effective_pins, merge_pins, rest_documents
from reconciler.errors import ManifestError, RenderError
from reconciler.expand.pins import CatalogAt, git_pins
from reconciler.hostfacts import HostFacts, check_domain
from reconciler.model import (
    ExpandedVM,
    Manifest,
    Problem,
    RenderedDomain,
    RevisionInfo,
    SourceSnapshot,
    VMKey,
    trees,
)
from reconciler.model.results import Reason
from reconciler.records import dataclass
from reconciler.render.identity import HOSTNAME_LABEL
from reconciler.render.placement import (
    Held,
    device_clashes,
    identity_clashes,
    place_resources,
    render_problem,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from reconciler.context import Mapper
    from reconciler.manifests.sops.keys import Keys
    from reconciler.settings.host import HostConfig


@dataclass(frozen=True, slots=True)
class Desired:
    """Everything a revision asks for, rendered for one host."""

    revision: str
    rendered: tuple[RenderedDomain, ...]
    expanded: tuple[ExpandedVM, ...] = ()
    errors: tuple[Problem, ...] = ()
    failed: tuple[VMKey, ...] = ()  # VMs of git that did not expand, render or fit this host
    warnings: tuple[Problem, ...] = ()  # the catalog's and the expanded VMs' (what validate shows)
    reason: Reason = Reason.SUCCEEDED
    # VMs this host cannot run (checked against its facts, its free resources): errors of
    # the revision on this host (nothing of it is applied there), kept apart for the words.
    host_errors: tuple[Problem, ...] = ()
    # The revision's objects by (kind, namespace, name) (where instancetypes and
    # preferences live, for the PR diff's provenance); empty if it did not build.
    objects: Mapping[tuple[str, str, str], Manifest] = field(default_factory=dict)
    # Render errors of VMs that select another host (``kubernetes.io/hostname``): that
    # host's to report, never this host's (hosts are independent); the PR diff counts them.
    elsewhere: tuple[Problem, ...] = ()
    away: tuple[VMKey, ...] = ()  # of ``failed``, the VMs those errors are of: no row here

    @property
    def all_errors(self) -> tuple[Problem, ...]:
        return self.errors + self.host_errors

    @property
    def every_error(self) -> tuple[Problem, ...]:
        """Also those of VMs that select another host (what a PR is checked for)."""
        return self.errors + self.host_errors + self.elsewhere


@dataclass(slots=True)
class _Memo:
    manifest: Manifest  # held, so identity stays meaningful
    key: VMKey  # the VM's, as the catalog made it
    # What the results below were computed with (``None``: nothing yet; set once done).
    context: tuple[object, ...] | None = None
    expanded: ExpandedVM | None = None
    error: Problem | None = None  # the expansion's
    # The serialized domain: for a VM that wants host resources, the last one placed
    # (with ``placed``), made anew only when its placement changes.
    rendered: RenderedDomain | None = None
    draft: render.Draft | None = None  # kept only for a VM that wants host resources
    placed: render.Placed | None = None
    render_error: Problem | None = None
    host_errors: tuple[Problem, ...] = ()
    warnings: tuple[Problem, ...] = ()  # the expanded VM's, kept when the VM itself is not

    @property
    def record(self) -> RenderedDomain | None:
        """The rendered domain's record before placement (``None``: it did not render)."""
        return self.draft.domain if self.draft is not None else self.rendered

    def finished(self, placed: render.Placed | None) -> RenderedDomain:
        """The domain serialized with what the host ``placed`` for it."""
        if self.draft is None:
            assert self.rendered is not None
            return self.rendered
        if self.rendered is None or placed != self.placed:
            self.rendered, self.placed = render.finish(self.draft, placed), placed
        return self.rendered


@dataclass(slots=True)
class PipelineCache:
    """Per-VM expansion and rendering results of earlier revisions, kept by the caller
    for one host (they depend on its config), with its ``CompareCache``.

    Keyed by the identity of each VM's ``Manifest`` (the promise of ``context.py``: the
    overlay build hands out the same object for an unchanged document), each VM's memo
    found or made in one call (``memo_of``), and checked
    against everything else the VM's expansion and rendering read: the catalog's other
    objects (instancetypes, preferences, presets, volume sources), its pins, the host
    config, the host's capabilities and facts. A hit returns what the same pure
    computation returned before: ``desired_state`` stays a function of its inputs.
    Nothing here mutates a cached object. A VM is kept as its serialized domain; one
    that wants host resources also as its draft (its element tree), so a new placement
    serializes it again without rendering it. One eviction rule
    (``context.RevisionCache``), a run being one revision: a VM that left git is
    forgotten two revisions later.

    ``keep_expanded=False`` (the daemon, which only plans and applies) keeps the
    rendered domains but not the expanded VMs: ``Desired.expanded`` is then always
    empty (their warnings are kept), and an idle daemon holds ~8 MiB less per 1000 VMs;
    and it keeps the rendered domains packed (``RenderedDomain.packed``: what a plan of
    an unchanged domain reads kept, its XML, volumes and the rest in one blob read back
    where a changed domain is compared, defined or created; ~0.9 MiB less per 1000 VMs
    than with only its XML packed), the VMs without pins sharing one context and the
    domains packed together their equal revisions; its context's overlay cache then
    keeps the documents' trees at rest between revisions (``model.trees``: ~5.5 MiB less
    per 1000 VMs; a VM's document, unpacked for its work, rests again once its work is
    done).
    """

    plan: CompareCache = field(default_factory=CompareCache)
    keep_expanded: bool = True
    memo: RevisionCache[Manifest, _Memo] = field(default_factory=RevisionCache)
    catalog_objs: tuple[object, ...] = ()
    host: HostConfig | None = None
    generation: int = 0
    hits: int = 0
    misses: int = 0

    def context(self, cat: catalog_stage.Catalog, host: HostConfig, caps: render.HostCaps) -> int:
        """A generation number that changes whenever a VM-independent input changes."""
        # The records, by identity (an unchanged document's is the same; a resting tree is not unpacked)
        objs = tuple(m for m in cat.objects.values() if m.kind != "VirtualMachine")
        same = (
            self.host is host
            and len(objs) == len(self.catalog_objs)
            and all(a is b for a, b in zip(objs, self.catalog_objs, strict=True))
        )
        if not same:
            self.catalog_objs, self.host = objs, host
            self.generation += 1
        return self.generation

    def memo_of(self, key: VMKey, vm: Manifest, context: tuple[object, ...]) -> _Memo:
        """The VM's memo, found by its document (one call with it), its results current when
        ``memo.context == context`` (counted as a hit); the caller computes a memo that is
        not and then sets its ``context``."""
        memo = self.memo.same(vm, lambda: _Memo(vm, key))
        if memo.context == context:
            self.hits += 1
        else:
            self.misses += 1
        return memo


def desired_state(
    snapshot: SourceSnapshot,
    entry: str,
    host: HostConfig,
    caps: render.HostCaps,
    pinned: Mapping[VMKey, Mapping[str, RevisionInfo]] | None = None,
    follow: bool = False,
    catalog_at: CatalogAt | None = None,
    cache: PipelineCache | None = None,
    facts: HostFacts | None = None,
    held: Held | None = None,
    context: Context | None = None,
    keys: Keys | None = None,
) -> Desired:
    """Build -> catalog -> expand -> render for one revision. Pure given the snapshot
    (and ``catalog_at``, which reads other commits for ``revisionName: git:<commit>``)
    and ``keys`` (SOPS files: None, an encrypted file is an error; ``SEALED``, read
    without keys).
    With ``facts``, every rendered domain is checked against what the host offers; a
    VM the host would refuse is left out of ``rendered`` and named in ``host_errors``.
    ``context``: the caller's caches and mapper (without it, a cold, serial build)."""
    ctx = context if context is not None else Context()
    if cache is not None and not cache.keep_expanded:  # the daemon's: documents rest between builds
        shelf = rest_documents(ctx)
        try:
            return _desired_state(
                snapshot, entry, host, caps, pinned, follow, catalog_at, cache, facts, held, ctx, keys
            )
        finally:
            shelf.settle()  # the trees this revision's stages unpacked rest again
    return _desired_state(
        snapshot, entry, host, caps, pinned, follow, catalog_at, cache, facts, held, ctx, keys
    )


def _desired_state(
    snapshot: SourceSnapshot,
    entry: str,
    host: HostConfig,
    caps: render.HostCaps,
    pinned: Mapping[VMKey, Mapping[str, RevisionInfo]] | None,
    follow: bool,
    catalog_at: CatalogAt | None,
    cache: PipelineCache | None,
    facts: HostFacts | None,
    held: Held | None,
    ctx: Context,
    keys: Keys | None,
) -> Desired:
    try:
        cat = build_catalog_at(snapshot.files, entry, ctx, keys)
    except ManifestError as err:
        return Desired(snapshot.commit, (), errors=(err.problem(),), reason=Reason.BUILD_FAILED)
    except RecursionError:  # a budget in manifests.py should have caught it first
        problem = Problem("input nested too deeply to build", subject=entry or ".")
        return Desired(snapshot.commit, (), errors=(problem,), reason=Reason.BUILD_FAILED)
    if catalog_at is not None:
        pinned = merge_pins(pinned, git_pins(cat, catalog_at))
    return desired_from_catalog(
        cat,
        snapshot.commit,
        snapshot.files.read,
        host,
        caps,
        pinned,
        follow,
        cache,
        facts,
        held,
        ctx.mapper,
    )


def desired_from_catalog(
    cat: catalog_stage.Catalog,
    revision: str,
    read: Callable[[str], bytes],
    host: HostConfig,
    caps: render.HostCaps,
    pinned: Mapping[VMKey, Mapping[str, RevisionInfo]] | None = None,
    follow: bool = False,
    cache: PipelineCache | None = None,
    facts: HostFacts | None = None,
    held: Held | None = None,
    mapper: Mapper = SERIAL,
) -> Desired:
    """Expand -> render every VM of a built catalog (``read``: the files its manifests came
    from, for error positions)."""
    memos = _expand_and_render(cat, host, caps, pinned or {}, follow, read, cache, facts, mapper)
    expanded = [m.expanded for m in memos if m.expanded is not None]
    vm_warnings = tuple(w for m in memos for w in m.warnings)
    expand_errors = [m.error for m in memos if m.error is not None]
    clashes = identity_clashes(memos, read) + device_clashes(memos, host, read)
    placed, place_errors = place_resources(memos, host, caps, facts, held or Held(), read)
    rendered = [
        m.finished(placed.get(r.name))
        for m in memos
        if (r := m.record) is not None and not m.host_errors and r.name not in place_errors
    ]
    render_errors = [(m.manifest, m.render_error) for m in memos if m.render_error is not None]
    elsewhere = tuple(e for vm, e in render_errors if _elsewhere(vm, host))
    errors = [*expand_errors, *(e for vm, e in render_errors if not _elsewhere(vm, host))]
    errors += clashes
    failed = [m.key for m in memos if (r := m.record) is None or m.host_errors or r.name in place_errors]
    reason = Reason.SUCCEEDED
    if expand_errors:
        reason = Reason.EXPANSION_FAILED
    elif errors:
        reason = Reason.RENDER_FAILED
    warnings = tuple(cat.warnings) + vm_warnings
    return Desired(
        revision,
        tuple(rendered),
        tuple(expanded),
        tuple(errors),
        tuple(k for k in failed if k.name),
        warnings,
        reason,
        (*(e for m in memos for e in m.host_errors), *place_errors.values()),
        cat.objects,
        elsewhere,
        tuple(
            VMKey(m.manifest.namespace, m.manifest.name)
            for m in memos
            if m.render_error and _elsewhere(m.manifest, host)
        ),
    )


def _elsewhere(vm: Manifest, host: HostConfig) -> bool:
    """The VM selects another host by ``kubernetes.io/hostname`` (read from the document:
    its rendering here may have failed)."""
    spec = vm.obj.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    tspec = template.get("spec") if isinstance(template, dict) else None
    selector = tspec.get("nodeSelector") if isinstance(tspec, dict) else None
    wanted = selector.get(HOSTNAME_LABEL) if isinstance(selector, dict) else None
    return isinstance(wanted, str) and bool(wanted) and wanted != host.name


def _expand_and_render(
    cat: catalog_stage.Catalog,
    host: HostConfig,
    caps: render.HostCaps,
    pinned: Mapping[VMKey, Mapping[str, RevisionInfo]],
    follow: bool,
    read: Callable[[str], bytes],
    cache: PipelineCache | None,
    facts: HostFacts | None = None,
    mapper: Mapper = SERIAL,
) -> list[_Memo]:
    """Expand and render every VM (one VM's error never stops the others); the VMs not
    in ``cache`` through ``mapper``."""
    generation = cache.context(cat, host, caps) if cache is not None else 0
    keep_expanded = cache is None or cache.keep_expanded
    out: list[_Memo] = []
    todo: list[tuple[_Memo, Mapping[str, RevisionInfo] | None, tuple[object, ...]]] = []
    current: dict[tuple[str, str, str], RevisionInfo | None] = {}
    unpinned = (generation, (), follow, caps, facts)  # one for every VM without pins (memos keep it)
    for key, vm in cat.keyed_vms():
        pins = effective_pins(pinned.get(key), vm, cat, current)
        context = (generation, tuple(sorted(pins.items())), follow, caps, facts) if pins else unpinned
        memo = cache.memo_of(key, vm, context) if cache is not None else _Memo(vm, key)
        if memo.context != context:
            todo.append((memo, pins, context))
        out.append(memo)

    quiet = dataclasses.replace(cat, read=None)  # the mapped work reads no file
    same: dict[object, object] = {}  # values equal across the run's packed domains, held once

    def work(item: tuple[Manifest, VMKey, Mapping[str, RevisionInfo] | None]) -> _Work:
        done = _work(item[0], item[1], quiet, item[2], follow, host, caps, facts, None)
        if keep_expanded:
            return done
        # The mapper returns every VM's result before the memos take them: an expanded VM
        # not kept is dropped as soon as made, not held with the whole fleet's until the
        # last is rendered (its many small dicts would leave that much free room in the
        # allocator's pools of a long-lived process); its domain is packed as soon as made.
        rendered = done[2].packed(same) if done[2] is not None else None
        trees.doze(item[0])  # its document, if it rests between builds, rests again now
        return (None, done[1], rendered, *done[3:])

    # The mapped items hold the VM's document, key and pins (not what its memo kept before).
    items = [(memo.manifest, memo.key, pins) for memo, pins, _context in todo]
    for (memo, pins, done_with), done in zip(todo, mapper.map(work, items), strict=True):
        if done[1] is not None or done[4] is not None or done[5]:  # an error: at its line, reading the file
            done = _work(memo.manifest, memo.key, cat, pins, follow, host, caps, facts, read)
        expanded, memo.error, memo.rendered, memo.draft, memo.render_error, memo.host_errors, warned = done
        memo.expanded = expanded if keep_expanded else None
        memo.placed = None
        memo.warnings = warned
        if memo.rendered is not None and not keep_expanded:
            memo.rendered = memo.rendered.packed(same)  # kept for good: ~1 KB less
        memo.context = done_with
    if cache is not None:
        cache.memo.end_run()
    return out


# One VM's expansion and rendering: expanded, expansion error, rendered (serialized: the
# VM wants no host resources) or its draft (it does: placed and serialized per host),
# render error, host errors, the expanded VM's warnings (what a ``_Memo`` keeps of them).
_Work = tuple[
    ExpandedVM | None,
    Problem | None,
    RenderedDomain | None,
    render.Draft | None,
    Problem | None,
    tuple[Problem, ...],
    tuple[Problem, ...],
]


def _work(
    vm: Manifest,
    key: VMKey,
    cat: catalog_stage.Catalog,
    pins: Mapping[str, RevisionInfo] | None,
    follow: bool,
    host: HostConfig,
    caps: render.HostCaps,
    facts: HostFacts | None,
    read: Callable[[str], bytes] | None,
) -> _Work:
    """One VM's work; ``read`` None: problems name the document's line, not the field's."""
    try:
        expanded = expand_stage.expand_vm(vm, cat, pins, follow, key)
    except ManifestError as err:
        return None, err.problem(), None, None, None, (), ()
    try:
        draft = render.render_draft(expanded, host, caps)
    except RenderError as err:
        return expanded, None, None, None, render_problem(expanded.source, err, read), (), expanded.warnings
    here = draft.domain.runs_on(host.name, host.claim_unselected)  # another host's VM: its host checks it
    host_errors = unrunnable(expanded, draft, host, facts, read) if facts is not None and here else ()
    if draft.wants_placement:
        return expanded, None, None, draft, None, host_errors, expanded.warnings
    return expanded, None, draft.domain, None, None, host_errors, expanded.warnings  # serialized as drafted


def unrunnable(
    vm: ExpandedVM,
    draft: render.Draft,
    host: HostConfig,
    facts: HostFacts,
    read: Callable[[str], bytes] | None,
) -> tuple[Problem, ...]:
    """One ``cannot run on host H: ...`` error per missing fact, at the field's line
    (checked on the draft's element tree: the domain's XML is not parsed)."""
    rendered = draft.domain
    used = {v.backing for v in rendered.volumes if v.backing}
    images = {img.path: ref for ref, img in sorted(host.images.items()) if img.path in used}
    problems = check_domain(draft.tree, vm.vm, facts, images)
    where = f" {facts.host}" if facts.host else ""
    return tuple(
        render_problem(
            vm.source,
            RenderError(rendered.key, f"cannot run on host{where}: {p.message}", p.field or None),
            read,
        )
        for p in problems
    )
