"""Image references and pull policies (``reconciler.images.reference``).

Covers: names normalized as the container runtime reads them (docker.io and
``library/``, a registry with a port, no tag = ``latest``, a digest alone or after a
tag); malformed references refused with the reason; ``pull_step``: a digest reference
is never resolved, ``Always`` resolves, ``IfNotPresent`` (the default for a tag other
than ``latest``) uses the stored digest when there is one, ``latest`` defaults to
``Always``, ``Never`` uses only what is stored and otherwise names the VM and image.
"""

from __future__ import annotations

import pytest

from reconciler.images.reference import (
    PullStep,
    Reference,
    RegistryError,
    default_policy,
    parse_reference,
    pull_step,
)

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


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


def test_default_policy_is_kubernetes() -> None:
    assert default_policy(parse_reference("a.lan/x:latest")) == "Always"
    assert default_policy(parse_reference("a.lan/x")) == "Always"
    assert default_policy(parse_reference("a.lan/x:1")) == "IfNotPresent"
    assert default_policy(parse_reference(f"a.lan/x@{DIGEST}")) == "IfNotPresent"


@pytest.mark.parametrize(
    ("image", "policy", "stored", "step"),
    [
        (f"a.lan/x@{DIGEST}", "Always", None, PullStep.PINNED),
        (f"a.lan/x@{DIGEST}", "", OTHER, PullStep.PINNED),
        (f"a.lan/x@{DIGEST}", "Never", DIGEST, PullStep.PINNED),
        ("a.lan/x:1", "Always", DIGEST, PullStep.RESOLVE),
        ("a.lan/x:1", "IfNotPresent", DIGEST, PullStep.STORED),
        ("a.lan/x:1", "IfNotPresent", None, PullStep.RESOLVE),
        ("a.lan/x:1", "", DIGEST, PullStep.STORED),
        ("a.lan/x:latest", "", DIGEST, PullStep.RESOLVE),
        ("a.lan/x:1", "Never", DIGEST, PullStep.STORED),
    ],
)
def test_pull_steps(image: str, policy: str, stored: str | None, step: PullStep) -> None:
    assert pull_step(parse_reference(image), policy, stored, "vm/web") is step


@pytest.mark.parametrize("image", ["a.lan/x:1", f"a.lan/x@{DIGEST}"])
def test_never_without_the_image_names_vm_and_image(image: str) -> None:
    with pytest.raises(RegistryError) as err:
        pull_step(parse_reference(image), "Never", None if "@" not in image else OTHER, "vm/web")
    assert str(err.value).startswith(f"vm/web: image {image}: imagePullPolicy is Never")
    assert not err.value.transient


def test_unknown_policy() -> None:
    with pytest.raises(RegistryError, match="imagePullPolicy 'Sometimes' is not one of"):
        pull_step(parse_reference("a.lan/x:1"), "Sometimes", None, "vm/web")
