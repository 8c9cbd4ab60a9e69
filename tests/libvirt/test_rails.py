"""Safety rails without gaps, end to end on test:///default (daemons in-process, a clock
the test advances; ``plan`` through the CLI).

Covers: the prune guard over two commits (20 Halted VMs added in one, the 5 real ones
deleted in the next: refused, counted against the 5 managed when the window began, the
refusal recorded with its window in ``state.json``); ``plan`` exits 2 while a prune is
refused; two daemons of different owners whose repositories both keep
``adopt: "true"``: the domain is adopted once and stays with its adopter over many
reconciles (never redefined back and forth), the other daemon reports the conflict as
an error, the adopter as a warning. VM names are unique to this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler.cli import main
from reconciler.config.daemon import Policy
from reconciler.daemon.scheduler import REFS, RESYNC
from reconciler.host.hypervisor import Hypervisor
from tests.helpers.clock import FakeClock
from tests.helpers.git import GitRepo
from tests.helpers.loop import Daemons
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.libvirt_test

PREFIX = "rails-"
DAEMONS = Daemons(PREFIX)


@pytest.fixture(autouse=True)
def _teardown() -> Iterator[None]:
    yield
    DAEMONS.close()


def names() -> set[str]:
    with Hypervisor("test:///default") as hv:
        return {d.name for d in hv.list_domains() if d.name.startswith(PREFIX)}


def test_commits_in_a_row_cannot_dilute_the_prune_guard(tmp_path: Path, git_repo: GitRepo) -> None:
    real = [f"{PREFIX}real-{i}" for i in range(5)]
    for n in real:
        git_repo.write(f"vms/{n}.yaml", vm_yaml(n))
    git_repo.commit("five real VMs")
    clock = FakeClock()
    d = DAEMONS.make(git_repo, tmp_path / "s", clock, policy=Policy(prune=True))
    d.step({RESYNC})
    assert set(real) <= names()
    clock.advance(60)
    for i in range(20):
        git_repo.write(f"vms/dummy-{i}.yaml", vm_yaml(f"{PREFIX}dummy-{i:02d}", strategy="Halted"))
    git_repo.commit("twenty Halted VMs")
    d.step({REFS})
    assert d.reason == "Succeeded"
    clock.advance(60)
    for n in real:
        git_repo.remove(f"vms/{n}.yaml")
    deleting = git_repo.commit("the five real ones deleted")
    d.step({REFS})
    assert d.reason == "PruneFailed"
    assert "5 of 5 managed domains" in d.message
    assert set(real) <= names()  # 5 of 25 would have passed a guard counting per reconcile
    host = d.state.doc["hosts"][d.hosts[0].name]
    assert host["prune_refused"]["revision"] == deleting
    assert set(host["prune_window"]["managed"]) == set(real)
    # plan --config (the daemon's configuration and state) refuses it too, and exits 2
    # (a difference held back), never 0.
    config = tmp_path / "config.yaml"
    config.write_text(
        f"source: {{repo: {git_repo.path}}}\nconnect: test:///default\nlisten: false\n"
        f"stateDir: {tmp_path / 's'}\npolicy: {{prune: true}}\n"
    )
    assert main(["plan", "--config", str(config)]) == 2


def test_two_owners_with_leftover_adopt_annotations_do_not_take_a_vm_back_and_forth(tmp_path: Path) -> None:
    adopted = vm_yaml(f"{PREFIX}shared").replace(
        "metadata:\n", 'metadata:\n  annotations:\n    reconciler.kubevirt.io/adopt: "true"\n'
    )
    first, second = GitRepo(tmp_path / "one"), GitRepo(tmp_path / "two")
    for repo in (first, second):
        repo.write("vms/shared.yaml", adopted)
        repo.commit(f"repository {repo.path.name}")  # two histories: two owners (git:<root commit>)
    one = DAEMONS.make(first, tmp_path / "s1")
    two = DAEMONS.make(second, tmp_path / "s2")
    one.step({RESYNC})  # creates it (nothing to adopt yet)
    two.step({RESYNC})  # adopts it from the first owner, once
    with Hypervisor("test:///default") as hv:
        taken = hv.get_domain(f"{PREFIX}shared")
    assert taken is not None
    assert taken.mark is not None
    assert taken.mark.owner == two.hosts[0].target.policy.owner
    assert taken.mark.adopted_from == one.hosts[0].target.policy.owner
    for _ in range(5):
        one.step({RESYNC})
        two.step({RESYNC})
    with Hypervisor("test:///default") as hv:
        now = hv.get_domain(f"{PREFIX}shared")
    assert now is not None
    assert now.persistent_xml == taken.persistent_xml  # never redefined back and forth
    assert one.reason == "RenderFailed"
    assert "conflict: the domain belongs to owner" in one.message
    (row,) = one.hosts[0].rows
    assert row.sync == "Unmanaged"
    assert "adoption is one-time" in row.message
    assert two.reason == "Succeeded"
    assert any("conflict: adopted from owner" in w for w in two.hosts[0].warned)
