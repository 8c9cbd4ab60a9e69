"""``reconciler build`` is byte-identical to ``kubectl kustomize`` on a real tree.

Covers: every kustomization directory of the pinned kubevirt/common-instancetypes tree
(tests/data/common-instancetypes, 228 of them) builds to the exact bytes kustomize
printed, compared through the sha256 recorded in
tests/data/common-instancetypes.kustomize.sha256 (``bench/build-ratio
--record-kustomize`` rewrites it), both from the work tree and from a commit (a
Component on its own builds to nothing, as in kustomize; a directory kustomize
refuses would be refused here too).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from reconciler import manifests, overlays, source
from reconciler.errors import ReconcilerError
from reconciler.overlays.cache import OverlayCache
from reconciler.source.files import DirView

DATA = Path(__file__).resolve().parents[1] / "data"
TREE = DATA / "common-instancetypes"
EXPECTED = [
    tuple(line.split(" ", 1))
    for line in (DATA / "common-instancetypes.kustomize.sha256").read_text().splitlines()
    if line and not line.startswith("#")
]


def digest(view: object, entry: str) -> str:
    docs = overlays.build(view, "" if entry == "." else entry, cache=OverlayCache())  # type: ignore[arg-type]
    return hashlib.sha256(manifests.dump_documents(m.obj for m in docs).encode()).hexdigest()


@pytest.fixture(scope="module")
def committed(tmp_path_factory: pytest.TempPathFactory) -> object:
    """The tree as a commit of its own repository (the git file view)."""
    repo = tmp_path_factory.mktemp("ci") / "repo"
    subprocess.run(["cp", "-r", str(TREE), str(repo)], check=True)
    env = ["-c", "user.email=t@example.invalid", "-c", "user.name=t", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], [*env, "commit", "-qm", "tree"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return source.read_snapshot(repo, "HEAD").files


def test_every_kustomization_is_recorded() -> None:
    dirs = sorted(p.parent.relative_to(TREE).as_posix() for p in TREE.rglob("kustomization.yaml"))
    assert sorted(d for _, d in EXPECTED) == dirs


@pytest.mark.parametrize(("expected", "entry"), EXPECTED, ids=[d for _, d in EXPECTED])
def test_same_bytes_as_kustomize(expected: str, entry: str, committed: object) -> None:
    for view in (DirView(TREE), committed):
        if expected == "error":
            with pytest.raises(ReconcilerError):
                digest(view, entry)
        else:
            assert digest(view, entry) == expected, f"{entry}: output differs from kustomize's"
