"""End-to-end expansion cases under tests/data/expand/<case>/ (Stage E, kubevirt-semantics §0.3).

Covers: each case's ``input.yaml`` expanded through catalog + expand_vm, compared with
``expected.yaml`` (template spec, annotations, labels) after the vector comparison rules
(empty values dropped, quantities by value), or rejected with every line of
``expected-error.txt`` in the message. Also: expansion of the case is idempotent and
leaves its input untouched.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.catalog import build_catalog
from reconciler.errors import ManifestError
from reconciler.expand import expand_vm
from reconciler.manifests import parse_documents
from reconciler.model import Manifest, units

CASES = Path(__file__).parent.parent / "data" / "expand"
EMPTY_MAP_ABSENT = {"resources", "devices", "features", "acpi", "firmware", "bootloader", "clock", "metadata"}


def _quantity_path(path: tuple[Any, ...]) -> bool:
    return (
        (len(path) >= 2 and path[-2] == "memory" and path[-1] in ("guest", "maxGuest"))
        or (len(path) >= 3 and path[-3] == "resources" and path[-2] in ("requests", "limits"))
        or (len(path) >= 2 and path[-2] == "emptyDisk" and path[-1] == "capacity")
    )


def normalized(x: Any, path: tuple[Any, ...] = ()) -> Any:
    """The comparison rules of the shared expansion vectors (README there)."""
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            v = normalized(v, (*path, k))
            if v is None or v == "" or v == [] or (v == {} and k in EMPTY_MAP_ABSENT):
                continue
            out[k] = v
        return out
    if isinstance(x, list):
        return [normalized(v, (*path, i)) for i, v in enumerate(x)]
    if _quantity_path(path) and units.is_quantity(x):
        return Fraction(units.quantity_value(x))
    return x


def load_case(name: str) -> tuple[list[Manifest], Manifest]:
    data = (CASES / name / "input.yaml").read_bytes()
    docs = list(parse_documents(data, f"{name}/input.yaml"))
    vms = [d for d in docs if d.kind == "VirtualMachine"]
    assert len(vms) == 1
    return docs, vms[0]


def comparable(vm: dict[str, Any]) -> dict[str, Any]:
    template = vm["spec"]["template"]
    got: dict[str, Any] = {"spec": normalized(template.get("spec") or {})}
    meta = {k: v for k, v in (template.get("metadata") or {}).items() if k in ("annotations", "labels") and v}
    if meta:
        got["metadata"] = meta
    return got


def expected_of(name: str) -> dict[str, Any]:
    expected = yaml.safe_load((CASES / name / "expected.yaml").read_text())
    want: dict[str, Any] = {"spec": normalized(expected.get("spec") or {})}
    if expected.get("metadata"):
        want["metadata"] = expected["metadata"]
    return want


SUCCESS = sorted(p.name for p in CASES.iterdir() if (p / "expected.yaml").exists())
FAILURE = sorted(p.name for p in CASES.iterdir() if (p / "expected-error.txt").exists())


def test_cases_exist() -> None:
    assert len(SUCCESS) >= 5
    assert len(FAILURE) >= 5


@pytest.mark.parametrize("name", SUCCESS)
def test_expands_like_kubevirt(name: str) -> None:
    docs, vm = load_case(name)
    before = copy.deepcopy([d.obj for d in docs])
    catalog = build_catalog(docs)
    result = expand_vm(vm, catalog)
    assert comparable(result.vm) == expected_of(name)
    assert [d.obj for d in docs] == before, "expansion mutated its input"
    assert "instancetype" not in result.vm["spec"]
    assert "preference" not in result.vm["spec"]


@pytest.mark.parametrize("name", SUCCESS)
def test_expanding_twice_changes_nothing(name: str) -> None:
    docs, vm = load_case(name)
    once = expand_vm(vm, build_catalog(docs)).vm
    again_docs = [Manifest(once, vm.path, vm.line) if d is vm else d for d in docs]
    twice = expand_vm(again_docs[docs.index(vm)], build_catalog(again_docs)).vm
    assert twice == once


@pytest.mark.parametrize("name", FAILURE)
def test_rejects_with_kubevirt_message(name: str) -> None:
    docs, vm = load_case(name)
    with pytest.raises(ManifestError) as info:
        expand_vm(vm, build_catalog(docs))
    message = str(info.value)
    for line in (CASES / name / "expected-error.txt").read_text().splitlines():
        if line.strip():
            assert line.strip() in message
    assert message.startswith(f"{name}/input.yaml:"), "errors name the file and line"
