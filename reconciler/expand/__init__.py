"""Stage E: a VirtualMachine with instancetype, preference, presets and defaults applied.

Input: one VM manifest, the catalog of the same build, optionally the revisions
captured when the VM was first applied (``pinned``). Output: ``ExpandedVM``,
whose ``vm`` is a new object: ``spec.template`` expanded exactly as KubeVirt
does before a VMI runs (kubevirt-semantics.md, "Stage E", §0.3), and
``spec.instancetype`` / ``spec.preference`` removed like KubeVirt's expand-spec
API, so expanding an expanded VM changes nothing. Pure: never mutates its
input, never reads files, git, libvirt, the clock or the environment. Errors
raise ``ExpansionError`` / ``ExpansionConflict`` with the VM's file and line.

Pinning: ``pinned`` maps ``"instancetype"`` / ``"preference"`` to a
``RevisionInfo`` whose ``data`` is the captured object. Unless ``follow``, a pin
for the same kind/name/namespace is expanded instead of the repository's
object, and a differing repository object is reported in
``ExpandedVM.newer_revisions``. ``revisionName`` naming the pin
(``revision_name(info)`` or ``sha256:<hash prefix>``) selects it explicitly, even with
``follow``; otherwise it names a ControllerRevision of the input.
``revisionName: git:<commit>`` is served from
``pinned`` too: ``git_revisions(vm)`` lists the commits the caller must read,
and ``revision_info(obj, namespace, commit)`` builds the entry.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from reconciler import manifests
from reconciler.catalog import Catalog, manifest_error
from reconciler.errors import ExpansionConflict, ExpansionError, ManifestError
from reconciler.expand import (
    configs,
    defaults,
    instancetype,
    matcher,
    preference,
    presets,
    requirements,
    schema,
    topology,
)
from reconciler.expand.matcher import INSTANCETYPE_KEY, PREFERENCE_KEY, Resolution, git_revisions
from reconciler.expand.revision import revision_info, revision_name
from reconciler.expand.tree import RuleError, clone, ensure
from reconciler.model import (
    ExpandedVM,
    Manifest,
    Obj,
    Problem,
    RevisionInfo,
    Severity,
    VMKey,
    annotation_names,
    parse_path,
)
from reconciler.model.problems import Notice
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["expand_all", "expand_vm", "git_revisions", "revision_info", "revision_name"]

DEFAULT_ARCHITECTURE = defaults.DEFAULT_ARCHITECTURE


def _error(vm: Manifest, catalog: Catalog, key: VMKey, err: RuleError) -> ExpansionError:
    base = manifest_error(vm, err.message, err.field, catalog.read)
    return ExpansionError(
        err.message, path=base.path, line=base.line, column=base.column, field=base.field, vm=key
    )


def _conflict(vm: Manifest, catalog: Catalog, key: VMKey, fields: list[str]) -> ExpansionConflict:
    first = fields[0]
    path: tuple[str | int, ...] = (
        ("spec", "template", "metadata", "annotations", first.split(".", 1)[1])
        if first.startswith("annotations.")
        else parse_path(first)
    )
    file, line, column = manifests.field_position(vm, path, catalog.read)
    return ExpansionConflict(fields, path=file, line=line, column=column, vm=key)


def _resolve_matchers(
    spec: Obj, catalog: Catalog, namespace: str, pinned: Mapping[str, RevisionInfo] | None, follow: bool
) -> tuple[dict[str, Resolution], list[str]]:
    """Steps 1-3: validate the matchers, infer from volumes, resolve to specs (edits ``spec``)."""
    warnings: list[str] = []
    for key in (INSTANCETYPE_KEY, PREFERENCE_KEY):
        if spec.get(key) is not None:
            if not isinstance(spec[key], dict):
                raise RuleError(f"spec.{key} must be a mapping", ("spec", key))
            matcher.validate_matcher(key, spec[key])
    for key in (INSTANCETYPE_KEY, PREFERENCE_KEY):  # instancetype first, as KubeVirt
        matcher.apply_inference(catalog, spec, namespace, key)
    resolved: dict[str, Resolution] = {}
    for key in (INSTANCETYPE_KEY, PREFERENCE_KEY):
        if isinstance(spec.get(key), dict):
            res = matcher.resolve(catalog, key, spec[key], namespace, pinned, follow)
            resolved[key] = res
            warnings += res.warnings
            warnings += _object_warnings(catalog, key, res)
    return resolved, warnings


def _object_warnings(catalog: Catalog, key: str, res: Resolution) -> tuple[str, ...]:
    """What the instancetype or preference ``res`` holds that has no effect (a preference's
    invalid topology raises), found once per revision record however many VMs use it
    (``Catalog.resolved``: its spec is one function of the record, see ``matcher``)."""
    got = catalog.resolved.get((key, id(res.info)))
    if got is not None and got[0] is res.info:
        return got[1]
    known = schema.INSTANCETYPE_SPEC if key == INSTANCETYPE_KEY else schema.PREFERENCE_SPEC
    warnings = [
        f"{key} {res.info.name}: {path} is not a field of {res.info.kind}; ignored"
        for path in schema.unknown_fields(res.spec, known)
    ]
    if key == PREFERENCE_KEY:
        name = res.info.name
        for path in schema.unapplied_fields(res.spec):
            warnings.append(f"preference {name}: {path} has no effect (KubeVirt does not apply it either)")
        try:
            warnings += [
                sys.intern(f"preference {name}: {w}") for w in topology.validate_preference(res.spec)
            ]
        except RuleError as err:
            raise RuleError(f"preference {name}: {err.message}", ("spec", PREFERENCE_KEY)) from err
    catalog.resolved[(key, id(res.info))] = (res.info, tuple(warnings))
    return tuple(warnings)


def _admit(
    vm: Manifest, catalog: Catalog, key: VMKey, template: Obj, it: Obj | None, pref: Obj | None
) -> None:
    """Step 4: VM admission on a scratch copy: spread, conflicts, defaults, then requirements.
    Without requirements the copy is not made: the expansion's own instancetype step finds
    the same conflicts (no step before it fails, none touches what it reads), and the
    preference and defaults steps raise nothing."""
    try:
        topology.check_spread(it, pref)
    except RuleError as err:
        raise RuleError(err.message, ("spec", PREFERENCE_KEY)) from err
    if not requirements.has_requirements(pref):
        return
    scratch = clone(template)
    scratch_meta, scratch_spec = ensure(scratch, "metadata"), ensure(scratch, "spec")
    if it is not None:
        conflicts = instancetype.apply_instancetype(it, pref, scratch_spec, scratch_meta)
        if conflicts:
            raise _conflict(vm, catalog, key, conflicts)
    preference.apply_preference(pref, scratch_spec, scratch_meta)
    defaults.apply_spec_defaults(scratch_spec, DEFAULT_ARCHITECTURE)
    requirements.check_requirements(it, pref, scratch_spec, DEFAULT_ARCHITECTURE)


def _rolled_forward(vm: Obj) -> bool:
    """``reconciler.kubevirt.io/roll-forward: "true"``: the VM takes the repository's
    instancetype and preference, not the revisions its domain captured."""
    value = ((vm.get("metadata") or {}).get("annotations") or {}).get(annotation_names.ROLL_FORWARD)
    if value is None or value == "false":
        return False
    if value == "true":
        return True
    raise RuleError(
        f'{value!r} is not "true" or "false"', ("metadata", "annotations", annotation_names.ROLL_FORWARD)
    )


@dataclass(frozen=True, slots=True)
class _Expansion:
    """What the expansion proper applied to the VM's template (edited in place)."""

    instancetype: Resolution | None
    preference: Resolution | None
    presets: tuple[str, ...]
    warnings: tuple[str, ...]
    tspec: Obj  # the template's spec
    meta: Obj  # the template's metadata


def expand_vm(
    vm: Manifest,
    catalog: Catalog,
    pinned: Mapping[str, RevisionInfo] | None = None,
    follow: bool = False,
    key: VMKey | None = None,
) -> ExpandedVM:
    """Expand one VirtualMachine (kubevirt-semantics §0.3, steps 1–12). ``key``: the VM's,
    as the catalog made it (``Catalog.keyed_vms``); the expanded VM carries it."""
    obj: Obj = clone(vm.obj)
    vm_key = key if key is not None else VMKey(vm.namespace, vm.name)
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
        raise ExpansionError("spec.template is required", path=vm.path, line=vm.line, vm=vm_key)
    template: Obj = spec["template"]
    try:
        done = _expand(vm, catalog, vm_key, spec, pinned, follow or _rolled_forward(obj))
    except RuleError as err:
        raise _error(vm, catalog, vm_key, err) from err
    for role in (INSTANCETYPE_KEY, PREFERENCE_KEY):
        spec.pop(role, None)
    if not done.meta:
        template.pop("metadata", None)
    return _expanded(vm, catalog, vm_key, obj, done)


def _expand(
    vm: Manifest,
    catalog: Catalog,
    vm_key: VMKey,
    spec: Obj,
    pinned: Mapping[str, RevisionInfo] | None,
    follow: bool,
) -> _Expansion:
    """Steps 1-12 on ``spec`` (the VM's own copy), in the VM controller's order."""
    template: Obj = spec["template"]
    resolved, warnings = _resolve_matchers(spec, catalog, vm_key.namespace, pinned, follow)
    it_res, pref_res = resolved.get(INSTANCETYPE_KEY), resolved.get(PREFERENCE_KEY)
    it = it_res.spec if it_res else None
    pref = pref_res.spec if pref_res else None
    _admit(vm, catalog, vm_key, template, it, pref)
    # 5.-12. the expansion proper
    meta, tspec = ensure(template, "metadata"), ensure(template, "spec")
    defaults.add_volume_disks(tspec)
    preference.apply_autoattach(pref, tspec)
    defaults.add_input_device(tspec)
    defaults.add_default_network(tspec)
    if it_res is not None:
        conflicts = instancetype.apply_instancetype(it_res.spec, pref, tspec, meta)
        if conflicts:  # caught on admission's scratch copy when the preference has requirements
            raise _conflict(vm, catalog, vm_key, conflicts)
        warnings += _unhonoured(it_res)
    preference.apply_preference(pref, tspec, meta)
    if pref_res is not None and pref_res.spec.get("preferredLaunchSecurity") is not None:
        warnings.append(
            f"preference {pref_res.info.name}: preferredLaunchSecurity is accepted "
            f"but has no effect on a libvirt host ({instancetype.UNHONOURED['launchSecurity']})"
        )
    preference.apply_storage_class(pref, spec)
    applied, preset_warnings = presets.apply_presets(catalog.presets(vm_key.namespace), meta, tspec)
    warnings += preset_warnings
    defaults.apply_spec_defaults(tspec, DEFAULT_ARCHITECTURE)
    return _Expansion(it_res, pref_res, tuple(applied), tuple(warnings), tspec, meta)


def _unhonoured(it_res: Resolution) -> list[str]:
    return [
        f"instancetype {it_res.info.name}: {field} is accepted but has no effect on a libvirt host ({why})"
        for field, why in instancetype.unhonoured_fields(it_res.spec)
    ]


def _expanded(vm: Manifest, catalog: Catalog, vm_key: VMKey, obj: Obj, done: _Expansion) -> ExpandedVM:
    """The expanded VM: ``obj`` as expanded, what it was expanded with, its warnings and
    the build's ConfigMaps and Secrets it names."""
    it_res, pref_res, tspec, namespace = done.instancetype, done.preference, done.tspec, vm_key.namespace
    names = configs.names(tspec)
    return ExpandedVM(
        vm=obj,
        source=vm,
        instancetype=it_res.info if it_res else None,
        preference=pref_res.info if pref_res else None,
        presets=done.presets,
        warnings=tuple(Problem(w, vm=vm_key, severity=Severity.WARNING) for w in dict.fromkeys(done.warnings))
        + tuple(
            Problem(r.newer_note, vm=vm_key, severity=Severity.WARNING, notice=Notice.PINNED_REVISION)
            for r in (it_res, pref_res)
            if r is not None and r.newer_note
        ),
        newer_revisions=tuple(r.newer for r in (it_res, pref_res) if r is not None and r.newer is not None),
        config_maps=configs.config_maps(names, catalog, namespace),
        hashed_names=configs.hashed_names(names, catalog, namespace),
        secrets=configs.secrets(names, catalog, namespace, vm),
        key=vm_key,
    )


def expand_all(
    catalog: Catalog,
    pinned: Mapping[VMKey, Mapping[str, RevisionInfo]] | None = None,
    follow: bool = False,
) -> tuple[list[ExpandedVM], list[ManifestError]]:
    """Expand every VM of ``catalog``; one VM's error never stops the others."""
    expanded: list[ExpandedVM] = []
    errors: list[ManifestError] = []
    pins = pinned or {}
    for key, vm in catalog.keyed_vms():
        try:
            expanded.append(expand_vm(vm, catalog, pins.get(key), follow, key))
        except ManifestError as err:
            errors.append(err)
    return expanded, errors
