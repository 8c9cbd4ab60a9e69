"""SIGHUP: the daemon's configuration read again and taken over without losing what the
daemon knows.

Input: the running daemon as ``Reloading`` says (the daemon, ``daemon/service.py``, is
one and imports this module) and its config loader. Output: the daemon on the new
configuration, or on the old one when the new one does not load (logged, and said to
systemd). A host that stays (same name and URI) keeps what its runner knows: the
revision it applied, its rows (APPLIED and AGE), its prune guard's memory, its copies,
its connection and its work in flight; a blocked revision is planned again (the new configuration may
unblock it). Never plans or applies anything itself.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol

import structlog

from reconciler.daemon import hoststate
from reconciler.errors import ConfigError
from reconciler.source.mirror import GitSource

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.config.daemon import DaemonConfig, HostEntry
    from reconciler.daemon.listeners import Listeners
    from reconciler.daemon.metrics import Metrics
    from reconciler.daemon.notify import Notifier
    from reconciler.daemon.runner import HostRunner
    from reconciler.daemon.scheduler import Schedule
    from reconciler.daemon.statefile import StateFile

log = structlog.get_logger("reconciler.daemon")


class Announcing(Protocol):
    """What is announced (commit statuses, notifications, the page), on a new configuration."""

    def reload(self, config: DaemonConfig) -> None: ...


class Reloading(Protocol):
    """What a reload needs of the daemon: the parts it replaces (the configuration, the
    source, the hosts, the revision attempted) and those it tells (the rest)."""

    config: DaemonConfig
    source: GitSource
    hosts: list[HostRunner]
    attempted: str

    @property
    def loader(self) -> Callable[[], DaemonConfig] | None: ...

    @property
    def notify(self) -> Notifier: ...

    @property
    def publish(self) -> Announcing: ...

    @property
    def schedule(self) -> Schedule: ...

    @property
    def state(self) -> StateFile: ...

    @property
    def listeners(self) -> Listeners: ...

    @property
    def metrics(self) -> Metrics: ...

    def runner(self, entry: HostEntry) -> HostRunner: ...

    def status_line(self) -> str: ...


def reload(d: Reloading) -> bool:
    """Re-read the config; a bad one is logged and the current one kept."""
    if d.loader is None:
        return False
    d.notify.reloading()
    try:
        new = d.loader()
    except (ConfigError, OSError, ValueError) as err:
        log.error("reload failed: keeping the current configuration", error=str(err))
        d.notify.send("READY=1", f"STATUS=reload failed: {err}")
        return False
    old, d.config = d.config, new
    d.publish.reload(new)
    d.schedule.fetch_interval_s = new.fetch_interval_s
    d.schedule.resync_interval_s = new.resync_interval_s
    for h in d.hosts:
        h.state = hoststate.cleared(h.state)  # planned again under the new configuration
    if (new.source, new.state_dir) != (old.source, old.state_dir):
        if new.state_dir != old.state_dir and not d.state.moved(new.state_dir):
            d.config = dataclasses.replace(d.config, state_dir=old.state_dir)
        d.source = GitSource(new.source, d.config.state_dir)
        d.schedule.remote = d.source.remote
        d.attempted = ""
        d.listeners.watch(d.source)
    if (new.hosts, new.policy) != (old.hosts, old.policy):
        before = {h.name: h for h in d.hosts}
        d.hosts = [carried(d.runner(e), before.pop(e.config.name, None)) for e in new.hosts]
        for gone in before.values():
            gone.shutdown()
            d.metrics.forget_host(gone.name)
        d.attempted = ""
    if new.listen != old.listen and not d.listeners.rebind(new.listen):
        d.config = dataclasses.replace(d.config, listen=old.listen)
    if (new.log_format, new.log_level) != (old.log_format, old.log_level):
        from reconciler.log import setup_logging

        setup_logging(new.log_format, new.log_level)
    log.info("configuration reloaded", config=new.path)
    d.notify.send("READY=1", f"STATUS={d.status_line()}")
    return True


def carried(new: HostRunner, old: HostRunner | None) -> HostRunner:
    """``new`` with what ``old`` (the same host before the reload) knew; a host whose URI
    changed is another host: only its name is the same, nothing is carried."""
    if old is None:
        return new
    if old.entry.uri != new.entry.uri:
        old.shutdown()
        return new
    new.hv, new._unsubscribe = old.hv, old._unsubscribe  # its events call the same daemon
    new.state = hoststate.reloaded(old.state)
    new.inflight = old.inflight
    return new
