"""The test helper ``GitRepo`` writes the repository git would: same trees, a valid
object store, an index that leaves ``git status`` clean, history git can follow."""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

from tests.helpers.git import GitRepo

if TYPE_CHECKING:
    from pathlib import Path


def by_git(work: Path, where: Path) -> str:
    """What ``git add -A`` makes of a copy of the work tree: its tree id."""
    shutil.copytree(work, where, symlinks=True, ignore=shutil.ignore_patterns(".git"))

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=where, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("add", "-A")
    return git("write-tree").strip()


def fill(root: Path) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "vm.yaml").write_text("kind: VirtualMachine\n")
    (root / "a" / "b-c.yaml").write_text("x: 1\n")  # sorts between a/b and a/b/ in a tree
    (root / "a" / "empty").mkdir()  # an empty directory: git keeps nothing of it
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "link").symlink_to("a/b/vm.yaml")
    (root / "ünïcode name.yaml").write_text("y: 2\n")


def test_the_commits_are_the_ones_git_makes(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    fill(repo.path)
    first = repo.commit("first")
    (repo.path / "a" / "b" / "vm.yaml").write_text("kind: VirtualMachine\nspec: {}\n")
    repo.remove("a/b-c.yaml")
    second = repo.commit("second\n\nbody")
    tree = repo.git("rev-parse", f"{second}^{{tree}}")
    assert by_git(repo.path, tmp_path / "copy") == tree
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    assert repo.git("status", "--porcelain", "--untracked-files=all") == ""
    assert repo.git("rev-list", "HEAD").split() == [second, first]
    assert (
        repo.git("log", "-1", "--format=%an <%ae>%n%B", "HEAD")
        == "Test <test@example.invalid>\nsecond\n\nbody"
    )
    assert repo.git("rev-parse", "--abbrev-ref", "HEAD") == "main"
    staged = (r.split("\t", 1) for r in repo.git("ls-files", "-s", "-z").split("\0") if r)
    assert {path: meta.split()[0] for meta, path in staged} == {
        "a/b/vm.yaml": "100644",
        "link": "120000",
        "run.sh": "100755",
        "ünïcode name.yaml": "100644",
    }


def test_an_empty_commit_and_a_branch_git_made(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    empty = repo.commit("nothing")
    assert repo.git("rev-parse", f"{empty}^{{tree}}") == "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    repo.git("checkout", "-q", "-b", "topic")
    repo.write("x.yaml", "x: 1\n")
    on_topic = repo.commit()
    assert repo.git("rev-parse", "topic") == on_topic
    assert repo.git("rev-parse", "main") == empty
    repo.git("pack-refs", "--all")  # a packed ref is a parent too
    assert repo.git("rev-parse", f"{repo.commit()}^") == on_topic


def test_what_git_must_judge_is_committed_by_git(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.write(".gitignore", "*.log\n")
    repo.write("vm.yaml", "a: 1\n")
    repo.write("debug.log", "noise\n")
    repo.commit()
    assert repo.git("ls-files").split() == [".gitignore", "vm.yaml"]
    assert repo.git("status", "--porcelain") == ""


def test_a_repository_configured_to_sign_is_committed_by_git(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.write("vm.yaml", "a: 1\n")
    repo.commit()
    repo.git("config", "user.name", "Someone Else")
    repo.write("vm.yaml", "a: 2\n")
    repo.commit()
    assert repo.git("log", "--format=%an").split("\n") == ["Someone Else", "Test"]
