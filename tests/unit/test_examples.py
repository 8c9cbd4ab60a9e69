"""The example GitOps repository stays valid KubeVirt YAML that this project accepts.

Covers: both overlays of examples/repo build, expand and render with no error and no
warning; the prod overlay's patches really apply (db on u1.large, build agent running);
every VM keeps the KubeVirt shape (apiVersion kubevirt.io/v1, instancetype/preference
matchers) so the repository would move to KubeVirt unchanged.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reconciler import render, source
from reconciler.desired import desired_state
from reconciler.model import RunStrategy
from reconciler.settings.host import HostConfig
from tests.helpers.git import GitRepo

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repo"


@pytest.fixture(scope="module")
def example_repo(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    repo = GitRepo(tmp_path_factory.mktemp("examples") / "repo")
    shutil.copytree(EXAMPLE, repo.path, dirs_exist_ok=True)
    repo.commit("examples")
    return repo


@pytest.mark.parametrize("entry", ["overlays/dev", "overlays/prod"])
def test_overlay_renders_without_errors_or_warnings(example_repo: GitRepo, entry: str) -> None:
    d = desired_state(source.read_snapshot(example_repo.path), entry, HostConfig(), render.HostCaps.default())
    assert d.errors == ()
    assert d.warnings == ()
    assert sorted(r.name for r in d.rendered) == ["build-agent", "db", "legacy-app", "web"]
    for vm in d.expanded:
        assert vm.vm["apiVersion"] == "kubevirt.io/v1"
        assert vm.instancetype is not None
        assert vm.preference is not None


def test_prod_patches_apply(example_repo: GitRepo) -> None:
    d = desired_state(
        source.read_snapshot(example_repo.path), "overlays/prod", HostConfig(), render.HostCaps.default()
    )
    by_name = {r.name: r for r in d.rendered}
    assert by_name["build-agent"].run_strategy == RunStrategy.ALWAYS
    db = next(vm for vm in d.expanded if vm.name == "db")
    assert db.instancetype is not None
    assert db.instancetype.name == "u1.large"
    assert db.vm["metadata"]["labels"]["env"] == "prod"
