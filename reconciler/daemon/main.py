"""``reconciler run``: the daemon as a process, with its signals (TERM/INT stop, HUP
reloads; those caught while the process started, by ``daemon.early``, acted on at once),
its config loader, and every line it writes to stderr as a log line (JSON in JSON
mode: uncaught errors of any thread and warnings too).

Input: parsed ``run`` arguments. Output: the process exit code. The daemon gets the
system's clock here (tests give it one they advance by hand).
"""

from __future__ import annotations

import contextlib
import signal
from typing import TYPE_CHECKING

from reconciler.config.daemon import DaemonConfig, Overrides
from reconciler.config.daemon_file import load_config
from reconciler.context import SystemClock
from reconciler.daemon import early, rollouts
from reconciler.daemon.scheduler import RELOAD
from reconciler.daemon.service import Daemon

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator


def overrides_from_args(args: argparse.Namespace) -> Overrides:
    return Overrides(
        repo=args.repo,
        branch=args.branch,
        path=args.path,
        connect=args.connect,
        host_config=args.host_config,
        state_dir=args.state_dir,
        listen=args.listen,
        prune=args.prune,
        owner=args.owner,
    )


@contextlib.contextmanager
def _signals(daemon: Daemon) -> Iterator[None]:
    def on_stop(signum: int, _frame: object) -> None:
        # Only lock-free work in a handler: a flag and a byte on the self-pipe.
        daemon.stop(signal.Signals(signum).name)

    def on_hup(_signum: int, _frame: object) -> None:
        daemon.poke(RELOAD)

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_hup)
    for signum in early.pending(old[signal.SIGHUP]):  # caught while the process started: acted on now
        (on_hup if signum == signal.SIGHUP else on_stop)(signum, None)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def main(args: argparse.Namespace) -> int:
    overrides = overrides_from_args(args)

    def loader() -> DaemonConfig:
        return load_config(args.config, overrides)

    config = loader()
    if config.path:  # the file's log settings, unless a flag gave another
        from reconciler.log import setup_logging

        fmt = args.log_format if args.log_format != "auto" else config.log_format
        level = args.log_level if args.log_level != "info" else config.log_level
        setup_logging(fmt, level, color=not getattr(args, "no_color", False))
    from reconciler.log import capture_stray_output

    capture_stray_output()
    daemon = Daemon(config, loader, clock=SystemClock())
    daemon.show_plans = bool(args.show_plans)
    with _signals(daemon):
        timeout = getattr(args, "timeout", None)
        return daemon.run(
            once=bool(args.once), timeout_s=rollouts.ONCE_TIMEOUT_S if timeout is None else timeout
        )
