"""`reconciler build` starts with what it runs: neither a work tree's build nor a
commit's (``--ref``), nor a ``diff`` of two commits (its work tree found by ``git
rev-parse``), imports GitPython, libvirt, the logging library or the diff and schema
libraries; the commit is read with git's plumbing (``source.catfile``), which
peels tags, refuses what is no commit and says a corrupt object as GitPython's path does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from reconciler.errors import SourceError
from reconciler.source import catfile, read_snapshot

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from tests.helpers.git import GitRepo

UNUSED = ("git", "gitdb", "libvirt", "structlog", "deepdiff", "jsonschema")

KUSTOMIZATION = "resources:\n- cm.yaml\nnamePrefix: p-\n"
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n"

PROBE = """
import json, sys
from reconciler.cli import main
code = main(sys.argv[1:])
loaded = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.stdin.readline())))
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


def _build(*args: str, command: str = "build") -> tuple[str, dict[str, object]]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, command, *args],
        input=json.dumps(UNUSED) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout, json.loads(proc.stderr.strip().splitlines()[-1])


def test_a_work_tree_build_imports_no_git_libvirt_or_logging(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text(KUSTOMIZATION)
    (tmp_path / "cm.yaml").write_text(CONFIGMAP)
    out, seen = _build(str(tmp_path))
    assert seen == {"code": 0, "loaded": []}
    assert "name: p-c\n" in out


def test_a_commit_build_imports_no_git_libvirt_or_logging(git_repo: GitRepo) -> None:
    git_repo.write("kustomization.yaml", KUSTOMIZATION)
    git_repo.write("cm.yaml", CONFIGMAP)
    git_repo.commit("first")
    git_repo.write("cm.yaml", CONFIGMAP.replace("k: v", "k: edited"))  # the work tree is not read
    out, seen = _build("--ref", "HEAD", str(git_repo.path))
    assert seen == {"code": 0, "loaded": []}
    assert "k: v\n" in out
    assert "edited" not in out


def test_a_diff_of_two_commits_from_a_subdirectory_imports_no_git_libvirt_or_logging(
    git_repo: GitRepo,
) -> None:
    git_repo.write("kustomization.yaml", KUSTOMIZATION)
    git_repo.write("cm.yaml", CONFIGMAP)
    git_repo.commit("first")
    git_repo.write("cm.yaml", CONFIGMAP.replace("k: v", "k: edited"))
    git_repo.commit("second")
    (git_repo.path / "sub").mkdir()
    out, seen = _build("--base", "HEAD~1", "--repo", str(git_repo.path / "sub"), "--path", "", command="diff")
    assert seen == {"code": 0, "loaded": []}  # the top found by git itself, no VM: no change
    assert "0 created, 0 deleted, 0 changed" in out


def test_a_tag_is_peeled_and_its_commit_read(git_repo: GitRepo) -> None:
    git_repo.write("a.yaml", "v: 1\n")
    first = git_repo.commit("first\n\nwith a body")
    git_repo.git("tag", "-a", "-m", "annotated", "v1")
    git_repo.git("tag", "-a", "-m", "a tag of a tag", "v1-again", "v1")
    git_repo.write("a.yaml", "v: 2\n")
    git_repo.commit("second")
    for ref in ("v1", "v1-again", first, first[:10], "HEAD~1"):
        snap = read_snapshot(git_repo.path, ref)
        assert snap.commit == first
        assert snap.files.read("a.yaml") == b"v: 1\n"
        assert snap.message == "first\n\nwith a body"
        assert snap.committed_at > 0
        assert snap.tree == git_repo.git("rev-parse", f"{first}^{{tree}}")


def test_what_is_no_commit_is_refused(git_repo: GitRepo, tmp_path: Path) -> None:
    git_repo.write("vms/a.yaml", "v: 1\n")
    git_repo.commit("first")
    for ref in ("HEAD^{tree}", "HEAD:vms/a.yaml", "no-such-branch", "0" * 40, ""):
        with pytest.raises(SourceError, match=r"cannot resolve ref .* to a commit$|cannot resolve ref '"):
            read_snapshot(git_repo.path, ref)
    with pytest.raises(SourceError, match="not a git repository"):
        read_snapshot(git_repo.path / "vms")  # below the top: not the repository, as GitPython has it
    with pytest.raises(SourceError, match="not a git repository"):
        read_snapshot(tmp_path / "nothing-here")


def test_a_corrupt_object_is_the_repository_s_fault(git_repo: GitRepo) -> None:
    git_repo.write("a.yaml", "v: 1\n")
    git_repo.commit("first")
    blob = git_repo.git("rev-parse", "HEAD:a.yaml")
    snap = read_snapshot(git_repo.path)
    (git_repo.path / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    with pytest.raises(
        SourceError, match=rf"cannot read object {blob[:12]} \(a.yaml\) .*repository is corrupt"
    ):
        snap.files.read("a.yaml")


def test_a_corrupt_object_read_ahead_is_said_when_read_and_its_neighbours_read(git_repo: GitRepo) -> None:
    for name in ("a", "b", "c"):
        git_repo.write(f"{name}.yaml", f"{name}: 1\n")
    git_repo.write("notes.txt", "not read ahead\n")
    git_repo.commit("first")
    blob = git_repo.git("rev-parse", "HEAD:b.yaml")
    snap = read_snapshot(git_repo.path)
    (git_repo.path / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    assert snap.files.read("a.yaml") == b"a: 1\n"  # the tree's manifests read ahead, b's missing
    assert snap.files.read("c.yaml") == b"c: 1\n"
    assert snap.files.read("notes.txt") == b"not read ahead\n"
    with pytest.raises(
        SourceError, match=rf"cannot read object {blob[:12]} \(b.yaml\) .*repository is corrupt"
    ):
        snap.files.read("b.yaml")


def test_a_directory_of_more_manifests_than_one_read_ahead_is_read_in_round_trips_of_it(
    git_repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(10):
        git_repo.write(f"vms/vm-{i}.yaml", f"v: {i}\n")
    git_repo.write("kustomization.yaml", "resources: []\n")
    git_repo.commit("first")
    monkeypatch.setattr(catfile, "PREFETCH", 4)  # 11 manifests: read ahead by directory
    alone: list[str] = []
    asked: list[int] = []
    one, many = catfile.CatFile.read, catfile.CatFile.blobs

    def read(objects: catfile.CatFile, name: str, path: str = "") -> tuple[str, bytes]:
        alone.append(path)
        return one(objects, name, path)

    def blobs(objects: catfile.CatFile, shas: Sequence[str], budget: int) -> dict[str, bytes]:
        asked.append(len(shas))
        return many(objects, shas, budget)

    monkeypatch.setattr(catfile.CatFile, "read", read)
    monkeypatch.setattr(catfile.CatFile, "blobs", blobs)
    snap = read_snapshot(git_repo.path)
    alone.clear()  # the commit's own object
    for i in range(10):
        assert snap.files.read(f"vms/vm-{i}.yaml") == f"v: {i}\n".encode()
    assert alone == ["vms/vm-0.yaml"]  # the first read of the directory alone, the rest read ahead
    assert asked == [4, 4, 2]


def test_a_file_read_again_alone_reads_nothing_ahead(
    git_repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-VM change's file read again (where its error or field is) is no directory's
    second read: its 9 neighbours are not read ahead for it."""
    for i in range(10):
        git_repo.write(f"vms/vm-{i}.yaml", f"v: {i}\n")
    git_repo.commit("first")
    monkeypatch.setattr(catfile, "PREFETCH", 4)
    asked: list[int] = []
    many = catfile.CatFile.blobs

    def blobs(objects: catfile.CatFile, shas: Sequence[str], budget: int) -> dict[str, bytes]:
        asked.append(len(shas))
        return many(objects, shas, budget)

    monkeypatch.setattr(catfile.CatFile, "blobs", blobs)
    snap = read_snapshot(git_repo.path)
    for _ in range(3):
        assert snap.files.read("vms/vm-3.yaml") == b"v: 3\n"
    assert asked == []
    assert snap.files.read("vms/vm-4.yaml") == b"v: 4\n"  # a second file: the rest read ahead
    assert asked == [4, 4, 2]
