"""The import contracts of pyproject.toml hold, and they catch an arrow pointing back.

Covers: ``lint-imports`` keeps every contract on the package as it is; a copy of the
package where ``reconciler/model/__init__.py`` imports the daemon breaks the layers and the
foundation contracts, naming the offending chain, and so does an import of ``wording``
made for annotations alone (``TYPE_CHECKING``); a PR diff importing the host breaks
its contract; inside a package, an arrow pointing back (``render/xml.py`` importing a
per-area module) and a module no layer names break that package's contract; a
third-party library imported outside its room (deepdiff outside ``compare.changes``)
and git reached from a pure stage break theirs; every module and package of
``reconciler`` sits in a layer; no contract ignores an import of one module of
``reconciler`` by another (a cycle hidden from the layers); and no two modules import
each other, in packages no contract layers too (but those of ``KNOWN_CYCLES``, shrink-only).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

PROJECT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_package_keeps_every_contract() -> None:
    proc = lint(PROJECT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_an_arrow_pointing_back_breaks_the_contracts(tmp_path: Path) -> None:
    shutil.copytree(
        PROJECT / "reconciler", tmp_path / "reconciler", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(PROJECT / "pyproject.toml", tmp_path / "pyproject.toml")
    model = tmp_path / "reconciler" / "model" / "__init__.py"
    model.write_text(
        model.read_text() + "\nfrom reconciler import daemon as _daemon  # a deliberate back arrow\n"
    )
    proc = lint(tmp_path)
    assert proc.returncode == 1, proc.stdout
    assert "The foundation (model, wording, errors, settings) imports nothing higher BROKEN" in proc.stdout
    assert "Layers: the pipeline reads downward, from the CLI to the foundation BROKEN" in proc.stdout
    assert "reconciler.model -> reconciler.daemon" in proc.stdout


def test_an_import_for_annotations_alone_counts(tmp_path: Path) -> None:
    """A type-only back arrow (under ``TYPE_CHECKING``) breaks the layers as any import."""
    shutil.copytree(
        PROJECT / "reconciler", tmp_path / "reconciler", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(PROJECT / "pyproject.toml", tmp_path / "pyproject.toml")
    model = tmp_path / "reconciler" / "model" / "keys.py"
    model.write_text(
        model.read_text()
        + "\nfrom typing import TYPE_CHECKING as _TC\n\nif _TC:\n    from reconciler.wording import problems as _words\n"
    )
    proc = lint(tmp_path)
    assert proc.returncode == 1, proc.stdout
    assert "Layers: the pipeline reads downward, from the CLI to the foundation BROKEN" in proc.stdout
    assert "reconciler.model.keys -> reconciler.wording.problems" in proc.stdout


def test_a_prdiff_import_of_the_host_breaks_the_contracts(tmp_path: Path) -> None:
    shutil.copytree(
        PROJECT / "reconciler", tmp_path / "reconciler", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(PROJECT / "pyproject.toml", tmp_path / "pyproject.toml")
    compare = tmp_path / "reconciler" / "prdiff" / "compare.py"
    compare.write_text(
        compare.read_text() + "\nfrom reconciler.host import apply as _apply  # a host import\n"
    )
    proc = lint(tmp_path)
    assert proc.returncode == 1, proc.stdout
    assert "import nothing of the host, the daemon or the" in proc.stdout
    assert "reconciler.prdiff.compare -> reconciler.host.apply" in proc.stdout


def test_breaches_of_the_package_and_library_contracts(tmp_path: Path) -> None:
    shutil.copytree(
        PROJECT / "reconciler", tmp_path / "reconciler", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(PROJECT / "pyproject.toml", tmp_path / "pyproject.toml")
    breaches = {
        "render/xml.py": "from reconciler.render import cpu as _cpu  # an arrow pointing back\n",
        "plan/build.py": "import deepdiff as _deepdiff  # a library outside its room\n",
        "overlays/engine.py": "import git as _git  # a pure stage reading git\n",
    }
    for rel, line in breaches.items():
        path = tmp_path / "reconciler" / rel
        path.write_text(path.read_text() + "\n" + line)
    (tmp_path / "reconciler" / "render" / "newpart.py").write_text('"""A module no layer names."""\n')
    proc = lint(tmp_path)
    assert proc.returncode == 1, proc.stdout
    out = " ".join(proc.stdout.split())  # contract names are wrapped at 80 columns
    for broken in (
        "render: the per-area modules over their shared pieces, placement over all of them BROKEN",
        "Only reconciler.compare.changes imports deepdiff BROKEN",
        "Only reconciler.source imports git (GitPython) BROKEN",
        "The pure stages never reach git: they read the file view and the readers they are given BROKEN",
    ):
        assert broken in out, broken
    assert "reconciler.render.xml -> reconciler.render.cpu" in out
    assert "reconciler.render.newpart" in out  # not listed as a layer of an exhaustive contract
    assert "reconciler.plan.build -> deepdiff" in out
    assert "reconciler.desired.pins -> reconciler.overlays" in out  # git reached indirectly
    assert "host: apply over provision, the hypervisor over the connection KEPT" in out


def test_every_module_belongs_to_a_layer() -> None:
    """A new module or package must be placed in the layers contract, not left outside it.

    A package sits in one layer whole, or each of its modules sits in one."""
    layers = tomllib.loads((PROJECT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    named = {m.strip() for layer in layers["layers"] for m in layer.split("|")}
    package = PROJECT / "reconciler"
    units: set[str] = set()
    for p in package.iterdir():
        if p.suffix == ".py" and p.name != "__init__.py":
            units.add(f"reconciler.{p.stem}")
        elif (p / "__init__.py").is_file():
            whole = f"reconciler.{p.name}"
            if whole in named:
                units.add(whole)
            else:  # placed module by module
                units.update(
                    f"{whole}.{m.stem}" for m in p.iterdir() if m.suffix == ".py" and m.name != "__init__.py"
                )
    assert units - named == set(), "modules outside every layer"
    assert named - units == set(), "layers naming modules that do not exist"


def test_no_contract_ignores_an_import_of_our_own() -> None:
    """The ignored imports are a third-party library's room (libvirt, git, ruamel, ...),
    never an arrow between two modules of ``reconciler``: a type two modules share sits in
    the lower one (a record, or a ``Protocol`` of what it reads), so no cycle hides there."""
    contracts = tomllib.loads((PROJECT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    ignored = [i for c in contracts for i in c.get("ignore_imports", ())]
    assert ignored, "the libraries' rooms are named"
    ours = [i for i in ignored if i.split("->")[1].strip().startswith("reconciler")]
    assert ours == []


# Import cycles between two modules of a package no contract layers (shrink-only: a cycle
# broken leaves this list; none is added).
KNOWN_CYCLES: set[frozenset[str]] = set()


def _cycles(edges: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: set[frozenset[str]] = set()
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, nxt = work[-1]
            w = next(nxt, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.add(frozenset(comp))
    return found


def test_no_import_cycle_between_modules() -> None:
    """No two modules of ``reconciler`` import each other, even through others or for
    annotations alone (where a contract layers a package, it says so too)."""
    graph = grimp.build_graph("reconciler", cache_dir=None)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    cycles = _cycles(edges)
    assert cycles - KNOWN_CYCLES == set(), "an import cycle"
    assert KNOWN_CYCLES - cycles == set(), "a cycle broken: take it off KNOWN_CYCLES"


def test_a_cycle_is_found() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}}
    assert _cycles(edges) == {frozenset({"a", "b", "c"})}
