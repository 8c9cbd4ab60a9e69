"""The daemon's memory tuning asks glibc for two malloc arenas, unless the environment
already says how many, and trims freed memory after a reconcile."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from reconciler.daemon import memory


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> int:
            self.calls.append((name, args))
            return 1

        return call


@pytest.fixture
def libc(monkeypatch: pytest.MonkeyPatch) -> FakeLibc:
    fake = FakeLibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: fake if name == "libc.so.6" else None)
    return fake


def test_two_arenas_unless_the_environment_says(libc: FakeLibc, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    memory.limit_arenas()
    assert libc.calls == [("mallopt", (memory.M_ARENA_MAX, 2))]
    libc.calls.clear()
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    memory.limit_arenas()
    assert libc.calls == []  # glibc read the variable at start: it stands


def test_release_trims_the_heap(libc: FakeLibc) -> None:
    memory.release()
    assert libc.calls == [("malloc_trim", (0,))]


def test_no_glibc_is_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    memory.limit_arenas()
    memory.release()
