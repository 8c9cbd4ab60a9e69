"""Files the tests read: the fixture tree under tests/data, and an in-memory file view.

Output: ``DATA`` (the path of tests/data) and ``MemView`` (a ``FileView`` over a dict of
texts, for the pure stages). Reads nothing itself.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"


class MemView:
    """A dict-backed FileView: {path: text}; directories are implied."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = {k: v.encode() for k, v in files.items()}

    def read(self, path: str) -> bytes:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]

    def exists(self, path: str) -> bool:
        return path in self.files or self.is_dir(path)

    def is_dir(self, path: str) -> bool:
        return path == "" or any(k.startswith(path + "/") for k in self.files)

    def listdir(self, path: str) -> list[str]:
        prefix = path + "/" if path else ""
        return sorted({k[len(prefix) :].split("/")[0] for k in self.files if k.startswith(prefix)})

    def blob_id(self, path: str) -> str | None:
        data = self.files.get(path)
        return None if data is None else f"{path}:{hash(data)}"
