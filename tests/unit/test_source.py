"""Source stage: reading one commit's tree.

Covers: reads come from the commit, never the work tree; older refs; directory
listing; symlinks inside the tree followed, symlinks and ``..`` leaving the root
refused; DirView refuses a symlink out of its root; unknown refs are SourceErrors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler.errors import OverlayError, SourceError
from reconciler.source import DirView, clean_path, read_snapshot, work_tree_root

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo


def test_reads_commit_tree_not_work_tree(git_repo: GitRepo) -> None:
    git_repo.write("vms/web.yaml", "name: committed\n")
    first = git_repo.commit("first")
    git_repo.write("vms/web.yaml", "name: dirty work tree\n")
    git_repo.write("vms/untracked.yaml", "x: 1\n")

    snap = read_snapshot(git_repo.path, "HEAD")
    assert snap.commit == first
    assert snap.files.read("vms/web.yaml") == b"name: committed\n"
    assert not snap.files.exists("vms/untracked.yaml")
    assert snap.files.listdir("vms") == ["web.yaml"]
    assert snap.files.is_dir("vms")
    assert not snap.files.is_dir("vms/web.yaml")
    assert snap.files.blob_id("vms/web.yaml") == git_repo.git("rev-parse", "HEAD:vms/web.yaml")


def test_older_ref_is_readable(git_repo: GitRepo) -> None:
    git_repo.write("a.yaml", "v: 1\n")
    first = git_repo.commit()
    git_repo.write("a.yaml", "v: 2\n")
    git_repo.commit()
    assert read_snapshot(git_repo.path, first).files.read("a.yaml") == b"v: 1\n"
    assert read_snapshot(git_repo.path, "HEAD~1").commit == first


def test_symlink_inside_tree_is_followed(git_repo: GitRepo) -> None:
    git_repo.write("real/vm.yaml", "v: 1\n")
    (git_repo.path / "alias").symlink_to("real")
    git_repo.commit()
    files = read_snapshot(git_repo.path).files
    assert files.read("alias/vm.yaml") == b"v: 1\n"
    assert files.is_dir("alias")


def test_symlink_leaving_the_root_is_refused(git_repo: GitRepo) -> None:
    (git_repo.path / "shadow.yaml").symlink_to("../../etc/shadow")
    git_repo.commit()
    files = read_snapshot(git_repo.path).files
    with pytest.raises(OverlayError, match="outside the repository root"):
        files.read("shadow.yaml")
    assert not files.exists("shadow.yaml")


@pytest.mark.parametrize("path", ["../x.yaml", "a/../../x.yaml", "/etc/passwd"])
def test_paths_leaving_the_root_are_refused(path: str) -> None:
    with pytest.raises(OverlayError):
        clean_path(path)


def test_clean_path_normalises() -> None:
    assert clean_path("./a/./b/../c.yaml") == "a/c.yaml"
    assert clean_path("c.yaml", "overlays/prod") == "overlays/prod/c.yaml"
    assert clean_path("../../base", "overlays/prod") == "base"
    assert clean_path("") == ""


def test_dirview_refuses_symlink_out_of_root(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "secret.yaml").write_text("s: 1\n")
    (root / "ok.yaml").write_text("o: 1\n")
    (root / "leak.yaml").symlink_to(tmp_path / "secret.yaml")
    view = DirView(root)
    assert view.read("ok.yaml") == b"o: 1\n"
    with pytest.raises(OverlayError):
        view.read("leak.yaml")


def test_unknown_ref_and_non_repo(git_repo: GitRepo, tmp_path: Path) -> None:
    git_repo.write("a.yaml", "v: 1\n")
    git_repo.commit()
    with pytest.raises(SourceError, match="cannot resolve ref"):
        read_snapshot(git_repo.path, "no-such-branch")
    with pytest.raises(SourceError, match="not a git repository"):
        read_snapshot(tmp_path / "nothing-here")


def test_a_repository_missing_under_private_tmp_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Under systemd (``INVOCATION_ID``) the unit's ``PrivateTmp=yes`` hides /tmp: said."""
    from reconciler.errors import SourceError
    from reconciler.source.mirror import GitSource
    from reconciler.source.settings import SourceConfig

    gone = GitSource(SourceConfig("/tmp/no-such-repository-for-reconciler"), str(tmp_path))
    monkeypatch.setenv("INVOCATION_ID", "0123456789abcdef")
    with pytest.raises(SourceError, match=r"no such repository .*PrivateTmp=yes"):
        gone.head()
    monkeypatch.delenv("INVOCATION_ID")
    with pytest.raises(SourceError, match=r"no such repository$"):
        gone.head()


def test_the_work_tree_is_found_upwards_as_git_finds_it(git_repo: GitRepo, tmp_path: Path) -> None:
    git_repo.write("overlays/prod/kustomization.yaml", "resources: []\n")
    git_repo.commit("first")
    top = str(git_repo.path)
    assert work_tree_root(git_repo.path) == (top, "")
    assert work_tree_root(git_repo.path / "overlays" / "prod") == (top, "overlays/prod")
    assert work_tree_root(git_repo.path / "overlays" / "prod" / "kustomization.yaml") == (
        top,
        "overlays/prod/kustomization.yaml",
    )
    link = tmp_path / "link"
    link.symlink_to(git_repo.path)
    assert work_tree_root(link / "overlays") == (str(link), "overlays")  # the top as given
    assert work_tree_root(git_repo.path / ".git") is None  # no work tree inside the git directory
    assert work_tree_root(git_repo.path / "no-such-dir") is None
    outside = tmp_path / "outside"
    outside.mkdir()
    assert work_tree_root(outside) is None
