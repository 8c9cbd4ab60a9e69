"""namespace: set the namespace of every namespaced object (and RoleBinding subjects)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.overlays.kustomization import STR, frozen_spec
from reconciler.overlays.resource import MISSING, Res, is_cluster_scoped, update_path

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.overlays.kustomization import Acc, Kust
    from reconciler.overlays.patching import Patching

FIELDS = ("namespace",)  # the kustomization fields this transformer reads
SHAPES: Mapping[str, Any] = frozen_spec({})  # the keys each may hold (kustomize reads strictly)
TYPES: Mapping[str, Any] = frozen_spec({"namespace": STR})  # where a YAML 1.1 boolean or number is an error


def run(b: Patching, kust: Kust, acc: Acc) -> None:
    ns = kust.str_field("namespace")
    if not ns:
        return
    specs = acc.config.namespace

    def fn(r: Res) -> Res | None:
        cur = r.cur
        obj = r.obj
        for fs in specs:
            if not fs.applies_to(cur):
                continue
            if fs.path == ("metadata", "namespace") and is_cluster_scoped(cur.group, cur.kind):
                continue
            obj = update_path(obj, fs.path, fs.create, lambda old: MISSING if old == ns else ns)
        if cur.kind in ("RoleBinding", "ClusterRoleBinding") and isinstance(obj.get("subjects"), list):
            subjects = [
                {**s, "namespace": ns} if isinstance(s, dict) and s.get("namespace") == "default" else s
                for s in obj["subjects"]
            ]
            if subjects != obj["subjects"]:
                obj = {**obj, "subjects": subjects}
        return r if obj is r.obj else r.with_obj(obj)

    acc.res = b.each(b.fingerprint(kust, "namespace", specs), acc.res, fn)
