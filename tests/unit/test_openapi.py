"""KubeVirt's published OpenAPI schema, read strictly, for every KubeVirt object.

Covers: an unknown field at any level (``spec.runStrategyy``, ``metadata``, deep in the
template, in an instancetype) is an error at its file:line naming the closest known
field; a value of the wrong type is an error; ``null`` counts as absent (as in a
``kubectl get -o yaml`` export); a field only KubeVirt requires is a warning saying
so; the design notes' ``spec.restartPolicy`` is read; the example repository and the
pinned common-instancetypes objects are valid for KubeVirt itself; the schema is the
pinned file with its license.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import overlays
from reconciler.catalog import Catalog, build_catalog
from reconciler.catalog import schema as openapi
from reconciler.errors import ManifestError
from reconciler.manifests import parse_documents
from reconciler.overlays.cache import OverlayCache
from reconciler.source.files import DirView
from reconciler.wording.problems import words

ROOT = Path(__file__).resolve().parents[2]
VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  runStrategy: Always
  template:
    metadata:
      creationTimestamp: null
    spec:
      domain:
        cpu:
          cores: 2
        devices: {}
        memory:
          guest: 1Gi
"""


def catalog(text: str) -> Catalog:
    return build_catalog(parse_documents(text.encode(), "vms/web.yaml"), lambda _p: text.encode())


@pytest.mark.parametrize(
    ("old", "new", "message", "line"),
    [
        (
            "runStrategy: Always",
            "runStrategyy: Always",
            "spec.runStrategyy: unknown field 'runStrategyy'; did you mean runStrategy?",
            6,
        ),
        (
            "  name: web",
            "  name: web\n  labelz: {a: b}",
            "metadata.labelz: unknown field 'labelz'; did you mean labels?",
            5,
        ),
        (
            "cores: 2",
            "coress: 2",
            "spec.template.spec.domain.cpu.coress: unknown field 'coress'; did you mean cores?",
            13,
        ),
        (
            "cores: 2",
            "cores: '2'",
            "spec.template.spec.domain.cpu.cores: expected an integer, got a string",
            13,
        ),
        (
            "guest: 1Gi",
            "guest: [1Gi]",
            "memory.guest: expected a string or an integer or a number, got a list",
            16,
        ),
    ],
)
def test_unknown_and_mistyped_fields_are_errors_at_their_line(
    old: str, new: str, message: str, line: int
) -> None:
    with pytest.raises(ManifestError) as err:
        catalog(VM.replace(old, new))
    assert message in str(err.value)
    assert (err.value.path, err.value.line) == ("vms/web.yaml", line)


def test_null_is_absent_and_restart_policy_is_read() -> None:
    assert catalog(VM).warnings == ()
    with_policy = VM.replace("runStrategy: Always", "restartPolicy: OnFailure")
    assert catalog(with_policy).warnings == ()


def test_a_field_only_kubevirt_requires_is_a_warning() -> None:
    (warning,) = map(words, catalog(VM.replace("        devices: {}\n", "")).warnings)
    assert warning == (
        "vms/web.yaml:1: VirtualMachine web: spec.template.spec.domain.devices: "
        "KubeVirt requires this field (the API server would refuse the object)"
    )


@pytest.mark.parametrize("entry", ["overlays/dev", "overlays/prod"])
def test_the_example_repository_is_valid_for_kubevirt(entry: str) -> None:
    docs = overlays.build(DirView(ROOT / "examples" / "repo"), entry, cache=OverlayCache())
    problems = [(m.kind, m.name, openapi.problems(m.kind, m.obj)) for m in docs]
    assert [p for p in problems if p[2]] == []
    assert {m.kind for m in docs} >= {"VirtualMachine", "VirtualMachineClusterInstancetype"}


def test_the_catalog_objects_are_valid_for_kubevirt() -> None:
    tree = DirView(ROOT / "tests" / "data" / "common-instancetypes")
    for entry in ("VirtualMachineClusterInstancetypes", "VirtualMachineClusterPreferences"):
        for m in overlays.build(tree, entry, cache=OverlayCache()):
            assert openapi.problems(m.kind, m.obj) == [], m.name


def test_the_schema_is_the_pinned_one() -> None:
    data = ROOT / "reconciler" / "data" / "kubevirt"
    assert "Apache License" in (data / "LICENSE").read_text()
    assert "kubevirt/kubevirt api/openapi-spec/swagger.json, commit" in (data / "SOURCE.txt").read_text()
    assert (
        openapi.problems("ConfigMap", {"anything": 1}) == []
    )  # kinds KubeVirt does not serve: not ours to check


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


EXAMPLES = sorted((ROOT / "tests" / "data" / "kubevirt-examples").glob("vm-*.yaml"))
SAMPLES = [
    m.obj for p in EXAMPLES for m in parse_documents(p.read_bytes(), p.name) if m.kind == "VirtualMachine"
]
ODD_VALUES = [None, 0, 1.5, True, "x", [], {}, [1], {"a": 1}, "2Gi"]
VALIDATORS = openapi.Validators()  # made once for the examples below


@settings(max_examples=400, deadline=None)
@given(
    sample=st.sampled_from(SAMPLES),
    where=st.integers(min_value=0, max_value=10_000),
    edit=st.sampled_from(["value", "unknown", "drop"]),
    value=st.sampled_from(ODD_VALUES),
)
def test_the_first_pass_and_jsonschema_agree(
    sample: dict[str, Any], where: int, edit: str, value: Any
) -> None:
    """The fast check answers "clean" exactly when jsonschema finds nothing."""
    obj = copy.deepcopy(sample)
    paths = _paths(obj)
    path = paths[where % len(paths)]
    parent: Any = obj
    for part in path[:-1]:
        parent = parent[part]
    if path and edit == "value":
        parent[path[-1]] = value
    elif edit == "unknown":
        target = parent[path[-1]] if path else obj
        if isinstance(target, dict):
            target["zzUnknown"] = value
    elif path and edit == "drop" and isinstance(parent, dict):
        del parent[path[-1]]
    slow = list(VALIDATORS("VirtualMachine").iter_errors(obj))
    assert openapi._clean("VirtualMachine")(obj) == (not slow), [e.message for e in slow]


class _Doc(dict[str, Any]):
    """A mapping that can be watched with a weak reference."""


def test_checked_documents_are_released_after_two_catalogs() -> None:
    import weakref

    from reconciler.catalog import CatalogCache, build_catalog
    from reconciler.model import Manifest

    doc = Manifest(
        _Doc(
            apiVersion="kubevirt.io/v1", kind="VirtualMachine", metadata={"name": "a"}, spec={"template": {}}
        ),
        "a.yaml",
    )
    gone = weakref.ref(doc.obj)
    cache = CatalogCache()
    build_catalog([doc], cache=cache)
    build_catalog([doc], cache=cache)
    assert (cache.docs.hits, cache.docs.misses) == (1, 1)  # checked once, then found
    del doc
    build_catalog([], cache=cache)
    assert gone() is not None  # the previous catalog used it: kept
    build_catalog([], cache=cache)
    assert gone() is None


def test_documents_facts_are_kept_once_and_shared_when_plain() -> None:
    """One entry per document (its size, its check, its facts); equal facts made of
    strings and tuples are held once for every document; others each as derived."""
    from reconciler.catalog import CatalogCache, build_catalog
    from reconciler.model import Manifest

    docs = [
        Manifest(
            {
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachine",
                "metadata": {"name": n},
                "spec": {"template": {}},
            },
            "a.yaml",
        )
        for n in ("a", "b")
    ]
    cache = CatalogCache()
    catalog = build_catalog(docs, cache=cache)
    assert len(cache.docs) == 2
    calls: list[str] = []

    def derive(obj: dict[str, Any]) -> tuple[tuple[str, ...], tuple[()]]:
        calls.append(obj["metadata"]["name"])
        return ("x",), ()

    first, second = (catalog.fact(m, "t", derive) for m in docs)
    assert first == second == (("x",), ())
    assert first is second  # held once
    assert catalog.fact(docs[0], "t", derive) is first  # found: not derived again
    assert calls == ["a", "b"]
    typed = [
        catalog.fact(m, "n", lambda obj: (True,) if obj["metadata"]["name"] == "a" else (1,)) for m in docs
    ]
    assert typed == [(True,), (1,)]
    assert typed[0][0] is True  # not shared with an equal value of another type


def test_the_schema_kinds_reach_no_recursive_definition() -> None:
    """The first pass compiles each definition once and shares it (``openapi._checks``):
    exact only while no definition a kind reaches refers back to itself."""
    defs = openapi._definitions()

    def walk(node: Any, stack: tuple[str, ...]) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                name = ref.rsplit("/", 1)[-1]
                assert name not in stack, f"{name} refers to itself through {stack}"
                walk(defs[name], (*stack, name))
                return
            for value in node.values():
                walk(value, stack)
        elif isinstance(node, list):
            for value in node:
                walk(value, stack)

    for name in openapi.DEFINITIONS.values():
        walk({"$ref": f"#/definitions/{name}"}, ())
