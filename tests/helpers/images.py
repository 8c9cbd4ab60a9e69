"""Image files for tests of the image store: a tiny qcow2 holding a marker, a store in a
temporary directory with a clock the test moves, a file put where downloads land.
``qemu_img(*args)`` runs the real ``qemu-img``."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

from reconciler.images.store import ImageStore
from reconciler.settings.images import ImageStoreConfig

if TYPE_CHECKING:
    from pathlib import Path


def qemu_img(*args: str) -> None:
    subprocess.run(["qemu-img", *args], check=True, capture_output=True)


def tiny_qcow2(path: Path, marker: bytes = b"TINY-IMAGE") -> bytes:
    raw = path.with_suffix(".raw")
    raw.write_bytes(marker + b"\0" * (1 << 20))
    qemu_img("convert", "-q", "-f", "raw", "-O", "qcow2", str(raw), str(path))
    raw.unlink()
    return path.read_bytes()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def store_at(tmp_path: Path, max_bytes: int = 1 << 30, clock: Clock | None = None) -> ImageStore:
    config = ImageStoreConfig(str(tmp_path / "store"), max_bytes, 3600.0)
    return ImageStore(config, clock or Clock())


def incoming(store: ImageStore, data: bytes, name: str = "in") -> Path:
    p = store.partial_dir() / name
    p.write_bytes(data)
    return p
