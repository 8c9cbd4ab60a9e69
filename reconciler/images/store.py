"""The image store of one host: content-addressed, read-only, shared by every VM.

Input: files fetched by a source (``sources.Resolver``), the store's settings
(``settings.images.ImageStoreConfig``), a clock. Output: ``StoredImage`` records; files
kept as ``<dir>/sha256/<hex>`` (mode 0444: one copy, the read-only base of every
VM's qcow2 overlay), and an index (``<dir>/index.json``) of each reference with the
digest it resolved to, when it was resolved and when a plan last used it.

``put`` verifies the digest it is given (a mismatch is an error and nothing is kept),
checks the file (``safety``), and moves it in with one rename; the budget
(``maxBytes``) is checked before a download (``room``) and again before the rename.
``prune`` removes what no domain references, once unused for the grace period. Writers
take ``<dir>/.lock`` (flock), so a CLI pull and the daemon share one store.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.images import safety
from reconciler.images.sources import ImageError, StoredImage
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from reconciler.settings.images import ImageStoreConfig

INDEX = "index.json"
BLOBS = "sha256"
PARTIAL = "partial"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(safety.CHUNK):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


@dataclass(frozen=True, slots=True)
class Entry:
    """One reference of the index."""

    ref: str
    digest: str  # the source's digest
    file_digest: str  # the stored file's
    format: str
    resolved_at: float
    last_used: float


class ImageStore:
    """One host's store (a directory); every method reads the disk again."""

    def __init__(self, config: ImageStoreConfig, clock: Callable[[], float] = time.time) -> None:
        self.root = Path(config.dir)
        self.max_bytes = config.max_bytes
        self.grace_s = config.grace_s
        self.clock = clock

    # -- paths and index

    def blob(self, file_digest: str) -> Path:
        return self.root / BLOBS / file_digest.removeprefix("sha256:")

    def partial_dir(self) -> Path:
        """Where downloads in progress live (kept between attempts: resumable)."""
        d = self.root / PARTIAL
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        return d

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o755)
        with (self.root / ".lock").open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _read_index(self) -> dict[str, dict[str, Any]]:
        try:
            doc = json.loads((self.root / INDEX).read_text())
        except (OSError, ValueError):
            return {}
        refs = doc.get("refs") if isinstance(doc, dict) else None
        return {str(k): v for k, v in refs.items() if isinstance(v, dict)} if isinstance(refs, dict) else {}

    def _write_index(self, refs: dict[str, dict[str, Any]]) -> None:
        tmp = self.root / (INDEX + ".tmp")
        tmp.write_text(json.dumps({"refs": refs}, indent=1, sort_keys=True))
        tmp.replace(self.root / INDEX)

    def entries(self) -> list[Entry]:
        out = []
        for ref, e in sorted(self._read_index().items()):
            try:
                out.append(
                    Entry(
                        ref,
                        str(e["digest"]),
                        str(e["file"]),
                        str(e["format"]),
                        float(e["resolvedAt"]),
                        float(e["lastUsed"]),
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue
        return out

    def _stored(self, e: Entry) -> StoredImage:
        return StoredImage(e.ref, e.digest, str(self.blob(e.file_digest)), e.format, e.file_digest)

    def lookup(self, ref: str) -> StoredImage | None:
        """What the index holds for ``ref``, if its file is still there."""
        found = next((e for e in self.entries() if e.ref == ref), None)
        if found is None or not self.blob(found.file_digest).is_file():
            return None
        return self._stored(found)

    def by_digest(self, digest: str) -> StoredImage | None:
        """A stored image whose source digest (or file digest) is ``digest``."""
        for e in self.entries():
            if digest in (e.digest, e.file_digest) and self.blob(e.file_digest).is_file():
                return self._stored(e)
        return None

    def alias(self, ref: str, stored: StoredImage) -> StoredImage:
        """Index ``ref`` as naming an image the store holds already."""
        with self._locked():
            index = self._read_index()
            now = self.clock()
            index[ref] = {
                "digest": stored.digest,
                "file": stored.file_digest,
                "format": stored.format,
                "resolvedAt": now,
                "lastUsed": now,
            }
            self._write_index(index)
        return StoredImage(ref, stored.digest, stored.path, stored.format, stored.file_digest)

    def touch(self, refs: Iterable[str]) -> None:
        """Mark ``refs`` used now (a plan that names them)."""
        wanted = set(refs)
        if not wanted:
            return
        with self._locked():
            index = self._read_index()
            now = self.clock()
            for ref in wanted & index.keys():
                index[ref]["lastUsed"] = now
            self._write_index(index)

    # -- budget

    def used_bytes(self) -> int:
        d = self.root / BLOBS
        return sum(p.stat().st_size for p in d.iterdir() if p.is_file()) if d.is_dir() else 0

    def room(self) -> int:
        """Bytes the store may still take."""
        return max(0, self.max_bytes - self.used_bytes())

    def check_room(self, size: int | None) -> None:
        """Refuse, before a download, an image whose declared size exceeds the budget."""
        if size is not None and size > self.room():
            raise ImageError(
                f"its declared size ({size} bytes) exceeds what the image store may still take "
                f"({self.room()} of imageStore.maxBytes {self.max_bytes})"
            )

    # -- put

    def put(self, path: Path, ref: str, expected_digest: str = "", source_digest: str = "") -> StoredImage:
        """Keep the file at ``path`` (consumed) for ``ref``.

        ``expected_digest``: the sha256 the fetched bytes must have (a mismatch is an
        error and nothing is kept). ``source_digest``: what the source knows the bytes by
        (default: their sha256 as fetched). The file is decompressed, checked and
        converted (``safety.checked``) before it is moved in.
        """
        try:
            fetched = file_sha256(path)
            if expected_digest and fetched != expected_digest:
                raise ImageError(f"digest mismatch: expected {expected_digest}, the bytes are {fetched}")
            plain, fmt = safety.checked(path, self.room())
            file_digest = file_sha256(plain)
            dest = self.blob(file_digest)
            with self._locked():
                if not dest.is_file():
                    if plain.stat().st_size > self.room():
                        raise ImageError(f"the image exceeds the store's budget of {self.max_bytes} bytes")
                    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
                    plain.chmod(0o444)
                    plain.replace(dest)
                index = self._read_index()
                now = self.clock()
                index[ref] = {
                    "digest": source_digest or fetched,
                    "file": file_digest,
                    "format": fmt,
                    "resolvedAt": now,
                    "lastUsed": now,
                }
                self._write_index(index)
                return StoredImage(ref, source_digest or fetched, str(dest), fmt, file_digest)
        finally:
            path.unlink(missing_ok=True)

    # -- garbage collection

    def prune(self, referenced: Iterable[str], dry_run: bool = False) -> list[str]:
        """Remove the stored files no domain references (``referenced``: paths a domain's
        disks lead to, backing chains followed) and no reference used within the grace
        period; their index entries go with them. Returns the files removed (or that
        would be)."""
        keep = {os.path.realpath(p) for p in referenced}
        with self._locked():
            index = self._read_index()
            now = self.clock()
            recent = {
                str(e.get("file")) for e in index.values() if now - float(e.get("lastUsed", 0)) < self.grace_s
            }
            d = self.root / BLOBS
            gone = []
            for p in sorted(d.iterdir()) if d.is_dir() else ():
                if os.path.realpath(p) in keep or f"sha256:{p.name}" in recent:
                    continue
                gone.append(str(p))
                if not dry_run:
                    p.chmod(0o644)
                    p.unlink()
            if not dry_run and gone:
                names = {Path(g).name for g in gone}
                index = {
                    r: e
                    for r, e in index.items()
                    if str(e.get("file", "")).removeprefix("sha256:") not in names
                }
                self._write_index(index)
            return gone


__all__ = ["Entry", "ImageStore", "file_sha256"]
