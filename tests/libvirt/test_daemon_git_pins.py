"""``revisionName: git:<commit>`` pins in the daemon, in-process on test:///default.

Covers: the daemon reads a pinned commit from where it reads its revisions: its own
mirror for a remote ``source.repo`` (a ``file://`` URL of a bare repository, which the
source treats as a remote), the repository itself for a local one. The VM is built with
the instancetype as it was at the pinned commit (its memory), no "not supplied" error
is recorded, and a pin of a commit the repository lacks fails the revision with one
error at the VM's line. The daemon runs on a clock the test advances. VM names are unique to this module
(test:///default is shared by the test process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler.daemon.scheduler import FETCH, RESYNC
from reconciler.host.hypervisor import Hypervisor
from reconciler.source.settings import SourceConfig
from tests.helpers.loop import Daemons

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from reconciler.daemon.service import Daemon
    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test

PREFIX = "gitpin-"
DAEMONS = Daemons(PREFIX)

IT = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineInstancetype
metadata:
  name: small
spec:
  cpu: {{guest: 1}}
  memory: {{guest: {memory}}}
"""


def pinned_vm(name: str, commit: str) -> str:
    return (
        f"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: {name}\nspec:\n"
        "  runStrategy: Halted\n"
        f"  instancetype: {{kind: VirtualMachineInstancetype, name: small, revisionName: 'git:{commit}'}}\n"
        "  template:\n    spec:\n      domain:\n        devices: {}\n"
    )


@pytest.fixture(autouse=True)
def _teardown() -> Iterator[None]:
    """Close the daemons' connections and remove this module's domains from the shared driver."""
    yield
    DAEMONS.close()


def memory_kib(name: str) -> int:
    with Hypervisor("test:///default") as hv:
        xml = hv.persistent_xml(name)
    return int(xml.split("<memory unit='KiB'>", 1)[1].split("<", 1)[0])


def pinned_repository(repo: GitRepo, name: str) -> str:
    """An instancetype at 64Mi pinned by ``name``, then grown to 128Mi in the same commit
    that pins it: the pin, not the head, decides the VM's memory."""
    repo.write("it.yaml", IT.format(memory="64Mi"))
    first = repo.commit("instancetype at 64Mi")
    repo.write("it.yaml", IT.format(memory="128Mi"))
    repo.write("vms/pinned.yaml", pinned_vm(name, first[:12]))
    return repo.commit("pinned")


def remote(repo: GitRepo, tmp_path: Path) -> SourceConfig:
    bare = tmp_path / "forge.git"
    repo.git("clone", "-q", "--bare", str(repo.path), str(bare))
    return SourceConfig(f"file://{bare}", branch="main")


def test_a_remote_source_reads_pins_from_its_mirror(tmp_path: Path, git_repo: GitRepo) -> None:
    name = f"{PREFIX}remote"
    head = pinned_repository(git_repo, name)
    d: Daemon = DAEMONS.make(git_repo, tmp_path / "s", source=remote(git_repo, tmp_path))
    assert d.source.remote
    d.step({FETCH, RESYNC})
    assert (d.applied, d.reason) == (head, "Succeeded"), d.message
    assert memory_kib(name) == 64 * 1024


def test_a_local_source_reads_pins_from_the_repository(tmp_path: Path, git_repo: GitRepo) -> None:
    name = f"{PREFIX}local"
    head = pinned_repository(git_repo, name)
    d = DAEMONS.make(git_repo, tmp_path / "s")
    assert not d.source.remote
    d.step({RESYNC})
    assert (d.applied, d.reason) == (head, "Succeeded"), d.message
    assert memory_kib(name) == 64 * 1024


def test_a_pin_the_mirror_lacks_fails_the_revision_at_the_vm(tmp_path: Path, git_repo: GitRepo) -> None:
    name = f"{PREFIX}unknown"
    git_repo.write("it.yaml", IT.format(memory="64Mi"))
    git_repo.write("vms/pinned.yaml", pinned_vm(name, "deadbeefdead"))
    head = git_repo.commit("a pin of no commit")
    d = DAEMONS.make(git_repo, tmp_path / "s", source=remote(git_repo, tmp_path))
    d.step({FETCH, RESYNC})
    assert (d.attempted, d.applied, d.reason) == (head, "", "ExpansionFailed")
    bare = tmp_path / "forge.git"
    assert d.message == (
        f"vms/pinned.yaml:7:65: vm/{name}: instancetype small: revision git:deadbeefdead: "
        f"file://{bare}: cannot resolve ref 'deadbeefdead' to a commit"
    )
