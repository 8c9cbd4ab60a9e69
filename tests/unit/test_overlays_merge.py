"""Strategic merge invariants and build determinism (property tests).

Covers: an empty patch leaves an object unchanged; merging never modifies its inputs
(also when it refuses a patch whose map meets a scalar or a list); applying the same map-only patch twice
equals applying it once; lists are replaced whole without a schema and merged by key
with one (patch elements first); a build gives the same documents on a cold and a warm
cache, for generated fleets.
"""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import manifests, overlays
from reconciler.overlays.cache import OverlayCache
from reconciler.overlays.merge import MergeError, Schema, strategic_merge

keys = st.sampled_from(["a", "b", "c", "name", "spec", "labels"])
scalars = st.one_of(st.integers(-5, 5), st.text(max_size=4), st.booleans())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=12,
)
objects = st.dictionaries(keys, values, max_size=5)
map_patches = st.recursive(
    st.one_of(scalars, st.none()),
    lambda inner: st.dictionaries(keys, inner, max_size=3),
    max_leaves=10,
).filter(lambda p: isinstance(p, dict))


@settings(max_examples=200, deadline=None)
@given(objects)
def test_empty_patch_is_identity(obj: dict[str, object]) -> None:
    assert strategic_merge(obj, {}, None, None) == obj


@settings(max_examples=200, deadline=None)
@given(objects, map_patches)
def test_merge_leaves_inputs_alone_and_is_idempotent(
    obj: dict[str, object], patch: dict[str, object]
) -> None:
    before_obj, before_patch = copy.deepcopy(obj), copy.deepcopy(patch)
    try:
        once = strategic_merge(obj, patch, None, None)
    except MergeError:  # a map where the target has a scalar or list (kustomize refuses too)
        assert obj == before_obj
        assert patch == before_patch
        return
    assert obj == before_obj
    assert patch == before_patch
    assert strategic_merge(once, patch, None, None) == once


def test_lists_replaced_without_schema_merged_by_key_with_one() -> None:
    target = {"spec": {"disks": [{"name": "root", "bus": "virtio"}, {"name": "cache", "bus": "virtio"}]}}
    patch = {"spec": {"disks": [{"name": "data"}, {"name": "cache", "bus": "scsi"}]}}
    assert strategic_merge(target, patch, None, None) == patch
    schema = Schema(
        {
            "definitions": {
                "VM": {
                    "x-kubernetes-group-version-kind": [{"group": "g", "version": "v", "kind": "VM"}],
                    "properties": {"spec": {"$ref": "#/definitions/Spec"}},
                },
                "Spec": {
                    "properties": {
                        "disks": {
                            "type": "array",
                            "items": {"type": "object"},
                            "x-kubernetes-patch-merge-key": "name",
                            "x-kubernetes-patch-strategy": "merge",
                        }
                    }
                },
            }
        }
    )
    merged = strategic_merge(target, patch, schema, schema.for_type("g", "v", "VM"))
    assert merged["spec"]["disks"] == [
        {"name": "data"},
        {"name": "cache", "bus": "scsi"},
        {"name": "root", "bus": "virtio"},
    ]
    deleted = strategic_merge(
        target,
        {"spec": {"disks": [{"name": "root", "$patch": "delete"}]}},
        schema,
        schema.for_type("g", "v", "VM"),
    )
    assert deleted["spec"]["disks"] == [{"name": "cache", "bus": "virtio"}]


class _View:
    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def read(self, path: str) -> bytes:
        return self.files[path].encode()

    def exists(self, path: str) -> bool:
        return path in self.files or self.is_dir(path)

    def is_dir(self, path: str) -> bool:
        return path == "" or any(k.startswith(path + "/") for k in self.files)

    def listdir(self, path: str) -> list[str]:
        prefix = path + "/" if path else ""
        return sorted({k[len(prefix) :].split("/")[0] for k in self.files if k.startswith(prefix)})

    def blob_id(self, path: str) -> str | None:
        return f"{path}:{self.files[path]}" if path in self.files else None


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True), min_size=1, max_size=6, unique=True),
    st.sampled_from(["", "p-"]),
    st.sampled_from(["", "ns1"]),
    st.dictionaries(st.sampled_from(["env", "team"]), st.sampled_from(["a", "b"]), max_size=2),
)
def test_build_is_deterministic_cold_and_warm(
    names: list[str], prefix: str, ns: str, labels: dict[str, str]
) -> None:
    files = {
        f"base/{n}.yaml": f"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: {n}\nspec:\n  running: true\n"
        for n in names
    }
    files["base/kustomization.yaml"] = "resources:\n" + "".join(f"- {n}.yaml\n" for n in reversed(names))
    over = "resources:\n- ../base\nconfigMapGenerator:\n- name: cfg\n  literals:\n  - A=1\n"
    if prefix:
        over += f"namePrefix: {prefix}\n"
    if ns:
        over += f"namespace: {ns}\n"
    if labels:
        over += "commonLabels:\n" + "".join(f"  {k}: {v}\n" for k, v in labels.items())
    files["over/kustomization.yaml"] = over
    cache = OverlayCache()
    texts = [
        manifests.dump_documents(m.obj for m in overlays.build(_View(files), "over", cache=c))
        for c in (cache, cache, OverlayCache())
    ]
    assert texts[0] == texts[1] == texts[2]
    built = overlays.build(_View(files), "over", cache=cache)
    assert [m.name for m in built][1:] == sorted(prefix + n for n in names)
