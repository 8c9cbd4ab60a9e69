"""The daemon in the test process (``Daemon.step``), on ``test:///default`` and a clock
the test advances.

Input: a repository, a state directory, configuration overrides, a clock. Output:
``Daemons``: daemons made with nothing due until the test moves the clock, their
connections closed and the shared test driver's domains whose names start with the
given prefix removed at ``close``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from reconciler.config.daemon import DaemonConfig, HostEntry
from reconciler.daemon.notify import Notifier
from reconciler.daemon.service import Daemon
from reconciler.host.hypervisor import Hypervisor
from reconciler.source.settings import SourceConfig
from tests.helpers.clock import FakeClock

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo


class Daemons:
    """The in-process daemons of a test module; ``prefix`` names its domains on the
    shared test driver (``test:///default`` is one state per process)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.made: list[Daemon] = []

    def make(self, repo: GitRepo, state: Path, clock: FakeClock | None = None, **kw: object) -> Daemon:
        """A daemon on ``repo`` (``kw`` replaces fields of its ``DaemonConfig``); its clock
        moves only when the test advances it."""
        config = DaemonConfig(
            source=SourceConfig(str(repo.path)),
            hosts=(HostEntry("test:///default"),),
            state_dir=str(state),
            listen="",
        )
        return self.track(
            Daemon(
                dataclasses.replace(config, **kw),  # type: ignore[arg-type]
                notifier=Notifier({}),
                clock=clock or FakeClock(),
            )
        )

    def track(self, d: Daemon) -> Daemon:
        """Close ``d``'s connections with the others."""
        self.made.append(d)
        return d

    def close(self) -> None:
        """Close every daemon's connections and remove the domains with the prefix."""
        for d in self.made:
            for h in d.hosts:
                h.close()
        self.made.clear()
        with Hypervisor("test:///default") as hv:
            for dom in hv.list_domains():
                if dom.name.startswith(self.prefix):
                    if dom.active:
                        hv.destroy(dom.name)
                    hv.undefine(dom.name)
