"""The daemon's inputs besides its timers and libvirt's events: a watcher of the local
repository's refs, the HTTP listener (status page, health, metrics, the git webhook) and,
while it serves, a watcher of each host's libvirt (``watch.HostWatch``: a libvirt that
hangs turns ``/healthz`` and ``/livez`` at once, a host that answers again is a trigger).

Input: the source to watch, the listen address, the hosts, and the daemon's callbacks (a
trigger, its health and liveness, its metrics, the status document). Output: triggers,
from their own threads. I/O.
"""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import watchfiles

from reconciler.context import SystemClock
from reconciler.daemon.metrics import CONTENT_TYPE
from reconciler.daemon.scheduler import REFS, WEBHOOK
from reconciler.daemon.watch import HUNG_AFTER_S, HostWatch
from reconciler.errors import SourceError

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.context import Clock
    from reconciler.daemon.http import HttpServer
    from reconciler.daemon.metrics import Metrics
    from reconciler.daemon.runner import HostRunner
    from reconciler.source.mirror import GitSource

log = structlog.get_logger("reconciler.daemon")

Health = tuple[bool, dict[str, Any]]


def _ref_filter(change: watchfiles.Change, path: str) -> bool:
    name = Path(path).name
    if name.endswith(".lock") or "/objects/" in path or "/logs/" in path:
        return False
    return "/refs/" in path or name in ("HEAD", "packed-refs")


class Listeners:
    """Started and stopped by the daemon; every callback runs on another thread."""

    def __init__(
        self,
        poke: Callable[[str], None],
        health: Callable[[], Health],
        live: Callable[[], Health],
        metrics: Metrics,
        secret: Callable[[], bytes],
        status: Callable[[], dict[str, Any]] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._clock = clock = clock if clock is not None else SystemClock()
        self._poke = poke
        self._health = health
        self._live = live
        self._metrics = metrics
        self._secret = secret
        self._status = status
        self._watch_stop: threading.Event | None = None
        self.http: HttpServer | None = None
        self.host_watch = HostWatch(clock.monotonic, poke)

    # -- the refs watcher (a local repository: a commit is a trigger at once) -------------

    def watch(self, source: GitSource) -> None:
        """(Re)start watching ``source``'s refs; a remote is fetched on its timer instead."""
        self.unwatch()
        try:
            git_dir = source.watch_dir()
        except SourceError as err:
            log.error("cannot watch the repository", error=str(err))
            return
        if git_dir is None:
            return
        stop = threading.Event()
        self._watch_stop = stop
        threading.Thread(
            target=self._watch_refs, args=(git_dir, stop), name="watch-refs", daemon=True
        ).start()

    def unwatch(self) -> None:
        self.host_watch.close()  # watched again at the next step (``hosts``)
        if self._watch_stop is not None:
            self._watch_stop.set()
            self._watch_stop = None

    def _watch_refs(self, git_dir: Path, stop: threading.Event) -> None:
        try:
            for _changes in watchfiles.watch(
                git_dir,
                watch_filter=_ref_filter,
                stop_event=stop,
                debounce=400,
                step=100,
                rust_timeout=0,
                raise_interrupt=False,
            ):
                log.debug("refs changed", repo=str(git_dir))
                self._poke(REFS)
        except Exception as err:  # a vanished directory must not kill the daemon silently
            log.error("watching refs stopped", error=str(err), repo=str(git_dir))

    # -- the hosts' libvirt ---------------------------------------------------------------

    def hosts(self, hosts: list[HostRunner]) -> None:
        """While serving: watch these hosts' libvirt; each runner connects only while its
        libvirt answers (a connection attempt never waits out its deadline on the loop)."""
        if self.http is None:
            return
        self.host_watch.sync((h.name, h.entry.uri) for h in hosts)
        for h in hosts:
            h.answers = partial(self.host_watch.answers, h.name)

    def health(self) -> Health:
        """``/healthz``: a host whose libvirt does not answer is unreachable, whatever the
        loop's connection still says (its keepalive notices later)."""
        ok, info = self._health()
        hung = self.host_watch.hung()
        hosts = info.get("hosts", {})
        for name, why in sorted(hung.items()):
            if name in hosts and hosts[name].get("reachable", True):
                hosts[name] = {**hosts[name], "reachable": False, "error": why}
                info["problems"] = [*info.get("problems", []), f"host {name} unreachable: {why}"]
                ok = False
        return ok, info

    def live(self) -> Health:
        """``/livez``: also failing while the loop waits on a libvirt that does not answer."""
        ok, info = self._live()
        hung = self.host_watch.hung()
        if ok and hung and info.get("waiting_s", 0) >= HUNG_AFTER_S:
            return False, {**info, "loop": "waiting on a host that does not answer", "hosts": sorted(hung)}
        return ok, info

    # -- the HTTP listener ----------------------------------------------------------------

    def listen(self, address: str) -> None:
        """Serve ``address`` (nothing when empty). Raises OSError when it cannot bind."""
        from reconciler.daemon.http import Admission, HttpServer

        if not address:
            return
        self.http = HttpServer(
            address,
            secret=self._secret,
            on_push=lambda: self._poke(WEBHOOK),
            health=self.health,
            metrics=lambda: (self._metrics.render(), CONTENT_TYPE),
            on_webhook=lambda result: self._metrics.webhooks.labels(result).inc(),
            live=self.live,
            status=self._status,
            on_dropped=self._metrics.http_dropped.inc,
            on_refused=lambda why: self._metrics.http_refused.labels(why).inc(),
            admission=Admission(self._clock.monotonic),
        )
        self.http.start()
        log.info("listening", address=self.http.address)

    def rebind(self, address: str) -> bool:
        """Bind ``address`` first; only then close the old listener. False (the old one
        kept: health, metrics and the webhook stay where they were) when it cannot bind."""
        previous = self.http
        self.http = None
        try:
            self.listen(address)
        except OSError as err:
            self.http = previous
            log.error(
                "cannot listen on the new address: keeping the old listener",
                address=address,
                kept=previous.address if previous is not None else "",
                error=str(err),
            )
            return False
        if previous is not None:
            threading.Thread(target=previous.close, daemon=True).start()
        return True
