"""Where a field came from, through overlays: the patch, replacement or generator that set it.

Covers: a JSON 6902 patch (inline: the line of its operation in the kustomization), a
strategic merge patch file (the field's line in that file), an inline strategic merge
patch, a replacement (its entry's line) and a generated name a VM refers to (the
generator's kustomization) are recorded on the built document (``Manifest.set_at``),
also where the value set equals the base's; ``manifests.field_position`` names them;
the PR diff names the patch's file:line as the origin of a field it changed, and an
error in a patched value is reported at the patch, not at the untouched base file.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from reconciler import cli, manifests, overlays
from reconciler.source.files import DirView

if TYPE_CHECKING:
    import pytest

    from tests.helpers.git import GitRepo

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        cpu: {cores: 1}
        memory: {guest: 1Gi}
        devices: {}
      volumes:
        - name: init
          cloudInitNoCloud:
            secretRef: {name: web-userdata}
"""
BASE = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [web.yaml]
"""
OVERLAY = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../../base]
configurations: [namerefs.yaml]
secretGenerator:
  - name: web-userdata
    literals: [userdata=hello]
patches:
  - path: halted.yaml
  - target: {kind: VirtualMachine, name: web}
    patch: |-
      - op: replace
        path: /spec/template/spec/domain/memory/guest
        value: {memory}
      - op: replace
        path: /spec/template/spec/domain/cpu/cores
        value: 1
replacements:
  - source: {kind: Secret, name: web-userdata, fieldPath: metadata.name}
    targets:
      - select: {kind: VirtualMachine}
        fieldPaths: [metadata.annotations.userdata]
        options: {create: true}
"""
HALTED = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  runStrategy: Halted
"""
NAMEREFS = """\
nameReference:
  - kind: Secret
    fieldSpecs:
      - kind: VirtualMachine
        path: spec/template/spec/volumes/cloudInitNoCloud/secretRef/name
"""


def repo(git_repo: GitRepo, memory: str = "2Gi") -> str:
    git_repo.write("base/web.yaml", VM)
    git_repo.write("base/kustomization.yaml", BASE)
    git_repo.write("overlays/prod/kustomization.yaml", OVERLAY.replace("{memory}", memory))
    git_repo.write("overlays/prod/halted.yaml", HALTED)
    git_repo.write("overlays/prod/namerefs.yaml", NAMEREFS)
    return git_repo.commit(f"memory {memory}")


def test_each_overlay_records_what_it_set(git_repo: GitRepo) -> None:
    repo(git_repo)
    (web,) = [
        m for m in overlays.build(DirView(str(git_repo.path)), "overlays/prod") if m.kind == "VirtualMachine"
    ]
    kust = "overlays/prod/kustomization.yaml"
    domain = ("spec", "template", "spec", "domain")
    assert web.path == "base/web.yaml"
    assert web.set_at((*domain, "memory", "guest")) == (kust, 12)  # the operation's line
    assert web.set_at((*domain, "cpu", "cores")) == (kust, 15)  # the same value as the base's
    assert web.set_at(("spec", "runStrategy")) == ("overlays/prod/halted.yaml", 0)
    assert web.set_at(("metadata", "annotations", "userdata")) == (kust, 19)
    volume = ("spec", "template", "spec", "volumes", 0, "cloudInitNoCloud", "secretRef", "name")
    generated = web.set_at(volume)  # the generated name
    assert generated is not None
    assert generated[0] == kust
    assert web.set_at((*domain, "devices")) is None  # as the base file has it
    read = DirView(str(git_repo.path)).read
    assert manifests.field_position(web, ("spec", "runStrategy"), read) == ("overlays/prod/halted.yaml", 6, 3)
    assert manifests.field_position(web, (*domain, "devices"), read)[:2] == ("base/web.yaml", 12)


def test_the_pr_diff_and_errors_name_the_patch(git_repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    base = repo(git_repo, memory="2Gi")
    repo(git_repo, memory="4Gi")
    assert (
        cli.main(["diff", base, "--repo", str(git_repo.path), "--path", "overlays/prod", "-o", "json"]) == 2
    )
    (vm,) = json.loads(capsys.readouterr().out)["vms"]
    (change,) = [c for c in vm["changes"] if c["field"] == "memory.guest"]
    assert change["origin"] == "set by overlays/prod/kustomization.yaml:12"
    repo(git_repo, memory="lots")
    assert cli.main(["validate", "--repo", str(git_repo.path), "--path", "overlays/prod"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("overlays/prod/kustomization.yaml:12"), out
