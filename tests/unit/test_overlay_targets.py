"""kustomize's quiet cases said aloud, and fields created as kustomize types them.

Covers: a patch (``patches`` strategic merge or JSON 6902, ``patchesJson6902``) whose
target matches nothing builds as kustomize builds it (its output unchanged: kustomize
5.5 applies it to nothing, silently) and is a warning at the target's file:line, in the
build's warnings, ``validate``'s and ``build``'s; a patch that matches is no warning; a
replacement with ``create: true`` into a field that does not exist yet gives it the
type of the source's text, as ``kubectl kustomize`` does ("8080": 8080, "true": true,
"": null, "0x1F": 31, "1.50": 1.5; with a delimiter, the joined text's): the
``replacement-typed-created`` differential case, checked here without kubectl.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reconciler import cli, overlays
from reconciler.model import Severity
from reconciler.source.files import DirView
from tests.helpers.files import MemView
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    import pytest

    from tests.helpers.git import GitRepo

CASE = (
    Path(__file__).resolve().parents[1] / "data" / "overlays" / "differential" / "replacement-typed-created"
)

PATCHES = """\
resources: [vm.yaml]
patches:
  - target: {kind: VirtualMachine, name: web}
    patch: |-
      - op: replace
        path: /spec/runStrategy
        value: Halted
  - target: {kind: VirtualMachine, name: wbe}
    patch: |-
      - op: replace
        path: /spec/runStrategy
        value: Always
  - target: {kind: VirtualMachine, labelSelector: tier=db}
    patch: |-
      metadata:
        annotations: {a: b}
patchesJson6902:
  - target: {version: v1, kind: VirtualMachine, name: nowhere}
    patch: |-
      - op: add
        path: /metadata/labels
        value: {x: y}
"""


def test_a_patch_whose_target_matches_nothing_is_a_warning_at_its_line() -> None:
    view = MemView({"vm.yaml": vm_yaml("web"), "kustomization.yaml": PATCHES})
    built = overlays.build(view, "")
    (vm,) = built
    assert vm.obj["spec"]["runStrategy"] == "Halted"  # the matching patch applied
    assert "annotations" not in vm.obj["metadata"]
    assert isinstance(built, overlays.Built)
    said = [(w.path, w.line, w.message, w.severity) for w in built.warnings]
    assert said == [
        (
            "kustomization.yaml",
            8,
            "patches[1].target matches no resource: the patch changes nothing",
            Severity.WARNING,
        ),
        (
            "kustomization.yaml",
            13,
            "patches[2].target matches no resource: the patch changes nothing",
            Severity.WARNING,
        ),
        (
            "kustomization.yaml",
            18,
            "patchesJson6902[0].target matches no resource: the patch changes nothing",
            Severity.WARNING,
        ),
    ]


def test_validate_and_build_say_it(git_repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    git_repo.write("vm.yaml", vm_yaml("web"))
    git_repo.write("kustomization.yaml", PATCHES)
    git_repo.commit()
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 0
    err = capsys.readouterr().err
    assert "kustomization.yaml:8:5: patches[1].target matches no resource: the patch changes nothing" in err
    assert cli.main(["build", str(git_repo.path)]) == 0
    captured = capsys.readouterr()
    assert "patchesJson6902[0].target matches no resource" in captured.err
    assert "matches no resource" not in captured.out


def test_a_created_field_is_typed_as_kubectl_kustomize_types_it() -> None:
    dst = next(m.obj for m in overlays.build(DirView(str(CASE)), "") if m.name == "dst")
    assert dst["spec"]["new"] == {
        "port": 8080,
        "flag": True,
        "name": "web",
        "nul": None,
        "ratio": 1.5,
        "oct": 15,
        "hex": 31,
        "empty": None,
    }
    assert (dst["spec"]["a"], dst["spec"]["b"], dst["spec"]["c"], dst["spec"]["d"]) == (
        8080,
        8080,
        ",8080",
        "8080,",
    )
