"""The transformer registry, ``images`` and ``buildMetadata``, beyond the byte-for-byte
comparisons with ``kubectl kustomize`` (tests/data/overlays/differential).

Covers: every registered transformer declares its fields, their shapes and types, and
a ``run``; a field a transformer declares is accepted and checked strictly (an unknown
key of an ``images`` entry, a number as ``newTag``); ``images`` moves a containerDisk
to a new tag through a ``configurations`` field spec, base to overlay; ``buildMetadata``
annotates origins only from the top kustomization, refuses the options describing
kustomize's own build and unknown options at file:line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler import overlays
from reconciler.errors import OverlayError
from reconciler.overlays import transformers
from reconciler.overlays.cache import OverlayCache
from tests.helpers.files import MemView
from tests.helpers.manifests import VM

if TYPE_CHECKING:
    from reconciler.model import Manifest

VOLUMES = """
  template:
    spec:
      volumes:
      - name: root
        containerDisk:
          image: quay.io/containerdisks/fedora:39
"""
CONFIG = "images:\n- path: spec/template/spec/volumes[]/containerDisk/image\n  kind: VirtualMachine\n"


def build(files: dict[str, str], entry: str = "prod") -> tuple[Manifest, ...]:
    return overlays.build(MemView(files), entry, cache=OverlayCache())


def tree(prod: str, base_extra: str = "") -> dict[str, str]:
    return {
        "base/kustomization.yaml": "resources:\n- vm.yaml\nconfigurations:\n- images.yaml\n" + base_extra,
        "base/images.yaml": CONFIG,
        "base/vm.yaml": VM.format(name="web") + VOLUMES,
        "prod/kustomization.yaml": "resources:\n- ../base\n" + prod,
    }


def test_every_registered_transformer_declares_what_it_reads() -> None:
    assert len(set(transformers.TRANSFORMERS)) == len(transformers.TRANSFORMERS)
    for module in transformers.TRANSFORMERS:
        assert module.FIELDS, module.__name__
        assert set(module.SHAPES) | set(module.TYPES) <= set(module.FIELDS), module.__name__
        assert callable(module.run)
    names = [m.__name__.rsplit(".", 1)[1] for m in transformers.TRANSFORMERS]
    # kustomize 5's order: images after the JSON 6902 patches, before replacements
    assert names.index("patches_json6902") < names.index("images") < names.index("replacements")


def image_of(files: dict[str, str]) -> str:
    (vm,) = build(files)
    return str(vm.obj["spec"]["template"]["spec"]["volumes"][0]["containerDisk"]["image"])


def test_images_move_a_container_disk_in_an_overlay() -> None:
    assert image_of(tree("images:\n- name: quay.io/containerdisks/fedora\n  newTag: '40'\n")) == (
        "quay.io/containerdisks/fedora:40"
    )
    both = tree(
        "images:\n- name: quay.io/containerdisks/fedora\n  newName: mirror.local/fedora\n  digest: sha256:ab\n",
        base_extra="images:\n- name: quay.io/containerdisks/fedora\n  newTag: '40'\n",
    )
    assert image_of(both) == "mirror.local/fedora@sha256:ab"  # the base's tag, then the overlay's digest
    assert image_of(tree("images:\n- name: quay.io/containerdisks/ubuntu\n  newTag: '40'\n")) == (
        "quay.io/containerdisks/fedora:39"
    )


@pytest.mark.parametrize(
    ("prod", "message", "line"),
    [
        ("images:\n- name: fedora\n  newTag: 40\n", "cannot unmarshal number into field images.newTag", 5),
        ("images:\n- name: fedora\n  tag: '40'\n", "unknown field 'tag' in images.0", 5),
        ("images: fedora\n", "images must be a list", 3),
        ("buildMetadata:\n- managedByLabel\n", "buildMetadata: managedByLabel is not supported", 4),
        ("buildMetadata:\n- transformerAnnotations\n", "transformerAnnotations is not supported", 4),
        ("buildMetadata:\n- originAnnotation\n", "unknown option 'originAnnotation'", 4),
    ],
)
def test_bad_images_and_build_metadata_name_the_line(prod: str, message: str, line: int) -> None:
    with pytest.raises(OverlayError) as err:
        build(tree(prod))
    assert message in str(err.value)
    assert (err.value.path, err.value.line) == ("prod/kustomization.yaml", line)


def test_origin_annotations_come_from_the_top_kustomization_only() -> None:
    (vm,) = build(tree("buildMetadata:\n- originAnnotations\n"))
    assert vm.obj["metadata"]["annotations"] == {"config.kubernetes.io/origin": "path: ../base/vm.yaml\n"}
    (vm,) = build(tree("", base_extra="buildMetadata:\n- originAnnotations\n"))
    assert "annotations" not in vm.obj["metadata"]
