"""A repository's copy of a host's facts (host config ``factsFile``), on the test driver.

Covers: a copy written by ``reconciler host-facts`` from this host matches (no
warning; figures that change while a host runs are not compared); a copy that no
longer matches, a missing one and a broken one each give one plan warning naming
the file, what differs and how to refresh it; ``factsFile`` must be a path inside
the repository.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.config.host import load_host_config
from reconciler.errors import ConfigError
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import SourceSnapshot
from reconciler.reconcile import reconcile_once
from reconciler.settings.host import HostConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.source import DirView
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from pathlib import Path

URI = "test:///default"


def plan_warnings(repo: Path) -> list[str]:
    target = HostTarget(URI, HostConfig(name="h1", facts_file="hosts/h1.json"), PlanPolicy(host="h1"))
    snap = SourceSnapshot(repo=str(repo), ref="HEAD", commit="f" * 40, files=DirView(str(repo)))
    with Hypervisor(URI) as hv:
        plan, _ = reconcile_once(snap, "vms", target, hv, dry_run=True)
    return [w for w in map(words, plan.warnings) if "h1.json" in w]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "vms").mkdir()
    (tmp_path / "hosts").mkdir()
    assert cli.main(["host-facts", "--connect", URI, "--out", str(tmp_path / "hosts" / "h1.json")]) == 0
    return tmp_path


def test_a_fresh_copy_matches(repo: Path) -> None:
    obj = json.loads((repo / "hosts" / "h1.json").read_text())
    obj["hugepagesFree"] = [[2048, 99]]  # volatile: not compared
    obj["hostMemoryKib"] = 1
    (repo / "hosts" / "h1.json").write_text(json.dumps(obj))
    assert plan_warnings(repo) == []


def test_a_stale_copy_is_one_warning(repo: Path) -> None:
    obj = json.loads((repo / "hosts" / "h1.json").read_text())
    obj["networks"] = [["default", True], ["lab", True]]
    (repo / "hosts" / "h1.json").write_text(json.dumps(obj))
    (w,) = plan_warnings(repo)
    assert "hosts/h1.json no longer matches this host (differs in networks)" in w
    assert "reconciler host-facts --connect URI --out hosts/h1.json" in w


def test_a_missing_or_broken_copy_is_one_warning(repo: Path) -> None:
    (repo / "hosts" / "h1.json").write_text("{")
    (w,) = plan_warnings(repo)
    assert "hosts/h1.json: not a host-facts JSON file" in w
    (repo / "hosts" / "h1.json").unlink()
    (w,) = plan_warnings(repo)
    assert "factsFile hosts/h1.json is not in the repository" in w


@pytest.mark.parametrize("value", ["/etc/facts.json", "../facts.json", "''"])
def test_facts_file_is_a_path_in_the_repository(value: str) -> None:
    with pytest.raises(ConfigError, match="factsFile: a path inside the repository"):
        load_host_config(f"factsFile: {value}\n".encode(), "host.yaml")
    assert dataclasses.replace(HostConfig(), facts_file="hosts/a.json").facts_file == "hosts/a.json"
