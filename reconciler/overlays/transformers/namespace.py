"""namespace: set the namespace of every namespaced object, as kustomize's namespace filter does.

``metadata.namespace`` of every namespaced object; the ``namespace`` field specs (a
``Namespace``'s own name only when its apiVersion is ``v1``: another group's kind
``Namespace`` is left alone); the subjects of RoleBindings and ClusterRoleBindings by the
``setRoleBindingSubjects`` mode (default: only the subjects named ``default``). A builtin
``NamespaceTransformer`` config (``plugins``) may ask for ``unsetOnly`` and another mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.overlays.kustomization import STR, frozen_spec
from reconciler.overlays.resource import MISSING, Res, is_cluster_scoped, update_path

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from reconciler.overlays.kustomization import Acc, Kust
    from reconciler.overlays.patching import Patching

FIELDS = ("namespace",)  # the kustomization fields this transformer reads
SHAPES: Mapping[str, Any] = frozen_spec({})  # the keys each may hold (kustomize reads strictly)
TYPES: Mapping[str, Any] = frozen_spec({"namespace": STR})  # where a YAML 1.1 boolean or number is an error

_META_NAMESPACE = ("metadata", "namespace")
_META_NAME = ("metadata", "name")
_SUBJECTS_NAMESPACE = ("subjects", "namespace")
_BINDINGS = ("RoleBinding", "ClusterRoleBinding")
_MODES = ("defaultOnly", "none", "allServiceAccounts")


def run(b: Patching, kust: Kust, acc: Acc) -> None:
    ns = kust.str_field("namespace")
    if not ns:
        return
    specs = acc.config.namespace
    unset_only = bool(kust.doc.get("unsetOnly"))  # only from a NamespaceTransformer config
    mode = str(kust.doc.get("setRoleBindingSubjects") or "defaultOnly")
    if mode not in _MODES:
        raise kust.error(
            f"invalid value {mode!r} for setRoleBindingSubjects: must be one of {', '.join(map(repr, _MODES))}"
        )

    def setter(old: Any) -> Any:
        if unset_only and old not in (MISSING, None, ""):
            return MISSING
        return MISSING if old == ns else ns

    def fn(r: Res) -> Res | None:
        cur = r.cur
        obj = r.obj
        if not is_cluster_scoped(cur.group, cur.kind):
            obj = update_path(obj, _META_NAMESPACE, True, setter)
        binding = cur.kind in _BINDINGS
        if binding and mode != "none" and isinstance(obj.get("subjects"), list):
            obj = _subjects(obj, mode, setter)
        v1 = obj.get("apiVersion") == "v1"
        for fs in specs:
            if fs.path == _META_NAMESPACE or (fs.path == _META_NAME and not v1):
                continue
            if binding and fs.kind in _BINDINGS and fs.path == _SUBJECTS_NAMESPACE:
                continue
            if fs.applies_to(cur):
                obj = update_path(obj, fs.path, fs.create, setter, keep=fs.keep)
        return r if obj is r.obj else r.with_obj(obj)

    acc.res = b.each(b.fingerprint(kust, "namespace", specs, unset_only, mode), acc.res, fn)


def _subjects(obj: dict[str, Any], mode: str, setter: Callable[[Any], Any]) -> dict[str, Any]:
    out = []
    for s in obj["subjects"]:
        picked = isinstance(s, dict) and (
            s.get("name") == "default" if mode == "defaultOnly" else s.get("kind") == "ServiceAccount"
        )
        if picked:
            new = setter(s.get("namespace", MISSING))
            if new is not MISSING:
                s = {**s, "namespace": new}
        out.append(s)
    return obj if out == obj["subjects"] else {**obj, "subjects": out}
