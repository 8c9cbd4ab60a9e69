"""The daemon's state directory: held by one daemon, ``state.json`` written after each
reconcile, and a write that fails said and tried again.

Input: the state directory, reconcile statuses, the daemon's clock and metrics. Output:
the document ``state.json`` holds (``doc``; once a status is recorded, its rows are kept
as the status's records, ``vms``, and made into the document's rows only to be written:
a dictionary per VM is not held between reconciles), the lock on the directory, why the last
write failed (``error``: ``/healthz`` says it, ``reconciler_state_file_ok`` is 0 and
``reconciler_state_write_errors_total`` counts it) and when to try again (``retry_at``,
monotonic). I/O: the file system only; a failed write never stops the loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import structlog

from reconciler.errors import ConfigError
from reconciler.model.results import Reason
from reconciler.status import row_document, state_document, write_state_document
from reconciler.status import state as state_store

if TYPE_CHECKING:
    from reconciler.context import Clock
    from reconciler.daemon.metrics import Metrics
    from reconciler.model.results import ReconcileStatus, VMStatus

log = structlog.get_logger("reconciler.daemon")

RETRY_S = 5.0  # a state file that could not be written is tried again after this long


class StateFile:
    def __init__(self, state_dir: str, clock: Clock, metrics: Metrics) -> None:
        self.dir = state_dir
        self.clock = clock
        self.metrics = metrics
        self.doc: dict[str, Any]
        self.doc, self.rebuild = state_store.load(state_dir)  # rebuild: from the domains' marks
        self.vms: tuple[VMStatus, ...] | None = None  # the rows of ``doc`` once a status is recorded
        self.error = ""  # why state.json could not be written ("" = written)
        self.retry_at: float | None = None
        self._lock: state_store.StateLock | None = None

    def lock(self, where: str = "", starting: bool = False) -> bool:
        """Hold the directory; False, logged, when another daemon holds it (``starting``:
        a ``ConfigError`` naming that daemon, ``where`` the config it came from)."""
        try:
            lock = state_store.StateLock(self.dir, now=self.clock.time())
        except state_store.StateDirBusy as err:
            if starting:
                raise ConfigError(str(err), where or "--state-dir") from err
            log.error("cannot take the state directory", error=str(err))
            return False
        except OSError as err:
            log.warning("cannot lock the state directory", state_dir=self.dir, error=str(err))
            return True
        self.release()
        self._lock = lock
        return True

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def moved(self, state_dir: str) -> bool:
        """A reload names another directory: hold it and read its state (False: kept the old one)."""
        held, self._lock = self._lock, None
        old, self.dir = self.dir, state_dir
        if held is not None and not self.lock():
            self.dir, self._lock = old, held
            return False
        if held is not None:
            held.release()
        self.doc, self.rebuild = state_store.load(state_dir)
        self.vms = None
        return True

    def backoff(self, failures: int, source: bool) -> None:
        """Keep the retry back-off (``retry`` in ``state.json``: failures in a row, and
        whether the source failed), so a restart neither resets the delay nor forgets
        the source is failing; written at once."""
        doc = {k: v for k, v in self.doc.items() if k != "retry"}
        self.doc = {**doc, "retry": {"failures": failures, "source": source}} if failures else doc
        self.record()

    def record(self, status: ReconcileStatus | None = None) -> None:
        """Write ``state.json`` (``status`` recorded; None: the last document again). A
        success ends the back-off kept; any other outcome keeps it until the next retry."""
        try:
            if status is not None:
                kept = self.doc.get("retry") if status.reason != Reason.SUCCEEDED else None
                # its rows are made into the document's one at a time as they are written
                doc = state_document(replace(status, vms=()), self.doc) | ({"retry": kept} if kept else {})
                self.doc, self.vms = {k: v for k, v in doc.items() if k != "vms"}, status.vms
            write_state_document(
                self.dir, self.doc, None if self.vms is None else map(row_document, self.vms)
            )
        except OSError as err:
            if not self.error:
                log.error("cannot write the state file", error=str(err), state_dir=self.dir)
            self.error = f"cannot write {self.dir}/state.json: {err.strerror or err}"
            self.metrics.state_write_errors.inc()
            self.retry_at = self.clock.monotonic() + RETRY_S
        else:
            if self.error:
                log.info("state file written again", state_dir=self.dir)
            self.error, self.retry_at = "", None
        self.metrics.state_written.set(0 if self.error else 1)

    def document(self) -> dict[str, Any]:
        """What ``state.json`` holds: ``doc`` with its rows."""
        if self.vms is None:
            return self.doc
        return {**self.doc, "vms": [row_document(v) for v in self.vms]}

    def retry(self, now: float) -> None:
        """Write again when a failed write's retry is due."""
        if self.retry_at is not None and now >= self.retry_at:
            self.record()


def backoff_of(doc: dict[str, Any]) -> tuple[int, bool]:
    """(failures in a row, the source failing) as ``state.json`` kept them."""
    kept = doc.get("retry")
    if not isinstance(kept, dict) or not isinstance(kept.get("failures"), int) or kept["failures"] < 0:
        return 0, False
    return min(kept["failures"], 64), kept.get("source") is True
