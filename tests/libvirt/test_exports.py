"""A `kubectl get vm -o yaml` export runs as written (test:///default).

Covers: the export in tests/data/exports (server-populated metadata, status, a
cluster ControllerRevision in ``revisionName``) validates with two warnings, one
naming the ignored server fields and one saying the revision is treated as
unpinned; apply defines the domain with the repository's instancetype and captures
it in the ownership mark; a second plan is a no-op.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.host.hypervisor import Hypervisor
from tests.helpers.domains import drop_domains

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.helpers.git import GitRepo

EXPORT = Path(__file__).resolve().parents[1] / "data" / "exports" / "kubectl-get-vm.yaml"
URI = "test:///default"


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as h:
        yield h
        drop_domains(h, ["web"])


def test_a_kubectl_export_validates_and_applies(
    git_repo: GitRepo, hv: Hypervisor, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(EXPORT, git_repo.path / "web.yaml")
    git_repo.commit("export")
    repo = ["--repo", str(git_repo.path)]
    assert cli.main(["validate", *repo]) == 0
    err = capsys.readouterr().err
    assert "web.yaml:3: VirtualMachine web: server-populated fields ignored (metadata.uid" in err, err
    assert "status): an export from a cluster" in err
    assert "revisionName web-u1.small-8e5e0f3a-1b2c-4d5e-8f90-123456789abc-1 is not in the repository" in err
    assert "treated as unpinned" in err

    assert cli.main(["apply", *repo, "--connect", URI]) == 0
    web = hv.get_domain("web")
    assert web is not None
    assert web.mark is not None
    assert [(r.kind, r.name) for r in web.mark.revisions] == [
        ("VirtualMachineClusterInstancetype", "u1.small")
    ]
    assert "<memory unit='KiB'>2097152</memory>" in web.persistent_xml
    capsys.readouterr()
    assert cli.main(["plan", *repo, "--connect", URI]) == 0
