"""Which repository a command reads and whose domains it manages, as a user meets it
(test:///default, real git repositories and clones).

Covers: two clones of one remote are one owner, and so are a clone of a local
repository and that repository (a local path is no identity: the root commit is) (a domain ``apply`` defined from one
clone is planned unchanged from the other, not skipped as another owner's); a
repository without a remote is named by its root commit; a domain marked by an older
version (the checkout's path as owner) is recognised as this owner's and marked again,
once; ``run --owner`` writes that owner; commands run from a subdirectory of the work
tree find its top as git does (the entry defaults to that subdirectory); the
uncommitted-edits note names an edited file the build reads outside the entry
directory (a base), and not a file it does not read.
"""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

import pytest

from reconciler import cli, ownership, source
from reconciler.host.hypervisor import Hypervisor
from tests.helpers.domains import drop_domains
from tests.helpers.git import GitRepo
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

URI = "test:///default"
NAMES = ("ident-a", "ident-b")
KUSTOMIZATION = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../base
"""
BASE = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - vms/ident-a.yaml
"""


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as h:
        drop_domains(h, NAMES)
        yield h
        drop_domains(h, NAMES)


def overlay_repo(repo: GitRepo) -> GitRepo:
    repo.write("base/kustomization.yaml", BASE)
    repo.write("base/vms/ident-a.yaml", vm_yaml("ident-a"))
    repo.write("overlays/prod/kustomization.yaml", KUSTOMIZATION)
    repo.write("README.md", "the fleet\n")
    repo.commit("fleet")
    return repo


def clone(origin: Path, where: Path) -> GitRepo:
    """``git clone ORIGIN WHERE``, as a user's own checkout."""
    where.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", str(origin), str(where)], check=True, capture_output=True)
    return GitRepo(where)


def marks(hv: Hypervisor) -> dict[str, str]:
    return {d.name: d.mark.owner for d in hv.list_domains() if d.name in NAMES and d.mark is not None}


def test_two_clones_of_one_remote_are_one_owner(
    tmp_path: Path, hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    work = overlay_repo(GitRepo(tmp_path / "work"))
    bare = tmp_path / "remote" / "fleet.git"
    bare.parent.mkdir()
    work.git("clone", "-q", "--bare", str(work.path), str(bare))
    a = clone(bare, tmp_path / "a" / "fleet")
    b = clone(bare, tmp_path / "b" / "checkout")
    flags = ["--path", "overlays/prod", "--connect", URI]
    assert cli.main(["apply", "--repo", str(a.path), *flags, "--yes"]) == 0
    root = work.git("rev-list", "--max-parents=0", "HEAD")
    owner = f"git:{root}#overlays/prod"  # a remote that is a local path names no repository
    assert marks(hv) == {"ident-a": owner}
    capsys.readouterr()
    assert cli.main(["plan", "--repo", str(b.path), *flags, "-o", "json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["plans"]
    assert doc["policy"]["owner"] == owner
    assert [c["action"] for c in doc["changes"]] == ["unchanged"]


def test_a_clone_of_a_local_repository_is_the_same_owner(
    tmp_path: Path, hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    """``git clone /srv/fleet`` has ``origin`` = that path: the clone and the repository
    it was cloned from are one owner (their root commit), so the clone's plan leaves the
    first one's domains unchanged instead of refusing them as another owner's."""
    work = overlay_repo(GitRepo(tmp_path / "work"))
    copy = clone(work.path, tmp_path / "copy" / "fleet")
    root = work.git("rev-list", "--max-parents=0", "HEAD")
    assert source.repository_identity(copy.path) == source.repository_identity(work.path) == f"git:{root}"
    flags = ["--path", "overlays/prod", "--connect", URI]
    assert cli.main(["apply", "--repo", str(work.path), *flags, "--yes"]) == 0
    capsys.readouterr()
    assert cli.main(["plan", "--repo", str(copy.path), *flags, "-o", "json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["plans"]
    assert [c["action"] for c in doc["changes"]] == ["unchanged"]
    # a domain an older version marked with the local path as owner is this owner's
    drop_domains(hv, NAMES)
    before = f"{work.path.resolve().as_posix()}#overlays/prod"
    assert source.former_identity(copy.path) == work.path.resolve().as_posix()
    assert cli.main(["apply", "--repo", str(copy.path), *flags, "--owner", before, "--yes"]) == 0
    assert marks(hv) == {"ident-a": before}
    assert cli.main(["apply", "--repo", str(copy.path), *flags, "--yes"]) == 0
    assert marks(hv) == {"ident-a": f"git:{root}#overlays/prod"}


def test_without_a_remote_the_root_commit_names_the_repository(tmp_path: Path) -> None:
    repo = overlay_repo(GitRepo(tmp_path / "solo"))
    root = repo.git("rev-list", "--max-parents=0", "HEAD")
    repo.write("more.yaml", "# x\n")
    repo.commit("more")
    assert source.repository_identity(repo.path) == f"git:{root}"
    assert ownership.default_owner(f"git:{root}", "/overlays/prod/") == f"git:{root}#overlays/prod"


def test_a_mark_of_the_checkout_path_is_taken_over_once(
    git_repo: GitRepo, hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    overlay_repo(git_repo)
    legacy = ownership.legacy_owner(str(git_repo.path), "overlays/prod")
    flags = ["--repo", str(git_repo.path), "--path", "overlays/prod", "--connect", URI]
    assert cli.main(["apply", *flags, "--owner", legacy, "--yes"]) == 0  # as an older version wrote it
    capsys.readouterr()
    assert cli.main(["plan", *flags]) == 2
    out = capsys.readouterr().out
    owner = f"git:{git_repo.git('rev-list', '--max-parents=0', 'HEAD')}#overlays/prod"
    assert f"vm/ident-a: update - ownership record refreshed (owner renamed to {owner})" in out
    assert cli.main(["apply", *flags, "--yes"]) == 0
    assert marks(hv) == {"ident-a": owner}
    assert cli.main(["plan", *flags]) == 0


def test_run_owner_names_the_owner_of_its_marks(git_repo: GitRepo, hv: Hypervisor, tmp_path: Path) -> None:
    overlay_repo(git_repo)
    run = ["run", "--once", "--repo", str(git_repo.path), "--path", "overlays/prod", "--connect", URI]
    code = cli.main([*run, "--owner", "fleet-team", "--state-dir", str(tmp_path / "state"), "--listen", ""])
    assert code == 0
    assert marks(hv) == {"ident-a": "fleet-team"}


def test_commands_find_the_top_from_a_subdirectory(
    git_repo: GitRepo, hv: Hypervisor, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    overlay_repo(git_repo)
    monkeypatch.chdir(git_repo.path / "overlays" / "prod")
    assert cli.main(["validate"]) == 0
    assert ", entry overlays/prod: valid, 1 VM" in capsys.readouterr().out
    assert cli.main(["plan", "--connect", URI]) == 2
    out = capsys.readouterr().out
    assert "entry overlays/prod" in out
    assert "vm/ident-a: create" in out
    monkeypatch.chdir(git_repo.path / "base" / "vms")
    assert cli.main(["validate", "--path", "overlays/prod"]) == 0  # --path: from the top
    assert cli.main(["diff", "HEAD", "--path", "overlays/prod"]) == 0


def test_the_note_names_edits_the_build_reads_anywhere(
    git_repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    overlay_repo(git_repo)
    git_repo.write("README.md", "edited, not read by any build\n")
    assert cli.main(["validate", "--repo", str(git_repo.path), "--path", "overlays/prod"]) == 0
    assert "uncommitted" not in capsys.readouterr().err
    git_repo.write("base/vms/ident-a.yaml", vm_yaml("ident-a", memory="128Mi"))
    assert cli.main(["validate", "--repo", str(git_repo.path), "--path", "overlays/prod"]) == 0
    err = capsys.readouterr().err
    assert "1 uncommitted change(s) to files the build uses are not read (base/vms/ident-a.yaml)" in err
