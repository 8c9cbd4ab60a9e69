"""Docstrings, comments and docs name only modules and files that exist.

Covers: every file or module of this repository named in a docstring or comment of
the package, the tests, the benchmarks and the scripts, or anywhere in the docs
(README.md, docs/, examples/*.md, the systemd unit, the Makefile, pyproject.toml)
exists; the rule finds each kind of stale name (a module moved into a package, a
path, a dotted module name, a name defined nowhere) and leaves alone the files of
other projects and of the user's repository.

The rule. A name is checked when it is
- a file name ending in ``.py`` (``hypervisor.py``, ``render/xml.py``): it must
  resolve as a path from the repository root, from ``reconciler/`` or ``tests/``, or
  from the directory of the file naming it, or, given without a directory, be the name
  of a file of the repository;
- a path ending in ``.md``, ``.toml``, ``.yaml``, ``.yml`` or ``.json`` that starts
  at a top-level directory of the repository (``docs/mapping.md``,
  ``examples/host-config.yaml``), or a bare ``.md``/``.toml`` name (``README.md``): it
  must resolve the same way;
- a dotted name starting ``reconciler.`` or ``tests.`` (``reconciler.host.connection``,
  ``reconciler.context.Clock``): its longest module prefix must exist, and a name
  after it must be defined at the top of that module.
Other ``.yaml``/``.json`` names (``kustomization.yaml``, ``state.json``) are files of
the user's repository or of the state directory, not of this one. ``ELSEWHERE`` lists
the few names of files kept outside the repository and names that only look like
modules, each with its reason; ``PLANNED`` the modules an accepted design names before
they exist (the test fails once one exists, so its entry goes).
"""

from __future__ import annotations

import ast
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Names our text gives on purpose that are no file or module of this repository.
ELSEWHERE = {
    "kubevirt-semantics.md": "the expansion spec the expand stage follows, kept with the "
    "project's design brief outside the repository (spec/)",
    "reconciler.kubevirt.io": "the API group of our annotations and of the mark's XML "
    "namespace, not a module",
}
# Modules design 0001 names before the step that creates them lands.
PLANNED: dict[str, str] = {}

FILE = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.(?:py|md|toml|yaml|yml|json))(?![\w/-])")
DOTTED = re.compile(r"(?<![\w./-])((?:reconciler|tests)(?:\.\w+)+)")


@cache
def tracked() -> tuple[str, ...]:
    """The repository's files: tracked, or new and not ignored."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return tuple(p for p in out.stdout.splitlines() if (ROOT / p).exists())


@cache
def basenames() -> frozenset[str]:
    return frozenset(p.rsplit("/", 1)[-1] for p in tracked())


@cache
def top_dirs() -> frozenset[str]:
    return frozenset(p.split("/", 1)[0] for p in tracked() if "/" in p)


def file_exists(name: str, where: Path) -> bool:
    candidates = [ROOT / name, ROOT / "reconciler" / name, ROOT / "tests" / name, where.parent / name]
    if any(c.exists() for c in candidates):
        return True
    return "/" not in name and name in basenames()


def checked(name: str) -> bool:
    """Whether ``name`` (a match of FILE) is a name of this repository's files."""
    suffix = name.rsplit(".", 1)[-1]
    if suffix == "py":
        return True
    if "/" in name:
        return name.split("/", 1)[0] in top_dirs()
    return suffix in ("md", "toml")


@cache
def top_level_names(module: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If):  # TYPE_CHECKING blocks
            for sub in node.body:
                if isinstance(sub, ast.Import | ast.ImportFrom):
                    names.update((a.asname or a.name).split(".")[0] for a in sub.names)
    return frozenset(names)


def dotted_exists(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:i])
        module = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if module.is_file():
            return i == len(parts) or parts[i] in top_level_names(module) or (base / parts[i]).exists()
    return False


def stale_in(text: str, where: Path) -> list[str]:
    """The names in ``text`` (a docstring, a comment, a doc) that name nothing here."""
    stale = []
    for m in FILE.finditer(text):
        name = m.group(1).lstrip("./")
        if name in ELSEWHERE or name in PLANNED or not checked(name):
            continue
        if not file_exists(name, where):
            stale.append(name)
    for m in DOTTED.finditer(text):
        name = m.group(1).rstrip(".")
        if name.rsplit(".", 1)[-1] in ("py", "md", "toml", "yaml", "yml", "json"):
            continue  # a file name (checked above)
        if name in ELSEWHERE or name in PLANNED:
            continue
        if not dotted_exists(name):
            stale.append(name)
    return stale


COMMENT = re.compile(r"^\s*#(.*)$|\s#\s(.*)$", re.M)  # a comment line, or a trailing "  # ..."


def prose_of_python(source: str) -> list[str]:
    """Docstrings and comments of a Python source (its other strings are data)."""
    texts = [m.group(1) or m.group(2) or "" for m in COMMENT.finditer(source)]
    todo: list[ast.AST] = [ast.parse(source)]
    while todo:
        node = todo.pop()
        doc = ast.get_docstring(node, clean=False)  # type: ignore[arg-type]
        if doc:
            texts.append(doc)
        todo.extend(
            n
            for n in getattr(node, "body", ())
            if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        )
    return texts


def is_python(path: Path) -> bool:
    """A module, or a script whose first line runs Python."""
    if path.suffix == ".py":
        return True
    if path.suffix:
        return False
    with path.open("rb") as f:
        first = f.readline()
    return first.startswith(b"#!") and b"python" in first


CODE = ("reconciler", "tests", "bench", "scripts")  # their prose is in docstrings and comments
DOCS = ("README.md", "Makefile", "pyproject.toml")


def sources() -> list[Path]:
    """Every file whose prose is checked: modules and scripts, and the docs."""
    out = []
    for rel in tracked():
        top = rel.split("/", 1)[0]
        if rel.startswith("tests/data/"):
            continue  # fixtures: other projects' files and the user's repositories
        code = top in CODE and (rel.endswith(".py") or "." not in rel.rsplit("/", 1)[-1])
        doc = rel in DOCS or top == "systemd" or (top in ("docs", "examples") and rel.endswith(".md"))
        if code or doc:
            out.append(ROOT / rel)
    return out


@cache
def texts_of(path: Path) -> tuple[str, ...]:
    """The prose of one file: docstrings and comments of Python, comments of a shell
    script, all of a doc."""
    source = path.read_text()
    if is_python(path):
        return tuple(prose_of_python(source))
    if path.parts[len(ROOT.parts)] in CODE:
        return tuple(line for line in source.splitlines() if line.lstrip().startswith("#"))
    return (source,)


def test_every_named_module_and_file_exists() -> None:
    found = {}
    for path in sources():
        stale = sorted({n for text in texts_of(path) for n in stale_in(text, path)})
        if stale:
            found[str(path.relative_to(ROOT))] = stale
    assert found == {}, "names of modules or files that do not exist"


def test_the_places_checked() -> None:
    checked_files = {str(p.relative_to(ROOT)) for p in sources()}
    for expected in (
        "README.md",
        "docs/architecture.md",
        "systemd/reconciler.service",
        "Makefile",
        "pyproject.toml",
        "reconciler/daemon/service.py",
        "tests/conftest.py",
        "bench/plan",
        "scripts/setup",
    ):
        assert expected in checked_files
    assert not any(f.startswith("tests/data/") for f in checked_files)


@pytest.mark.parametrize(
    ("text", "stale"),
    [
        ("Under faults (see health.py, state_store.py, rollback.py)", ["state_store.py"]),
        ("the renderer's placement (reconciler/placement.py)", ["reconciler/placement.py"]),
        ("its hooks in plan.py and ownership.py", ["plan.py", "ownership.py"]),
        ("the JSON of the plan (docs/plan-json.md)", ["docs/plan-json.md"]),
        ("``reconciler.daemon.settings`` reads the file", ["reconciler.daemon.settings"]),
        ("``reconciler.context.Timer``", ["reconciler.context.Timer"]),
        ("run ``python -m tests.integration.sweep``", ["tests.integration.sweep"]),
    ],
)
def test_each_kind_of_stale_name_is_found(text: str, stale: list[str]) -> None:
    assert stale_in(text, ROOT / "reconciler" / "daemon" / "service.py") == stale


@pytest.mark.parametrize(
    "text",
    [
        "render/xml.py orders the elements; hypervisor.py translates errors",  # from reconciler/
        "``reconciler.context.Clock`` and ``reconciler.host.connection``",
        "a kustomization.yaml, vms/web.yaml and state.json of the user",  # not files of ours
        "docs/mapping.md and README.md; the tests in tests/unit/test_plan.py",
        "transformers/labels.py of this package",  # from the directory of the file naming it
        "``reconciler.kubevirt.io/adopt``, see kubevirt-semantics.md",  # ELSEWHERE
    ],
)
def test_names_that_exist_or_are_not_ours_pass(text: str) -> None:
    assert stale_in(text, ROOT / "reconciler" / "overlays" / "engine.py") == []


def test_the_exceptions_are_still_needed() -> None:
    """An ELSEWHERE name is still given somewhere and still names nothing here; a
    PLANNED module does not exist yet (once it does, its entry goes)."""
    prose = " ".join(text for path in sources() for text in texts_of(path))
    for name in ELSEWHERE:
        assert name in prose, f"{name}: no longer named anywhere"
        assert not file_exists(name, ROOT), f"{name}: exists here"
        assert not dotted_exists(name), f"{name}: exists here"
    for name in PLANNED:
        exists = dotted_exists(name) if name.startswith("reconciler.") else file_exists(name, ROOT)
        assert not exists, f"{name} exists now: remove it from PLANNED"
