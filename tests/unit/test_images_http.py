"""DataVolume ``source.http`` downloads (``images/http.py``) against a local HTTP
server in-process (``tests/helpers/imageserver.py``), stored through the real store.

Covers: a download stored under its digest; a broken-off download resumed with a
``Range`` request (the bytes already there not fetched again); redirects followed,
the credentials dropped when the host changes; basic auth (CDI's ``accessKeyId`` /
``secretKey``) and extra headers sent; a declared ``Content-Length`` over the budget
refused before the body is read; gzip and xz served and undone; a 404 named; a
hostile qcow2 (backing file) refused; the progress callback counts the bytes; no
credential in an error.
"""

from __future__ import annotations

import gzip
import lzma
from typing import TYPE_CHECKING

import pytest

from reconciler.images.http import HttpSource
from reconciler.images.sources import Auth, ImageError, ImageRef
from tests.helpers.images import qemu_img, store_at, tiny_qcow2
from tests.helpers.imageserver import ImageServer, image_server

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from reconciler.images.sources import StoredImage
    from reconciler.images.store import ImageStore


@pytest.fixture
def server() -> Iterator[ImageServer]:
    with image_server() as s:
        yield s


def download(
    store: ImageStore, url: str, auth: Auth | None = None, counted: list[int] | None = None
) -> StoredImage:
    source = HttpSource(room=store.room, on_bytes=(counted.append if counted is not None else lambda n: None))
    resolved = source.resolve(ImageRef("http", url), "IfNotPresent", auth)
    fetched = source.fetch(resolved, store.partial_dir(), auth)
    return store.put(fetched, url)


def test_downloaded_and_stored_by_digest(tmp_path: Path, server: ImageServer) -> None:
    data = tiny_qcow2(tmp_path / "t.qcow2")
    server.files["/tiny.qcow2"] = data
    counted: list[int] = []
    got = download(store_at(tmp_path), server.url("/tiny.qcow2"), counted=counted)
    assert got.format == "qcow2"
    assert (tmp_path / "store" / "sha256" / got.file_digest.removeprefix("sha256:")).read_bytes() == data
    assert sum(counted) == len(data)


def test_a_broken_download_resumes_with_a_range_request(tmp_path: Path, server: ImageServer) -> None:
    data = tiny_qcow2(tmp_path / "t.qcow2")
    server.files["/tiny.qcow2"] = data
    server.cut["/tiny.qcow2"] = 100_000
    store = store_at(tmp_path)
    with pytest.raises(ImageError, match="resumes") as broken:
        download(store, server.url("/tiny.qcow2"))
    assert broken.value.transient  # the daemon retries it
    counted: list[int] = []
    got = download(store, server.url("/tiny.qcow2"), counted=counted)
    assert server.requests[-1][1].get("Range") == "bytes=100000-"
    assert sum(counted) == len(data) - 100_000
    assert (tmp_path / "store" / "sha256" / got.file_digest.removeprefix("sha256:")).read_bytes() == data


def test_redirects_are_followed_and_credentials_dropped_across_hosts(
    tmp_path: Path, server: ImageServer
) -> None:
    data = tiny_qcow2(tmp_path / "t.qcow2")
    server.files["/real.qcow2"] = data
    server.redirects["/a"] = "/b"
    server.redirects["/b"] = server.url("/real.qcow2").replace("127.0.0.1", "localhost")
    auth = Auth(username="u", password="p", headers={"X-Token": "t0ken"})
    download(store_at(tmp_path), server.url("/a"), auth)
    by_path = dict(server.requests)
    assert by_path["/b"].get("Authorization")
    assert by_path["/b"].get("X-Token") == "t0ken"
    assert "Authorization" not in by_path["/real.qcow2"]
    assert "X-Token" not in by_path["/real.qcow2"]


def test_too_many_redirects_are_refused(tmp_path: Path, server: ImageServer) -> None:
    server.redirects["/loop"] = "/loop"
    with pytest.raises(ImageError, match=r"cannot download|answered"):
        download(store_at(tmp_path), server.url("/loop"))


def test_basic_auth_and_headers_are_sent_and_never_shown(tmp_path: Path, server: ImageServer) -> None:
    data = tiny_qcow2(tmp_path / "t.qcow2")
    server.files["/private.qcow2"] = data
    server.basic["/private.qcow2"] = ("key-id", "s3cr3t-value")
    with pytest.raises(ImageError) as err:
        download(store_at(tmp_path), server.url("/private.qcow2"), Auth(username="key-id", password="wrong"))
    assert "401" in str(err.value)
    assert "wrong" not in str(err.value)
    auth = Auth(username="key-id", password="s3cr3t-value", headers={"X-Extra": "1"})
    assert "s3cr3t" not in repr(auth)
    download(store_at(tmp_path), server.url("/private.qcow2"), auth)
    assert server.requests[-1][1]["X-Extra"] == "1"


def test_a_declared_size_over_the_budget_is_refused_before_download(
    tmp_path: Path, server: ImageServer
) -> None:
    server.declared["/huge.qcow2"] = 10**12
    store = store_at(tmp_path, max_bytes=50_000_000)
    with pytest.raises(ImageError, match=r"declared size \(1000000000000 bytes\) exceeds"):
        download(store, server.url("/huge.qcow2"))
    assert list(store.partial_dir().iterdir()) == []


@pytest.mark.parametrize("pack", [gzip.compress, lzma.compress], ids=["gzip", "xz"])
def test_compressed_downloads_are_undone(tmp_path: Path, server: ImageServer, pack: object) -> None:
    data = tiny_qcow2(tmp_path / "t.qcow2")
    server.files["/tiny.qcow2.z"] = pack(data)  # type: ignore[operator]
    got = download(store_at(tmp_path), server.url("/tiny.qcow2.z"))
    assert (tmp_path / "store" / "sha256" / got.file_digest.removeprefix("sha256:")).read_bytes() == data


def test_a_missing_file_and_a_hostile_image_are_named(tmp_path: Path, server: ImageServer) -> None:
    with pytest.raises(ImageError, match="404") as missing:
        download(store_at(tmp_path), server.url("/nothing.qcow2"))
    assert not missing.value.transient
    evil = tmp_path / "evil.qcow2"
    qemu_img("create", "-q", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", str(evil))
    server.files["/evil.qcow2"] = evil.read_bytes()
    with pytest.raises(ImageError, match="backing file"):
        download(store_at(tmp_path), server.url("/evil.qcow2"))


def test_only_http_and_https(tmp_path: Path) -> None:
    source = HttpSource(room=lambda: 1 << 30)
    with pytest.raises(ImageError, match="http:// or https://"):
        source.resolve(ImageRef("http", "file:///etc/passwd"), "IfNotPresent", None)
