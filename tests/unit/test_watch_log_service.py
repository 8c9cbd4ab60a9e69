"""The host watch's view of a local QEMU host's virtlogd (``daemon/watch.py``): which
hosts have a socket to watch, and whether a service listens on it (a real unix socket)."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from reconciler.daemon.watch import accepts, log_socket

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_only_a_local_qemu_host_has_a_log_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert log_socket("qemu:///system") == "/run/libvirt/virtlogd-sock"
    assert log_socket("qemu+unix:///system") == "/run/libvirt/virtlogd-sock"
    assert log_socket("qemu:///session") == "/run/user/1000/libvirt/virtlogd-sock"
    assert log_socket("qemu+ssh://root@far/system") == ""
    assert log_socket("test:///default") == ""
    assert log_socket("test+unix:///default") == ""


def test_accepts_tells_a_listening_socket_from_a_dead_one(tmp_path: Path) -> None:
    path = str(tmp_path / "sock")
    assert not accepts(path)  # nothing there
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen()
        assert accepts(path)
    assert not accepts(path)  # the file left behind, nobody listening (a killed virtlogd)
