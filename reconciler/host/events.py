"""Events: libvirt's event loop, lifecycle events of a host's domains, and the
connection's own close (with keepalive probes), each turned into a callback of words.

Input: callbacks from the daemon. Output: unsubscribe functions. I/O (libvirt's event
thread calls the callbacks).
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

from reconciler.host.connection import Connection, _libvirt

if TYPE_CHECKING:
    from collections.abc import Callable


class Events(Connection):
    """The event part of a host connection."""

    _event_loop_started = False

    @classmethod
    def start_event_loop(cls) -> None:
        """Run libvirt's default event loop in a daemon thread (once per process).

        Must run before the connections that deliver events are opened.
        """
        if cls._event_loop_started:
            return
        lv = _libvirt()
        lv.virEventRegisterDefaultImpl()

        def run() -> None:
            while True:
                lv.virEventRunDefaultImpl()

        threading.Thread(target=run, name="libvirt-events", daemon=True).start()
        cls._event_loop_started = True

    def watch_lifecycle(self, callback: Callable[[str, str, str], None]) -> Callable[[], None]:
        """Call ``callback(domain name, event, detail)`` on lifecycle events; returns an unsubscribe.

        Events and details are words: ("stopped", "crashed"), ("stopped", "shutdown"),
        ("started", "booted"), ("crashed", "panicked"), ("defined", "updated"), ...; also
        ("device-added", alias), ("device-removed", alias), ("metadata-change", type).
        Needs ``start_event_loop()`` before this connection was opened.
        """
        lv = self._libvirt
        events = {
            lv.VIR_DOMAIN_EVENT_DEFINED: ("defined", ("added", "updated", "renamed", "from-snapshot")),
            lv.VIR_DOMAIN_EVENT_UNDEFINED: ("undefined", ("removed", "renamed")),
            lv.VIR_DOMAIN_EVENT_STARTED: (
                "started",
                ("booted", "migrated", "restored", "from-snapshot", "wakeup"),
            ),
            lv.VIR_DOMAIN_EVENT_SUSPENDED: ("suspended", ()),
            lv.VIR_DOMAIN_EVENT_RESUMED: ("resumed", ()),
            lv.VIR_DOMAIN_EVENT_STOPPED: (
                "stopped",
                ("shutdown", "destroyed", "crashed", "migrated", "saved", "failed", "from-snapshot"),
            ),
            lv.VIR_DOMAIN_EVENT_SHUTDOWN: ("shutdown", ("finished", "guest", "host")),
            lv.VIR_DOMAIN_EVENT_PMSUSPENDED: ("pmsuspended", ()),
            lv.VIR_DOMAIN_EVENT_CRASHED: ("crashed", ("panicked", "crashloaded")),
        }

        def on_event(_conn: Any, dom: Any, event: int, detail: int, _opaque: Any) -> None:
            word, details = events.get(event, ("other", ()))
            callback(dom.name(), word, details[detail] if 0 <= detail < len(details) else str(detail))

        def on_device(word: str) -> Callable[..., None]:
            def handler(_conn: Any, dom: Any, what: Any, *_rest: Any) -> None:
                callback(dom.name(), word, str(what) if what is not None else "")

            return handler

        with self._call("register lifecycle events"):
            ids = [self._conn.domainEventRegisterAny(None, lv.VIR_DOMAIN_EVENT_ID_LIFECYCLE, on_event, None)]
            for event_id, word in (
                (lv.VIR_DOMAIN_EVENT_ID_DEVICE_ADDED, "device-added"),
                (lv.VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED, "device-removed"),
                (lv.VIR_DOMAIN_EVENT_ID_METADATA_CHANGE, "metadata-change"),
            ):
                # A driver without this event: its changes wait for the resync.
                with contextlib.suppress(lv.libvirtError):
                    ids.append(self._conn.domainEventRegisterAny(None, event_id, on_device(word), None))

        def unsubscribe() -> None:
            with self._call("deregister lifecycle events"):
                for cb_id in ids:
                    self._conn.domainEventDeregisterAny(cb_id)

        return unsubscribe

    def watch_connection(
        self, on_close: Callable[[str], None], keepalive_s: int = 5, keepalive_count: int = 3
    ) -> bool:
        """Call ``on_close(reason)`` (from the event thread) when the connection drops, and
        probe an idle connection with libvirt keepalives so a dead peer is noticed between
        reconciles. Needs ``start_event_loop()``. False where the driver has no such thing
        (``test:///default`` lives in this process: it cannot drop)."""
        lv = self._libvirt
        reasons = {
            lv.VIR_CONNECT_CLOSE_REASON_ERROR: "error",
            lv.VIR_CONNECT_CLOSE_REASON_EOF: "end of file (the daemon went away)",
            lv.VIR_CONNECT_CLOSE_REASON_KEEPALIVE: "keepalive timeout",
        }

        def closed(_conn: Any, reason: int, _opaque: Any) -> None:
            if reason != lv.VIR_CONNECT_CLOSE_REASON_CLIENT:  # our own close() is no outage
                on_close(reasons.get(reason, str(reason)))

        with self._lock:
            try:
                self._conn.registerCloseCallback(closed, None)
            except lv.libvirtError:
                return False
            with contextlib.suppress(lv.libvirtError):  # a local driver has no keepalive
                self._conn.setKeepAlive(keepalive_s, keepalive_count)
        return True
