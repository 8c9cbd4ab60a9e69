"""The definitions the catalog reads are derived from KubeVirt's pinned schema, exactly.

Covers: ``reconciler/data/kubevirt/definitions.json`` is byte for byte what
``schema_data.derive`` makes of the pinned ``swagger.json`` (a pin moved without running
``scripts/derive-kubevirt-definitions`` fails here); what ``derive`` keeps and drops (every
definition a kind reaches, nothing else, text descriptions only); the script's check.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from reconciler.catalog import schema_data

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "reconciler" / "data" / "kubevirt"


def _pinned() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "swagger.json").read_bytes())
    return data


def test_the_derived_file_is_what_the_pinned_schema_makes() -> None:
    derived = schema_data.derive(_pinned(), schema_data.DEFINITIONS.values())
    assert (DATA / "definitions.json").read_bytes() == schema_data.encode(derived)
    assert schema_data.read() == derived
    assert "Apache License" in (DATA / "LICENSE").read_text()
    assert "definitions.json" in (DATA / "SOURCE.txt").read_text()


def test_derive_keeps_the_reached_definitions_without_their_text() -> None:
    swagger = {
        "definitions": {
            "a": {"description": "A.", "properties": {"b": {"$ref": "#/definitions/b", "description": "x"}}},
            "b": {"type": "object", "properties": {"description": {"type": "string"}}},
            "c": {"items": [{"$ref": "#/definitions/d"}]},
            "d": {"type": "string"},
            "unused": {"type": "string"},
        }
    }
    assert schema_data.derive(swagger, ["c", "a"]) == {
        "a": {"properties": {"b": {"$ref": "#/definitions/b"}}},
        "b": {"type": "object", "properties": {"description": {"type": "string"}}},
        "c": {"items": [{"$ref": "#/definitions/d"}]},
        "d": {"type": "string"},
    }
    pinned = _pinned()["definitions"]
    derived = schema_data.read()
    assert set(schema_data.DEFINITIONS.values()) <= set(derived) < set(pinned)
    assert list(derived) == [name for name in pinned if name in derived]  # the schema's order


def test_the_script_checks_the_file() -> None:
    script = ROOT / "scripts" / "derive-kubevirt-definitions"
    done = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout) == (0, "reconciler/data/kubevirt/definitions.json: up to date\n")
