"""kustomize's krusty test cases as files (``tests/data/overlays/krusty``).

Input: one case directory (its ``tree/``, ``ENTRY``). Output: its files by path and its
entry directory, as kustomize's test harness builds them. Reads that directory only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def case_files(case: Path) -> tuple[dict[str, str], str]:
    """(files, entry directory) of one case, its top kustomization ordered as kustomize's
    test harness orders it (``fifo`` unless the case names an order)."""
    tree = case / "tree"
    files = {str(p.relative_to(tree)): p.read_text() for p in tree.rglob("*") if p.is_file()}
    entry = (case / "ENTRY").read_text().strip()
    entry = "" if entry == "." else entry
    top = f"{entry}/kustomization.yaml" if entry else "kustomization.yaml"
    if top in files and "sortOptions" not in files[top]:
        files[top] += "\nsortOptions:\n  order: fifo\n"
    return files, entry
