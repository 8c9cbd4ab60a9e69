"""The JSON Schemas shipped with the package (``reconciler/data/schemas``), as tests use them.

Input: a document and the name of its schema (``plan``, ``diff``, ...). Output: nothing,
or an assertion naming where the document breaks its schema. Reads the package's data
files only.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
from referencing import Registry, Resource

BASE = "https://reconciler.kubevirt.io/schemas/"


@cache
def _schemas() -> dict[str, dict[str, Any]]:
    folder = resources.files("reconciler").joinpath("data/schemas")
    out: dict[str, dict[str, Any]] = {}
    for f in folder.iterdir():
        if f.name.endswith(".schema.json"):
            out[f.name.removesuffix(".schema.json")] = json.loads(f.read_text())
    return out


def names() -> list[str]:
    """The schemas shipped, by name."""
    return sorted(_schemas())


def schema(name: str) -> dict[str, Any]:
    return _schemas()[name]


@cache
def _registry() -> Registry[Any]:
    resources_ = [(s["$id"], Resource.from_contents(s)) for s in _schemas().values()]
    return Registry().with_resources(resources_)


def check(doc: object, name: str) -> None:
    """``doc``, as JSON writes it (a tuple is an array), follows the shipped schema ``name``
    (every error is listed)."""
    validator = jsonschema.Draft202012Validator(schema(name), registry=_registry())
    written = json.loads(json.dumps(doc))
    errors = sorted(validator.iter_errors(written), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors[:20]
    )
