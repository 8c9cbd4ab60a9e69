"""Test modules share code only through tests/helpers/.

Covers: no module under tests/ (test modules, conftest files, the helpers themselves)
imports a test module or a conftest, at any depth of the file (inside functions and
type-checking blocks too) and by no relative import; the rule itself catches each kind
of breach.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


def foreign_imports(source: str) -> list[str]:
    """The imports of test code other than ``tests.helpers`` in one module's source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append(f"from {'.' * node.level}{node.module or ''} import ...")
                continue
            names = [node.module or ""]
            if node.module == "tests":
                names = [f"tests.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if (name == "tests" or name.startswith("tests.")) and not (
                name == "tests.helpers" or name.startswith("tests.helpers.")
            ):
                found.append(name)
    return found


def test_no_test_module_imports_another() -> None:
    modules = [p for p in TESTS.rglob("*.py") if "data" not in p.relative_to(TESTS).parts]
    assert len(modules) > 100
    breaches = {str(p.relative_to(TESTS)): bad for p in modules if (bad := foreign_imports(p.read_text()))}
    assert breaches == {}, "move what is shared into tests/helpers/"


@pytest.mark.parametrize(
    "source",
    [
        "from tests.unit.test_status import row\n",
        "from tests.conftest import GitRepo\n",
        "import tests.libvirt.test_daemon\n",
        "from tests import conftest\n",
        "from .test_overlays import VM\n",
        "def f():\n    from tests.integration.test_apply_qemu import URI\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tests.faults.conftest import URI\n",
    ],
)
def test_each_kind_of_breach_is_caught(source: str) -> None:
    assert foreign_imports(source)


def test_the_helpers_are_allowed() -> None:
    assert foreign_imports("from tests.helpers.git import GitRepo\nfrom tests import helpers\n") == []
