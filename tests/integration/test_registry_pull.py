"""containerDisks pulled from a real registry (``reconciler.images.registry``), no libvirtd.

Debian's ``docker-registry`` serves on loopback (plain HTTP, basic auth, TLS with a
self-signed certificate; ``tests/helpers/registry.py``), with images this module builds
and pushes. Covers: a tag resolved to the digest pushed, the disk pulled by digest
byte for byte; a digest reference checked, never re-resolved; a manifest list gives its
linux/amd64 image, one without is refused; ``..`` and a symlink in a layer refused; a
blob the registry serves corrupted is refused; basic auth with a dockerconfigjson Secret
and with ``registries.authFile``, none or a wrong password refused, the password never in
an error, a log line or any output; TLS unverified refused naming ``registries.insecure``,
and with the host listed there it works, as with its CA given (``certConfigMap``); a mirror is tried first, and a mirror without
the image falls back to the registry; a moved tag resolves to its new digest (through
the store's source too, which pulls it by digest); a declared size over the budget
refused before download; a registry that never answers ends at
the deadline, as a transient error.
"""

from __future__ import annotations

import hashlib
import socket
import subprocess
from typing import TYPE_CHECKING

import pytest

from reconciler.images.manifest import platform_digest
from reconciler.images.reference import RegistryError
from reconciler.images.registry import DEFAULT_BUDGET, RegistryResolver
from reconciler.images.registry_source import RegistrySource
from reconciler.images.skopeo import PullAuth, Skopeo, dockerconfigjson
from reconciler.images.sources import ImageRef
from reconciler.settings.registries import Registries
from tests.helpers.registry import (
    Entry,
    Registry,
    disk_layer,
    image_layout,
    index_layout,
    push,
    tar_layer,
    tiny_qcow2,
)
from tests.helpers.registry import dockerconfigjson as config_json

if TYPE_CHECKING:
    from pathlib import Path

NONE = PullAuth()
SUBJECT = "vm/web"


def resolver(
    *insecure: str, max_bytes: int = DEFAULT_BUDGET, skopeo: Skopeo | None = None
) -> RegistryResolver:
    return RegistryResolver(Registries(insecure=insecure), max_bytes, skopeo)


@pytest.fixture(scope="module")
def qcow2(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return tiny_qcow2(tmp_path_factory.mktemp("qcow2"))


@pytest.fixture(scope="module")
def tiny(plain_registry: Registry, qcow2: bytes, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``disks/tiny:1`` on the plain registry; its manifest digest."""
    layout = tmp_path_factory.mktemp("tiny") / "layout"
    digest = image_layout(layout, [disk_layer(qcow2)])
    push(layout, plain_registry, "disks/tiny:1")
    return digest


def pushed(registry: Registry, tmp_path: Path, ref: str, layers: list[bytes]) -> str:
    digest = image_layout(tmp_path / ref.replace("/", "_"), layers)
    push(tmp_path / ref.replace("/", "_"), registry, ref)
    return digest


def test_tag_resolved_and_pulled_by_digest(
    plain_registry: Registry, tiny: str, qcow2: bytes, tmp_path: Path
) -> None:
    r = resolver(plain_registry.host)
    got = r.resolve(f"{plain_registry.host}/disks/tiny:1", NONE, SUBJECT)
    assert (got.digest, got.registry, got.image) == (
        tiny,
        plain_registry.host,
        f"{plain_registry.host}/disks/tiny:1",
    )
    disk = r.fetch(got, tmp_path, NONE, SUBJECT)
    assert disk.path.read_bytes() == qcow2
    assert (disk.format, disk.digest) == ("qcow2", tiny)
    info = subprocess.run(["qemu-img", "info", str(disk.path)], capture_output=True, text=True, check=True)
    assert "file format: qcow2" in info.stdout
    assert [p.name for p in tmp_path.iterdir()] == [f"{tiny[7:23]}-tiny.qcow2"]  # the pull's layout is gone


def test_digest_reference_checked_and_never_resolved(
    plain_registry: Registry, tiny: str, tmp_path: Path
) -> None:
    image = f"docker://{plain_registry.host}/disks/tiny@{tiny}"
    assert resolver(plain_registry.host).resolve(image, NONE).digest == tiny
    # the store's source never asks the registry about a digest reference: no skopeo here
    offline = RegistrySource(Registries(), room=lambda: 1 << 30, skopeo=Skopeo(binary="/nonexistent/skopeo"))
    got = offline.resolve(
        ImageRef("containerDisk", image.removeprefix("docker://"), "Always"), "Always", None
    )
    assert (got.digest, got.size, got.pinned) == (tiny, None, f"{plain_registry.host}/disks/tiny@{tiny}")
    other = "sha256:" + "0" * 64
    with pytest.raises(RegistryError, match=r"the registry has no such image: .*manifest unknown"):
        resolver(plain_registry.host).resolve(f"{plain_registry.host}/disks/tiny@{other}", NONE, SUBJECT)


def test_manifest_lists(plain_registry: Registry, qcow2: bytes, tmp_path: Path) -> None:
    both = index_layout(tmp_path / "both", {"arm64": [disk_layer(b"arm")], "amd64": [disk_layer(qcow2)]})
    push(tmp_path / "both", plain_registry, "disks/multi:1", all_images=True)
    amd64 = platform_digest((tmp_path / "both" / "manifest.json").read_bytes())
    r = resolver(plain_registry.host)
    got = r.resolve(f"{plain_registry.host}/disks/multi:1", NONE, SUBJECT)
    assert got.digest == amd64 != both
    assert r.fetch(got, tmp_path, NONE).path.read_bytes() == qcow2
    index_layout(tmp_path / "arm", {"arm64": [disk_layer(b"arm")]})
    push(tmp_path / "arm", plain_registry, "disks/armonly:1", all_images=True)
    with pytest.raises(RegistryError, match="no linux/amd64 image in the manifest list") as err:
        r.resolve(f"{plain_registry.host}/disks/armonly:1", NONE, SUBJECT)
    assert str(err.value).startswith(f"{SUBJECT}: image {plain_registry.host}/disks/armonly:1: ")


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ([Entry("disk", kind="dir"), Entry("disk/../../tmp/evil.qcow2", b"x")], "climbs out with '..'"),
        (
            [Entry("disk", kind="dir"), Entry("disk/tiny.qcow2", kind="symlink", target="/etc/passwd")],
            "is a link",
        ),
    ],
)
def test_hostile_layers_refused(
    plain_registry: Registry, tmp_path: Path, entries: list[Entry], match: str
) -> None:
    ref = f"disks/hostile-{tmp_path.name}:1"
    pushed(plain_registry, tmp_path, ref, [tar_layer(entries)])
    r = resolver(plain_registry.host)
    got = r.resolve(f"{plain_registry.host}/{ref}", NONE, SUBJECT)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(RegistryError, match=match) as err:
        r.fetch(got, out, NONE, SUBJECT)
    assert "refused: layer 0: entry" in str(err.value)
    assert list(out.iterdir()) == []


def test_corrupted_blob_refused(plain_registry: Registry, tmp_path: Path) -> None:
    layer = disk_layer(b"QFI\xfb" + b"corrupt-me" * 100)
    pushed(plain_registry, tmp_path, "disks/corrupt:1", [layer])
    data = plain_registry.blob_data("sha256:" + hashlib.sha256(layer).hexdigest())
    spoiled = bytearray(data.read_bytes())
    spoiled[600] ^= 0xFF
    data.write_bytes(bytes(spoiled))
    r = resolver(plain_registry.host)
    got = r.resolve(f"{plain_registry.host}/disks/corrupt:1", NONE, SUBJECT)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(RegistryError, match="served bytes that do not match their digest") as err:
        r.fetch(got, out, NONE, SUBJECT)
    assert "disks/corrupt:1" in str(err.value)
    assert not err.value.transient
    assert list(out.iterdir()) == []


def test_basic_auth(
    auth_registry: Registry, qcow2: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert auth_registry.auth is not None
    user, password = auth_registry.auth
    digest = pushed(auth_registry, tmp_path, "private/tiny:1", [disk_layer(qcow2)])
    image = f"{auth_registry.host}/private/tiny:1"
    r = resolver(auth_registry.host)
    secret = dockerconfigjson(config_json(auth_registry), "Secret default/pull")
    assert password not in repr(secret)
    got = r.resolve(image, secret, SUBJECT)
    assert got.digest == digest
    assert r.fetch(got, tmp_path, secret, SUBJECT).path.read_bytes() == qcow2
    # the host's auth file, when the VM names no Secret
    authfile = tmp_path / "auth.json"
    authfile.write_bytes(config_json(auth_registry))
    hosted = RegistryResolver(Registries(insecure=(auth_registry.host,), auth_file=str(authfile)))
    assert (
        hosted.resolve(image, PullAuth(auth_file=str(authfile), origin="registries.authFile")).digest
        == digest
    )
    missing = PullAuth(auth_file=str(tmp_path / "absent.json"), origin="registries.authFile")
    with pytest.raises(RegistryError, match=r"registries.authFile .*absent.json: cannot read it"):
        hosted.resolve(image, missing)
    errors = []
    with pytest.raises(RegistryError, match=r"refused the credentials \(no credentials\)") as err:
        r.resolve(image, NONE, SUBJECT)
    errors.append(str(err.value))
    wrong = dockerconfigjson(config_json(auth_registry, password="not-" + password), "Secret default/pull")
    with pytest.raises(RegistryError, match=r"refused the credentials \(Secret default/pull\)") as err:
        r.resolve(image, wrong, SUBJECT)
    errors.append(str(err.value))
    assert not err.value.transient
    out = capsys.readouterr()
    for text in (*errors, out.out, out.err):
        assert password not in text
        assert f"{user}:{password}" not in text


def test_tls_verified_unless_insecure(tls_registry: Registry, qcow2: bytes, tmp_path: Path) -> None:
    digest = pushed(tls_registry, tmp_path, "disks/tls:1", [disk_layer(qcow2)])
    image = f"{tls_registry.host}/disks/tls:1"
    with pytest.raises(RegistryError) as err:
        resolver().resolve(image, NONE, SUBJECT)
    msg = str(err.value)
    assert "its TLS certificate is not trusted" in msg
    assert f"list {tls_registry.host} under registries.insecure" in msg
    assert "x509" in msg
    r = resolver(tls_registry.host)
    got = r.resolve(image, NONE, SUBJECT)
    assert got.digest == digest
    assert r.fetch(got, tmp_path, NONE).path.read_bytes() == qcow2
    # verified against a CA given (a DataVolume's certConfigMap): no need to list it
    trusted = PullAuth(ca_bundle=tls_registry.certificate)
    got = resolver().resolve(image, trusted, SUBJECT)
    assert got.digest == digest
    (tmp_path / "ca").mkdir()
    assert resolver().fetch(got, tmp_path / "ca", trusted).path.read_bytes() == qcow2


def test_plain_http_refused_unless_insecure(plain_registry: Registry, tiny: str) -> None:
    with pytest.raises(RegistryError, match=r"answers in plain HTTP; list .* under registries.insecure"):
        resolver().resolve(f"{plain_registry.host}/disks/tiny:1", NONE, SUBJECT)


def test_mirror_first_then_registry(
    plain_registry: Registry, tls_registry: Registry, qcow2: bytes, tmp_path: Path
) -> None:
    """The TLS registry is the source, the plain one its mirror."""
    source, mirror = tls_registry.host, plain_registry.host
    at_source = pushed(tls_registry, tmp_path / "s", "disks/mirrored:1", [disk_layer(qcow2)])
    at_mirror = pushed(plain_registry, tmp_path / "m", "disks/mirrored:1", [disk_layer(qcow2, "m.qcow2")])
    r = RegistryResolver(Registries(insecure=(source, mirror), mirrors={source: (mirror,)}))
    got = r.resolve(f"{source}/disks/mirrored:1", NONE, SUBJECT)
    assert (got.digest, got.registry) == (at_mirror, mirror)
    assert r.fetch(got, tmp_path, NONE).path.name.endswith("-m.qcow2")
    only_source = pushed(tls_registry, tmp_path / "o", "disks/unmirrored:1", [disk_layer(qcow2)])
    got = r.resolve(f"{source}/disks/unmirrored:1", NONE, SUBJECT)
    assert (got.digest, got.registry) == (only_source, source)
    assert at_source == only_source


def test_a_moved_tag_resolves_to_its_new_digest(
    plain_registry: Registry, qcow2: bytes, tmp_path: Path
) -> None:
    image = f"{plain_registry.host}/disks/moving:1"
    first = pushed(plain_registry, tmp_path / "1", "disks/moving:1", [disk_layer(qcow2)])
    r = resolver(plain_registry.host)
    assert r.resolve(image, NONE, SUBJECT).digest == first
    moved = pushed(plain_registry, tmp_path / "2", "disks/moving:1", [disk_layer(qcow2, "v2.qcow2")])
    assert r.resolve(image, NONE, SUBJECT).digest == moved != first
    source = RegistrySource(Registries(insecure=(plain_registry.host,)), room=lambda: 1 << 30)
    got = source.resolve(ImageRef("containerDisk", image, "Always"), "Always", None)
    assert (got.digest, got.pinned) == (moved, f"{plain_registry.host}/disks/moving@{moved}")
    assert got.size is not None
    assert source.fetch(got, tmp_path, None).name.endswith("-v2.qcow2")


def test_declared_size_over_budget_refused_before_download(plain_registry: Registry, tiny: str) -> None:
    r = resolver(plain_registry.host, max_bytes=1000)
    with pytest.raises(
        RegistryError, match=r"its layers declare \d+ bytes, over the image store's budget of 1000"
    ):
        r.resolve(f"{plain_registry.host}/disks/tiny:1", NONE, SUBJECT)


def test_a_registry_that_never_answers_ends_at_the_deadline() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections queue; nothing is ever said
        host = f"127.0.0.1:{silent.getsockname()[1]}"
        r = RegistryResolver(Registries(), skopeo=Skopeo(timeout=1))
        with pytest.raises(RegistryError) as err:
            r.resolve(f"{host}/disks/tiny:1", NONE, SUBJECT)
    assert err.value.transient
    assert f"resolving from {host} failed" in str(err.value)
