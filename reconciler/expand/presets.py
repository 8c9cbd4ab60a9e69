"""VirtualMachineInstancePresets (kubevirt-semantics §e).

Input: the presets of the VM's namespace, the template metadata and spec
(edited in place). Output: the names of the presets applied and warnings for
sections the VM already set differently (the VM wins). Two matching presets
that disagree reject the VM. Pure; presets are taken in name order.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.expand.tree import RuleError, canonical, clone, dig, ensure
from reconciler.model import units
from reconciler.wording.escape import located

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model import Manifest, Obj

EXCLUDE_ANNOTATION = "virtualmachineinstancepresets.admission.kubevirt.io/exclude"
ANNOTATION_PREFIX = "virtualmachinepreset.kubevirt.io/"
ANNOTATION_VALUE = "kubevirt.io/v1"


def _pruned(value: Any) -> Any:
    """Drop null-valued keys so ``{a: null}`` equals ``{}`` (Go's nil pointers)."""
    if isinstance(value, dict):
        return {k: _pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


# Plain (non-pointer) Go fields of the compared sections: their zero value equals absence.
_PLAIN_FIELDS = MappingProxyType(
    {
        "cpu": frozenset(
            {
                "sockets",
                "cores",
                "threads",
                "maxSockets",
                "model",
                "dedicatedCpuPlacement",
                "isolateEmulatorThread",
            }
        ),
        "firmware": frozenset({"uuid", "serial"}),
        "watchdog": frozenset({"name"}),
    }
)
# FeatureState held by value: {} equals absence.
_ZERO_STRUCTS = MappingProxyType({"features": frozenset({"acpi"})})


def _go_equal(section: str, a: Any, b: Any) -> bool:
    """Semantic equality of one preset section, as Go compares the typed structs."""

    def norm(value: Any) -> Any:
        value = _pruned(value)
        if not isinstance(value, dict):
            return value
        plain, zero_structs = _PLAIN_FIELDS.get(section, frozenset()), _ZERO_STRUCTS.get(section, frozenset())
        return {
            k: v
            for k, v in value.items()
            if not (k in plain and v in ("", 0, False)) and not (k in zero_structs and v == {})
        }

    return bool(norm(a) == norm(b))


def _equal(a: Any, b: Any) -> bool:
    return bool(_pruned(a) == _pruned(b))


def selector_matches(selector: object, labels: dict[str, str], where: str) -> bool:
    """Kubernetes LabelSelector semantics; an empty selector matches everything."""
    if not isinstance(selector, dict):
        raise RuleError(f"{where}: spec.selector must be a mapping")
    for key, val in (selector.get("matchLabels") or {}).items():
        if labels.get(str(key)) != str(val):
            return False
    for expr in selector.get("matchExpressions") or []:
        if not isinstance(expr, dict):
            raise RuleError(f"{where}: invalid matchExpressions entry {expr!r}")
        key, op, values = str(expr.get("key") or ""), expr.get("operator"), expr.get("values") or []
        if op in ("In", "NotIn"):
            if not values:
                raise RuleError(
                    f"{where}: values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
                )
            found = key in labels and labels[key] in [str(v) for v in values]
            if (op == "In") != found:
                return False
        elif op in ("Exists", "DoesNotExist"):
            if values:
                raise RuleError(
                    f"{where}: values: Invalid value: {values}: values set must be empty for exists and does not exist"
                )
            if (op == "Exists") != (key in labels):
                return False
        else:
            raise RuleError(f'{where}: "{op}" is not a valid label selector operator')
    return True


def _requests(domain: Obj) -> dict[str, Any] | None:
    req = dig(domain, "resources", "requests")
    return req if isinstance(req, dict) else None


SECTIONS = (  # (path inside the domain, name in messages)
    (("cpu",), "spec.cpu"),
    (("firmware",), "spec.firmware"),
    (("features",), "spec.features"),
    (("devices", "watchdog"), "spec.devices.watchdog"),
    (("ioThreadsPolicy",), "spec.ioThreadsPolicy"),
)


def _offset(clock: Obj) -> Obj:
    return {k: clock.get(k) for k in ("utc", "timezone") if clock.get(k) is not None}


def merge_conflicts(preset: Obj, domain: Obj) -> list[tuple[str, str, str]]:
    """(field, preset value, other value) for each disagreement (KubeVirt's checkMergeConflicts)."""
    out = []
    preq, vreq = _requests(preset) or {}, _requests(domain) or {}
    for key, val in preq.items():
        if key in vreq and not _same_quantity(val, vreq[key]):
            out.append((f"spec.resources.requests[{key}]", str(val), str(vreq[key])))
    for path, label in SECTIONS:
        a, b = dig(preset, *path), dig(domain, *path)
        if a is not None and b is not None and not _go_equal(str(path[-1]), a, b):
            out.append((label, canonical(a), canonical(b)))
    pclock, vclock = preset.get("clock"), domain.get("clock")
    if isinstance(pclock, dict) and isinstance(vclock, dict):
        if not _equal(_offset(pclock), _offset(vclock)):
            out.append(("spec.clock.clockoffset", canonical(_offset(pclock)), canonical(_offset(vclock))))
        ptimer, vtimer = pclock.get("timer"), vclock.get("timer")
        if ptimer is not None and vtimer is not None and not _equal(ptimer, vtimer):
            out.append(("spec.clock.timer", canonical(ptimer), canonical(vtimer)))
    return out


def _same_quantity(a: Any, b: Any) -> bool:
    try:
        return units.quantity_value(a) == units.quantity_value(b)
    except units.QuantityError:
        return bool(a == b)


def _merge(preset: Obj, domain: Obj) -> bool:
    """Copy the preset's sections the VMI lacks; True if any section now equals the preset's."""
    applied = False
    preq = _requests(preset)
    if preq:
        if _requests(domain) is None:
            ensure(ensure(domain, "resources"), "requests").update(clone(preq))
        vreq = _requests(domain) or {}
        if set(vreq) == set(preq) and all(_same_quantity(preq[k], vreq[k]) for k in preq):
            applied = True
    for path, _ in SECTIONS:
        want = dig(preset, *path)
        if want is None:
            continue
        parent = domain
        for part in path[:-1]:
            parent = ensure(parent, str(part))
        if parent.get(path[-1]) is None:
            parent[path[-1]] = clone(want)
        if _go_equal(str(path[-1]), parent[path[-1]], want):
            applied = True
    pclock = preset.get("clock")
    if isinstance(pclock, dict):
        if domain.get("clock") is None:
            domain["clock"] = clone(_offset(pclock))
        if _equal(domain["clock"], pclock):
            applied = True
        if pclock.get("timer") is not None:
            if domain["clock"].get("timer") is None:
                domain["clock"]["timer"] = clone(pclock["timer"])
            if _equal(domain["clock"]["timer"], pclock["timer"]):
                applied = True
    return applied


def apply_presets(presets: Sequence[Manifest], meta: Obj, spec: Obj) -> tuple[list[str], list[str]]:
    """Apply matching presets to ``spec``/``meta`` in place; returns (applied names, warnings)."""
    annotations = meta.get("annotations") or {}
    if annotations.get(EXCLUDE_ANNOTATION) == "true":
        return [], []
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    matching = []
    for preset in sorted(presets, key=lambda m: m.name):
        where = f"{located(preset)}: VirtualMachineInstancePreset {preset.name}"
        if selector_matches(dig(preset.obj, "spec", "selector") or {}, labels, where):
            matching.append(preset)
    if not matching:
        return [], []
    errors = []
    for i, preset in enumerate(matching):
        for visited in matching[:i]:
            found = merge_conflicts(
                dig(preset.obj, "spec", "domain") or {}, dig(visited.obj, "spec", "domain") or {}
            )
            if found:
                details = ", ".join(f"{field}: {a} != {b}" for field, a, b in found)
                errors.append(f"presets '{preset.name}' and '{visited.name}' conflict: {details}")
    if errors:
        raise RuleError(
            f"VirtualMachinePresets cannot be applied due to conflicts: {'; '.join(errors)}",
            ("spec", "template", "metadata", "labels"),
        )
    domain = ensure(spec, "domain")
    applied, warnings = [], []
    for preset in matching:
        pdomain = dig(preset.obj, "spec", "domain") or {}
        conflicts = merge_conflicts(pdomain, domain)
        ok = _merge(pdomain, domain)
        for field, preset_value, vm_value in conflicts:
            warnings.append(
                f"preset {preset.name}: {field} not applied: the VM's {vm_value} is kept over the preset's {preset_value}"
            )
        if ok:
            ensure(meta, "annotations")[ANNOTATION_PREFIX + preset.name] = ANNOTATION_VALUE
            applied.append(preset.name)
    return applied, warnings
