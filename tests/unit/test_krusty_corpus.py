"""kustomize's own tests as the overlay engine's yardstick: ``api/krusty/*_test.go``, laid out
as files by ``scripts/krusty-corpus`` (``tests/data/overlays/krusty``, pinned with kustomize's
license and the commit in ``SOURCE``).

Covers: every laid-out build byte-identical to the output kustomize's test expects; every
expected error raised, with the text the test looks for; the cases docs/kustomize-krusty.md
leaves out (each naming the kustomize feature it needs) still differ, so that table stays
true; the share of the corpus that passes stays at or above 95 % of builds and of errors.

The krusty harness builds with kustomize's default options, which keep the accumulation order
(``Reorder: none``); a case whose entry kustomization sets no ``sortOptions`` is built with
``sortOptions: {order: fifo}``, kustomize's same order.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconciler import manifests, overlays
from reconciler.errors import ReconcilerError
from reconciler.overlays.cache import OverlayCache
from tests.helpers.files import MemView
from tests.helpers.krusty import case_files

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "overlays" / "krusty"
CASES = sorted(p for p in (CORPUS / "cases").iterdir() if (p / "ENTRY").exists())
TABLE = ROOT / "docs" / "kustomize-krusty.md"


def left_out() -> dict[str, str]:
    """The cases the docs table names, with the feature each needs."""
    rows = re.findall(r"^\| `(Test\w+)` \| (.+?) \|$", TABLE.read_text(), re.M)
    return dict(rows)


def outcome(case: Path) -> tuple[str, str]:
    """("same" | "differs" | "error", detail) of building one case."""
    files, entry = case_files(case)
    try:
        built = overlays.build(MemView(files), entry, cache=OverlayCache())
    except ReconcilerError as err:
        return "error", str(err)
    text = manifests.dump_documents(m.obj for m in built)
    if (case / "expected-error").exists():
        return "built", text
    return ("same" if text == (case / "expected.yaml").read_text() else "differs"), text


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_case_as_kustomize_tests_it(case: Path) -> None:
    kind, detail = outcome(case)
    if case.name in left_out():
        assert kind != "same", f"{case.name} passes now: remove its row from docs/kustomize-krusty.md"
        return
    if (case / "expected-error").exists():
        expected = (case / "expected-error").read_text().replace("'/", "'")  # the harness's root is /
        assert kind == "error", f"kustomize refuses this build; it built:\n{detail}"
        assert expected in detail
        return
    assert kind == "same", detail


def test_the_corpus_share_is_kept() -> None:
    builds = [c for c in CASES if not (c / "expected-error").exists()]
    errors = [c for c in CASES if (c / "expected-error").exists()]
    out = left_out()
    assert set(out) <= {c.name for c in CASES}, "the table names a case the corpus does not hold"
    assert len([c for c in builds if c.name not in out]) >= 0.95 * len(builds)
    assert len([c for c in errors if c.name not in out]) >= 0.95 * len(errors)
