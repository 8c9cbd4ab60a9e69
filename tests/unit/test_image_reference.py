"""Image references (``reconciler.model.imageref``, ``reconciler.images.reference``).

Covers: names normalized as the container runtime reads them (docker.io and
``library/``, a registry with a port, no tag = ``latest``, a digest alone or after a
tag); malformed references refused with the reason; the names skopeo is given for a
mirror and for a digest; ``RegistryError`` words subject, image and reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.images.reference import Reference, RegistryError, parse_reference

if TYPE_CHECKING:
    from pathlib import Path

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("fedora", Reference("docker.io", "library/fedora", "latest")),
        ("kubevirt/fedora-cloud:40", Reference("docker.io", "kubevirt/fedora-cloud", "40")),
        ("quay.io/containerdisks/fedora:40", Reference("quay.io", "containerdisks/fedora", "40")),
        ("127.0.0.1:5000/disks/tiny:1", Reference("127.0.0.1:5000", "disks/tiny", "1")),
        ("localhost/disks/tiny", Reference("localhost", "disks/tiny", "latest")),
        (f"quay.io/a/b@{DIGEST}", Reference("quay.io", "a/b", "", DIGEST)),
        (f"quay.io/a/b:1@{DIGEST}", Reference("quay.io", "a/b", "1", DIGEST)),
    ],
)
def test_references_normalized(text: str, want: Reference) -> None:
    assert parse_reference(text) == want


def test_text_and_names() -> None:
    ref = parse_reference("127.0.0.1:5000/disks/tiny:1")
    assert ref.text == "127.0.0.1:5000/disks/tiny:1"
    assert ref.at("mirror.lan") == "docker://mirror.lan/disks/tiny:1"
    assert ref.pinned("127.0.0.1:5000", DIGEST) == f"docker://127.0.0.1:5000/disks/tiny@{DIGEST}"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "not an image reference"),
        ("quay.io/a/b@sha256:12", "digest"),
        ("quay.io/a/b@md5:" + "a" * 32, "digest"),
        ("quay.io/A/b:1", "repository"),
        ("quay.io/a/b:-x", "tag"),
        ("quay.io/a/b:", "tag"),
        ("quay.io/a//b", "repository"),
        ("Quay.io/a/b", "repository|lower case"),
        (" quay.io/a", "not an image reference"),
    ],
)
def test_bad_references(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_reference(text)


def test_registry_error_fields_and_words() -> None:
    err = RegistryError("no linux/amd64 image in the manifest list", "a.lan/x:1", "vm/web")
    assert str(err) == "vm/web: image a.lan/x:1: no linux/amd64 image in the manifest list"
    assert (err.reason, err.image, err.subject, err.transient) == (
        "no linux/amd64 image in the manifest list",
        "a.lan/x:1",
        "vm/web",
        False,
    )
    assert str(RegistryError("x\x1b[31m")) == "x\\x1b[31m"  # printable


def test_render_refuses_a_containerdisk_that_names_no_image(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Offline, a reference the image map does not hold is shown as written: unless it
    # cannot be an image name at all, which is an error at its field, the value cut.
    vm = tmp_path / "vm.yaml"
    body = (
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: web}\nspec:\n"
        "  runStrategy: Halted\n  template:\n    spec:\n      domain:\n        memory: {guest: 64Mi}\n        devices: {}\n"
        "      volumes: [{name: root, containerDisk: {image: '%s'}}]\n"
    )
    vm.write_text(body % "quay.io/containerdisks/fedora:40")
    assert cli.main(["render", "-f", str(vm)]) == 0
    capsys.readouterr()
    vm.write_text(body % ("Img" + "x" * 5000))
    assert cli.main(["render", "-f", str(vm)]) != 0
    err = capsys.readouterr().err
    assert "spec.template.spec.volumes[0].containerDisk.image" in err
    assert "not an image reference" in err
    assert "x" * 1000 not in err
