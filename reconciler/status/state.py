"""The state file is a cache: read it if it is sound, otherwise set it aside and rebuild.

Input: the state directory (and, to rebuild, the ownership marks of live domains).
Output: a ``state.json`` document that has the shape ``status.state_document`` writes,
or ``{}``. I/O (the file system). A file that cannot be read, is not JSON (a
truncated write, a disk that filled up) or has the wrong shape (a hand edit, another
version) never stops the daemon: it is renamed to ``state.json.bad-<UTC time>`` with a
warning (so the history it held can still be read by a person) and the daemon starts
from what the hosts say: the commit in the domains' ownership marks.
"""

from __future__ import annotations

import collections
import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from reconciler.errors import ManifestError
from reconciler.manifests.limits import read_regular_file

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from reconciler.model import LiveDomain

log = structlog.get_logger("reconciler.state")

STATE_FILE = "state.json"

_STR_KEYS = ("attempted_revision", "applied_revision", "reason", "message", "failed_commit")
_NUM_KEYS = ("applied_at", "version")


def shape_problem(doc: object) -> str:
    """Why ``doc`` is not a state document this version can use ("" when it is)."""
    if not isinstance(doc, dict):
        return f"top level is {type(doc).__name__}, not an object"
    for key in _STR_KEYS:
        if key in doc and not isinstance(doc[key], str):
            return f"{key!r} is {type(doc[key]).__name__}, not a string"
    for key in _NUM_KEYS:
        if key in doc and (isinstance(doc[key], bool) or not isinstance(doc[key], int | float)):
            return f"{key!r} is {type(doc[key]).__name__}, not a number"
    last = doc.get("last", {})
    if not isinstance(last, dict):
        return f"'last' is {type(last).__name__}, not an object"
    for key in ("reason", "message"):
        if key in last and not isinstance(last[key], str):
            return f"'last.{key}' is not a string"
    for key in ("vms", "history"):
        items = doc.get(key, [])
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            return f"{key!r} is not a list of objects"
    for key in ("hosts", "rollback"):
        value = doc.get(key, {})
        if not isinstance(value, dict):
            return f"{key!r} is {type(value).__name__}, not an object"
    if not all(isinstance(h, dict) for h in doc.get("hosts", {}).values()):
        return "'hosts' holds a value that is not an object"
    return ""


def read_checked(state_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """(document, problem). A missing file is ``({}, "")``; a bad one is ``({}, why)``."""
    path = Path(state_dir) / STATE_FILE
    try:
        raw = read_regular_file(path)
    except FileNotFoundError:
        return {}, ""
    except OSError as err:
        return {}, f"cannot read it: {err.strerror or err}"
    except ManifestError as err:  # a device, a FIFO, a file past the cap
        return {}, err.message
    if not raw.strip():
        return {}, "it is empty (truncated?)"
    try:
        doc = json.loads(raw)
    except ValueError as err:
        return {}, f"not valid JSON (truncated?): {err}"
    problem = shape_problem(doc)
    return (doc, "") if not problem else ({}, f"wrong shape: {problem}")


def load(state_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], bool]:
    """The state document, and whether it has to be rebuilt (missing or set aside).

    A bad file is moved aside with a warning; this never raises for a bad file.
    """
    doc, problem = read_checked(state_dir)
    if not problem:
        return doc, not doc
    path = Path(state_dir) / STATE_FILE
    aside = path.with_name(f"{STATE_FILE}.bad-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    try:
        path.replace(aside)
        where = str(aside)
    except OSError as err:
        where = ""
        if err.errno != errno.ENOENT:
            log.error("cannot move the bad state file aside", path=str(path), error=str(err))
    log.warning(
        "state file unusable: set aside, rebuilding from the hosts",
        path=str(path),
        problem=problem,
        **({"moved_to": where} if where else {}),
    )
    return {}, True


def applied_from_marks(domains: Iterable[LiveDomain]) -> str:
    """The commit most managed domains were last applied from ("" when none carries a mark)."""
    tally = collections.Counter(d.mark.commit for d in domains if d.mark is not None and d.mark.commit)
    if not tally:
        return ""
    return tally.most_common(1)[0][0]


def host_state(doc: Mapping[str, Any], host: str) -> Mapping[str, Any]:
    hosts = doc.get("hosts", {})
    entry = hosts.get(host, {}) if isinstance(hosts, dict) else {}
    return entry if isinstance(entry, dict) else {}


def host_name_for(uri: str, config: Any, doc: Mapping[str, Any]) -> str:
    """The configured name of the host at ``uri`` (config file first, then the state file's
    record), "" when neither knows it. ``reconciler status --connect URI`` labels rows
    with it, as the daemon does, rather than with libvirt's idea of the host name."""
    for entry in getattr(config, "hosts", ()) or ():
        if entry.uri == uri and entry.config.name:
            return str(entry.config.name)
    hosts = doc.get("hosts", {})
    for name, h in sorted(hosts.items()) if isinstance(hosts, dict) else ():
        if isinstance(h, dict) and h.get("uri") == uri:
            return str(name)
    return ""


LOCK_FILE = "daemon.lock"


class StateDirBusy(Exception):
    """Another daemon holds the state directory."""


class StateLock:
    """An exclusive lock on a state directory (``flock`` on ``daemon.lock``, which names
    its holder): two daemons on one state directory would both apply and overwrite each
    other's history. Held until ``release`` or the process ends (the kernel drops it)."""

    def __init__(self, state_dir: str | os.PathLike[str], *, now: float) -> None:
        self.path = Path(state_dir) / LOCK_FILE
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            writable = True
        except OSError:  # a read-only state directory: the lock still works on an existing file
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            writable = False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self.path.read_text(errors="replace").strip() or "another process"
            os.close(fd)
            raise StateDirBusy(
                f"state directory {state_dir} is in use by another reconciler ({holder}); "
                "two daemons on one state directory would both apply and overwrite each other's "
                "history: stop that one, or give this one its own --state-dir"
            ) from None
        self._fd: int | None = fd
        if writable:
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
            who = f"pid {os.getpid()} on {socket.gethostname()}, since {since}"
            os.ftruncate(fd, 0)
            os.pwrite(fd, who.encode() + b"\n", 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
