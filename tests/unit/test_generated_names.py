"""A generated name a VM refers to: the error explains kustomize's hash suffix, and the
shipped name-reference table fixes it, for kustomize and for us alike.

Covers: a VM naming a secretGenerator's Secret by its plain name, with no name-reference
entry, fails at the VM's field with the generated name, why kustomize left the reference
(KubeVirt's fields are not in its table) and a ``configurations:`` snippet for exactly
that field; ``examples/kustomize`` (with ``namerefs.yaml``) builds with the reference
rewritten, the same names as ``kubectl kustomize`` where kubectl is installed, and
validates.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler import cli, manifests, overlays
from reconciler.source.files import DirView

if TYPE_CHECKING:
    import pytest

    from tests.helpers.git import GitRepo

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "kustomize"


def test_a_hashed_name_is_explained_with_the_fix(
    git_repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("vm.yaml", "userdata.yaml"):
        git_repo.write(name, (EXAMPLE / name).read_text())
    kust = (EXAMPLE / "kustomization.yaml").read_text().replace("configurations:\n  - namerefs.yaml\n", "")
    git_repo.write("kustomization.yaml", kust)
    git_repo.commit("no name references")
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("vm.yaml:15:"), out
    assert "Secret 'web-userdata' is in the repository as web-userdata-" in out
    assert "a secretGenerator adds its hash suffix to the name" in out
    assert "KubeVirt's VirtualMachine fields are not among them" in out
    assert (
        "nameReference: [{kind: Secret, fieldSpecs: [{kind: VirtualMachine, "
        "path: spec/template/spec/volumes/cloudInitNoCloud/secretRef/name}]}]" in out
    )
    assert "examples/kustomize/namerefs.yaml lists every KubeVirt field" in out


def test_the_example_table_rewrites_the_reference(git_repo: GitRepo) -> None:
    built = overlays.build(DirView(str(EXAMPLE.parent.parent)), "examples/kustomize")
    (secret,) = [m for m in built if m.kind == "Secret"]
    (vm,) = [m for m in built if m.kind == "VirtualMachine"]
    assert secret.name.startswith("web-userdata-")
    ref = vm.obj["spec"]["template"]["spec"]["volumes"][0]["cloudInitNoCloud"]["secretRef"]["name"]
    assert ref == secret.name
    for path in EXAMPLE.iterdir():
        git_repo.write(path.name, path.read_text())
    git_repo.commit("example")
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 0
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return  # the byte-for-byte comparison with kustomize runs where kubectl is installed
    out = subprocess.run([kubectl, "kustomize", str(EXAMPLE)], capture_output=True, text=True, check=True)
    theirs = [(d.kind, d.name) for d in manifests.parse_documents(out.stdout.encode(), "kustomize")]
    assert theirs == [(m.kind, m.name) for m in built]
