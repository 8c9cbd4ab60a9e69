"""No function of ``reconciler`` is over 60 lines, but argument tables.

Covers: every function and method under ``reconciler/`` (nested ones too, each counted
whole, from its first decorator to its last line, as ``ast`` places them) has at most
``LIMIT`` lines, unless it is an argument table (``TABLES``: the subcommands' argparse
arguments, one entry after another, nothing to split). A table back within the limit,
or gone, fails until it is removed from ``TABLES``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reconciler"
LIMIT = 60

# Argument tables: (module, function) -> why a long one is right.
TABLES: dict[tuple[str, str], str] = {
    ("reconciler/cli/host_args.py", "add_host_commands"): "argparse arguments of plan, apply, run, status...",
    ("reconciler/cli/repo_args.py", "add_repo_commands"): "argparse arguments of build, validate, diff...",
}


def functions(source: str) -> list[tuple[str, int]]:
    """(name, lines) of every function of ``source``, nested ones too."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            out.append((node.name, (node.end_lineno or node.lineno) - first + 1))
    return out


def long_functions() -> dict[tuple[str, str], int]:
    """(module, function) -> lines of each function over ``LIMIT`` (the longest of a name)."""
    found: dict[tuple[str, str], int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        module = path.relative_to(ROOT).as_posix()
        for name, lines in functions(path.read_text(encoding="utf-8")):
            if lines > LIMIT:
                found[(module, name)] = max(lines, found.get((module, name), 0))
    return found


def test_no_function_is_over_60_lines_but_argument_tables() -> None:
    too_long = {
        f"{module}: {name}": f"{lines} lines, at most {LIMIT}"
        for (module, name), lines in long_functions().items()
        if (module, name) not in TABLES
    }
    assert too_long == {}, "functions too long: split them into functions that name what they do"


def test_each_argument_table_is_still_long() -> None:
    found = long_functions()
    for key, why in TABLES.items():
        assert key in found, (
            f"{key[0]}: {key[1]} is within {LIMIT} lines now (or gone): remove it from TABLES"
        )
        assert why


@pytest.mark.parametrize(
    ("source", "counted"),
    [
        ("def f():\n    return 1\n", [("f", 2)]),
        ("@dec\n@dec2\ndef f():\n    pass\n", [("f", 4)]),
        ("class C:\n    def m(self):\n        def inner():\n            pass\n        return 1\n",
         [("m", 4), ("inner", 2)]),
        ("async def g():\n    '''doc'''\n\n    return 1\n", [("g", 4)]),
    ],
)  # fmt: skip
def test_lines_of_a_function_run_from_its_first_decorator_to_its_last_line(
    source: str, counted: list[tuple[str, int]]
) -> None:
    assert functions(source) == counted
