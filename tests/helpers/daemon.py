"""`reconciler run` as a subprocess for tests, and the waits around it.

Input: command-line arguments, a state directory, the environment. Output: ``Daemon``
(the process, its JSON log, state.json, its HTTP listener, the sd_notify messages it
sent to a ``NotifySocket``), the ``start`` fixture (daemons killed at the end of the
test), ``wait_for`` (a poll with a hang guard) and ``vm_rows``. Starts processes and
binds a unix socket; changes no host itself.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


BIN = Path(sys.executable).parent / "reconciler"


HANG_GUARD_S = 30.0


LOGS: list[Path] = []  # daemon logs of the running test, shown when a wait times out


def wait_for(what: str, predicate: Callable[[], Any], timeout: float = HANG_GUARD_S) -> Any:
    """Poll until ``predicate`` is truthy; the timeout is a hang guard, not a speed check."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            tails = "\n".join(
                f"--- {p}\n" + "\n".join(p.read_text().splitlines()[-15:]) for p in LOGS if p.exists()
            )
            pytest.fail(f"timed out waiting for {what}\n{tails}")
        time.sleep(0.02)


class NotifySocket:
    """The systemd side of sd_notify: a unix datagram socket collecting messages."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.1)
        self.messages: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            self.messages.extend(data.decode().splitlines())

    def has(self, prefix: str) -> list[str]:
        return [m for m in list(self.messages) if m.startswith(prefix)]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


class Daemon:
    """One `reconciler run` subprocess and what it writes."""

    def __init__(
        self, args: list[str], state_dir: Path, tmp: Path, env: dict[str, str] | None = None
    ) -> None:
        self.state_dir = state_dir
        self.notify = NotifySocket(tmp / f"notify-{time.monotonic_ns()}.sock")
        self.log_path = tmp / f"daemon-{time.monotonic_ns()}.log"
        self.log_lines: list[dict[str, Any]] = []
        LOGS.append(self.log_path)
        full_env = {**os.environ, "NOTIFY_SOCKET": str(self.notify.path), **(env or {})}
        self.proc = subprocess.Popen(
            [str(BIN), "--log-format", "json", "run", "--state-dir", str(state_dir), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=full_env,
        )
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        with self.log_path.open("w") as out:
            for line in self.proc.stderr:
                out.write(line)
                out.flush()
                try:
                    self.log_lines.append(json.loads(line))
                except ValueError:
                    self.log_lines.append({"event": line.strip()})

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in list(self.log_lines) if e.get("event") == name]

    def state(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads((self.state_dir / "state.json").read_text())
        except (OSError, ValueError):
            return {}
        return data

    def wait_applied(self, sha: str) -> dict[str, Any]:
        state: dict[str, Any] = wait_for(
            f"revision {sha[:12]} applied",
            lambda: self.state().get("applied_revision") == sha and self.state(),
        )
        return state

    def wait_attempted(self, sha: str) -> dict[str, Any]:
        return wait_for(  # type: ignore[no-any-return]
            f"revision {sha[:12]} attempted",
            lambda: self.state().get("attempted_revision") == sha and self.state(),
        )

    @property
    def address(self) -> str:
        ev = wait_for("the HTTP listener", lambda: self.events("listening"))
        return str(ev[0]["address"])

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://{self.address}{path}", timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self, *, kill: bool = False) -> int:
        """End the daemon with SIGTERM (it finishes what it is doing, a graceful stop
        waiting out its grace period included), or SIGKILL, and return its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._reader.join(timeout=5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        self.notify.close()
        return code


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def run(*args: str, env: dict[str, str] | None = None, state: str = "state") -> Daemon:
        d = Daemon(list(args), tmp_path / state, tmp_path, env)
        started.append(d)
        return d

    yield run
    for d in started:  # at once: nothing is asserted of it (how SIGTERM ends one is a test's subject)
        d.stop(kill=True)
    LOGS.clear()


def vm_rows(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in state.get("vms", [])}
