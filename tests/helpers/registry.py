"""A real registry for tests: Debian's ``docker-registry`` (CNCF distribution) on loopback.

API:

- ``serve_registry(workdir, *, auth=None, tls=False) -> context manager of Registry``:
  ``docker-registry serve`` on a free loopback port with its storage under ``workdir``;
  ``auth=("user", "password")`` adds htpasswd basic auth (bcrypt, made by ``htpasswd``
  of apache2-utils); ``tls=True`` serves HTTPS with a self-signed certificate for
  ``127.0.0.1`` (made by the ``openssl`` CLI; ``Registry.certificate``, its PEM).
  ``Registry.host`` is ``127.0.0.1:PORT``;
  ``Registry.blob_data(digest)`` is where the registry keeps a blob (to corrupt it).
- ``tar_layer(entries) -> bytes``: a tar stream of ``Entry(name, data=b"", kind="file"|"dir"|
  "symlink"|"hardlink"|"fifo", target="")`` in order.
- ``disk_layer(name="tiny.qcow2", qcow2=None) -> bytes``: the containerDisk layer:
  ``disk/`` holding one file (a 1 MiB qcow2 made by ``qemu-img create`` unless given).
- ``image_layout(path, layers, arch="amd64") -> str``: an image in skopeo's ``dir:``
  layout (OCI manifest, uncompressed layers); returns its manifest digest.
- ``index_layout(path, {arch: layers}) -> str``: an OCI index of one image per arch.
- ``push(layout, registry, ref, *, all_images=False)``: ``skopeo copy dir:LAYOUT
  docker://HOST/REF`` (``--all`` for an index), with the registry's credentials.
- ``dockerconfigjson(registry, password=None) -> bytes``: the ``.dockerconfigjson`` of its
  credentials (another password given: a wrong one).
- Session fixtures (``tests/conftest.py`` imports them): ``plain_registry``,
  ``auth_registry`` (user ``puller``, a random password), ``tls_registry``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import socket
import subprocess
import tarfile
import time
import urllib.request
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from pathlib import Path

REGISTRY_BIN = "/usr/bin/docker-registry"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


@dataclass(frozen=True)
class Registry:
    host: str  # 127.0.0.1:PORT
    storage: Path
    auth: tuple[str, str] | None
    tls: bool

    @property
    def certificate(self) -> str:
        """The PEM of its self-signed certificate (its own CA), with ``tls``."""
        return (self.storage.parent / "registry.crt").read_text()

    def blob_data(self, digest: str) -> Path:
        hexd = digest.removeprefix("sha256:")
        return self.storage / "docker/registry/v2/blobs/sha256" / hexd[:2] / hexd / "data"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _self_signed(workdir: Path) -> tuple[Path, Path]:
    cert, key = workdir / "registry.crt", workdir / "registry.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def _wait_up(host: str, tls: bool, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"docker-registry exited: {log.read_text()[-2000:]}")
        with socket.socket() as s, suppress(OSError):
            s.connect(("127.0.0.1", int(host.rpartition(":")[2])))
            return
        time.sleep(0.05)
    raise RuntimeError("docker-registry did not listen within 30 s")


@contextmanager
def serve_registry(
    workdir: Path, *, auth: tuple[str, str] | None = None, tls: bool = False
) -> Iterator[Registry]:
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    host = f"127.0.0.1:{port}"
    http: dict[str, object] = {"addr": host}
    config: dict[str, object] = {
        "version": 0.1,
        "log": {"level": "error", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(workdir / "storage")}, "delete": {"enabled": True}},
        "http": http,
    }
    if tls:
        cert, key = _self_signed(workdir)
        http["tls"] = {"certificate": str(cert), "key": str(key)}
    if auth is not None:
        htpasswd = workdir / "htpasswd"
        # -i: the password on stdin, never on a command line
        subprocess.run(
            ["htpasswd", "-B", "-i", "-c", str(htpasswd), auth[0]],
            input=auth[1].encode(),
            check=True,
            capture_output=True,
            timeout=60,
        )
        config["auth"] = {"htpasswd": {"realm": "tests", "path": str(htpasswd)}}
    cfg = workdir / "config.yml"
    cfg.write_text(json.dumps(config))  # JSON is YAML
    log = workdir / "registry.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([REGISTRY_BIN, "serve", str(cfg)], stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_up(host, tls, proc, log)
        yield Registry(host, workdir / "storage", auth, tls)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class Entry:
    name: str
    data: bytes = b""
    kind: str = "file"  # file | dir | symlink | hardlink | fifo
    target: str = ""


def tar_layer(entries: Sequence[Entry]) -> bytes:
    buf = io.BytesIO()
    kinds = {
        "file": tarfile.REGTYPE,
        "dir": tarfile.DIRTYPE,
        "symlink": tarfile.SYMTYPE,
        "hardlink": tarfile.LNKTYPE,
        "fifo": tarfile.FIFOTYPE,
    }
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in entries:
            info = tarfile.TarInfo(e.name)
            info.type = kinds[e.kind]
            info.mode = 0o755 if e.kind == "dir" else 0o444
            info.uid = info.gid = 107
            info.linkname = e.target
            if e.kind == "file":
                info.size = len(e.data)
                tar.addfile(info, io.BytesIO(e.data))
            else:
                tar.addfile(info)
    return buf.getvalue()


def tiny_qcow2(workdir: Path, size: str = "1M") -> bytes:
    path = workdir / f"tiny-{os.getpid()}-{time.monotonic_ns()}.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), size], check=True, timeout=60)
    try:
        return path.read_bytes()
    finally:
        path.unlink()


def disk_layer(data: bytes, name: str = "tiny.qcow2") -> bytes:
    return tar_layer([Entry("disk", kind="dir"), Entry(f"disk/{name}", data)])


def _blob(layout: Path, data: bytes) -> dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    (layout / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def _image(layout: Path, layers: Sequence[bytes], arch: str) -> bytes:
    diff_ids = [f"sha256:{hashlib.sha256(layer).hexdigest()}" for layer in layers]
    config = json.dumps(
        {"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    ).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **_blob(layout, config)},
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar", **_blob(layout, x)} for x in layers
        ],
    }
    return json.dumps(manifest).encode()


def image_layout(layout: Path, layers: Sequence[bytes], arch: str = "amd64") -> str:
    layout.mkdir(parents=True, exist_ok=True)
    (layout / "version").write_text("Directory Transport Version: 1.1\n")
    raw = _image(layout, layers, arch)
    (layout / "manifest.json").write_bytes(raw)
    return f"sha256:{hashlib.sha256(raw).hexdigest()}"


def index_layout(layout: Path, images: Mapping[str, Sequence[bytes]]) -> str:
    layout.mkdir(parents=True, exist_ok=True)
    (layout / "version").write_text("Directory Transport Version: 1.1\n")
    entries = []
    for arch, layers in images.items():
        raw = _image(layout, layers, arch)
        digest = hashlib.sha256(raw).hexdigest()
        (layout / f"{digest}.manifest.json").write_bytes(raw)
        entries.append(
            {
                "mediaType": OCI_MANIFEST,
                "digest": f"sha256:{digest}",
                "size": len(raw),
                "platform": {"os": "linux", "architecture": arch},
            }
        )
    raw = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode()
    (layout / "manifest.json").write_bytes(raw)
    return f"sha256:{hashlib.sha256(raw).hexdigest()}"


def dockerconfigjson(registry: Registry, password: str | None = None) -> bytes:
    assert registry.auth is not None
    user, real = registry.auth
    token = base64.b64encode(f"{user}:{password if password is not None else real}".encode()).decode()
    return json.dumps({"auths": {registry.host: {"auth": token}}}).encode()


def push(layout: Path, registry: Registry, ref: str, *, all_images: bool = False) -> None:
    args = ["skopeo", "copy", "--quiet", "--preserve-digests", "--dest-tls-verify=false"]
    authfile = layout.parent / f".{layout.name}.auth.json"
    if registry.auth is not None:
        fd = os.open(authfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(dockerconfigjson(registry))
        args += ["--dest-authfile", str(authfile)]
    if all_images:
        args.append("--all")
    try:
        subprocess.run([*args, f"dir:{layout}", f"docker://{registry.host}/{ref}"], check=True, timeout=120)
    finally:
        authfile.unlink(missing_ok=True)


def manifest_of(registry: Registry, ref: str) -> bytes:
    """The raw manifest the (plain HTTP, anonymous) registry serves for ``ref`` (``repo:tag``)."""
    repo, _, tag = ref.rpartition(":")
    req = urllib.request.Request(
        f"http://{registry.host}/v2/{repo}/manifests/{tag}",
        headers={"Accept": f"{OCI_MANIFEST}, {OCI_INDEX}"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return bytes(resp.read())


# Session fixtures (imported by tests/integration/conftest.py): one registry of each kind.
@pytest.fixture(scope="session")
def plain_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with serve_registry(tmp_path_factory.mktemp("registry-plain")) as reg:
        yield reg


@pytest.fixture(scope="session")
def auth_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    password = "pw-" + os.urandom(12).hex()  # noticed if it ever shows in any output
    with serve_registry(tmp_path_factory.mktemp("registry-auth"), auth=("puller", password)) as reg:
        yield reg


@pytest.fixture(scope="session")
def tls_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with serve_registry(tmp_path_factory.mktemp("registry-tls"), tls=True) as reg:
        yield reg
