"""reconcile_once(): call the stages in order, nothing else.

Input: a source snapshot, an entry path, a host connection and its settings.
Output: the ``Plan`` and a ``ReconcileStatus``. A commit with any build, expansion or
render error is not applied at all: the host keeps the last good state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from reconciler import apply as apply_stage
from reconciler import catalog as catalog_stage
from reconciler import expand as expand_stage
from reconciler import manifests, overlays, render, source
from reconciler.errors import ManifestError, ReconcilerError, RenderError
from reconciler.expand.pins import CatalogAt, git_pins
from reconciler.hostconfig import HostConfig
from reconciler.hypervisor import Hypervisor
from reconciler.model import (
    ExpandedVM,
    FieldPath,
    FileView,
    LiveDomain,
    Plan,
    Reason,
    ReconcileStatus,
    RenderedDomain,
    RevisionInfo,
    SourceSnapshot,
    domain_name,
)
from reconciler.plan import PlanCache, PlanPolicy, build_plan


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


def desired_state(
    snapshot: SourceSnapshot,
    entry: str,
    host: HostConfig,
    caps: render.HostCaps,
    pinned: Mapping[str, Mapping[str, RevisionInfo]] | None = None,
    follow: bool = False,
    catalog_at: CatalogAt | None = None,
) -> Desired:
    """Build -> catalog -> expand -> render for one revision. Pure given the snapshot
    (and ``catalog_at``, which reads other commits for ``revisionName: git:<commit>``)."""
    try:
        cat = build_catalog_at(snapshot.files, entry)
    except ManifestError as err:
        return Desired(snapshot.commit, (), errors=(str(err),), reason=Reason.BUILD_FAILED)
    problems: list[str] = []
    if catalog_at is not None:
        pinned = merge_pins(git_pins(cat, catalog_at, problems), pinned)
    expanded, expand_errors = expand_stage.expand_all(cat, pinned, follow)
    errors = problems + [str(e) for e in expand_errors]
    ok = {domain_name(vm.namespace, vm.name) for vm in expanded}
    failed = [n for n in (domain_name(m.namespace, m.name) for m in cat.vms) if n not in ok]
    rendered: list[RenderedDomain] = []
    for vm in expanded:
        try:
            rendered.append(render.render_domain(vm, host, caps))
        except RenderError as err:
            errors.append(_render_error_text(vm, err, snapshot.files))
            failed.append(domain_name(vm.namespace, vm.name))
    reason = Reason.SUCCEEDED
    if expand_errors or problems:
        reason = Reason.EXPANSION_FAILED
    elif errors:
        reason = Reason.RENDER_FAILED
    warnings = tuple(cat.warnings) + tuple(w for vm in expanded for w in vm.warnings)
    return Desired(
        snapshot.commit,
        tuple(rendered),
        tuple(expanded),
        tuple(errors),
        tuple(n for n in failed if n),
        warnings,
        reason,
    )


def _render_error_text(vm: ExpandedVM, err: RenderError, files: FileView) -> str:
    """``file:line:col: message``, at the field when it can be found in the VM's file."""
    where = vm.source.where()
    if err.field and vm.source.path:
        try:
            line, col = manifests.locate(
                files.read(vm.source.path), vm.source.line, parse_field_path(err.field)
            )
        except (ManifestError, OSError, ValueError, KeyError, IndexError):
            line = col = 0
        if line:
            where = f"{vm.source.path}:{line}:{col}"
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
    return build_plan(
        desired.revision,
        desired.rendered,
        live,
        policy,
        desired.errors,
        desired.failed_names,
        now=now,
        cache=cache,
    )


def reconcile_once(
    snapshot: SourceSnapshot,
    entry: str,
    target: HostTarget,
    hv: Hypervisor,
    dry_run: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.time,
    cache: PlanCache | None = None,
) -> tuple[Plan, ReconcileStatus]:
    """One pass: read the host, build the revision, plan, and (unless ``dry_run``) apply.

    ``cache`` (kept by the caller per host) lets a resync skip comparisons it already made.
    """
    started = clock()
    t0 = time.monotonic()
    live = hv.list_domains()
    caps_xml, domcaps_xml = hv.capabilities_xml()
    caps = render.parse_host_caps(caps_xml, domcaps_xml)
    follow = target.config.instancetype_revisions == "follow"
    catalog_at = git_catalog_at(snapshot.repo, entry)
    desired = desired_state(snapshot, entry, target.config, caps, pins_from_live(live), follow, catalog_at)
    plan = plan_host(desired, live, target.policy, now=started, cache=cache)

    def status(
        reason: Reason, results: tuple[apply_stage.ApplyResult, ...] = (), message: str = ""
    ) -> ReconcileStatus:
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
    if dry_run:
        return plan, status(Reason.SUCCEEDED)
    try:
        results = apply_stage.apply_plan(
            plan, hv, apply_stage.HostResources(target.config), should_stop, clock
        )
    except ReconcilerError as err:
        return plan, status(Reason.APPLY_FAILED, message=str(err))
    failed = [r for r in results if not r.ok]
    if failed:
        return plan, status(Reason.APPLY_FAILED, results, "; ".join(r.message for r in failed))
    return plan, status(Reason.SUCCEEDED, results)
