"""The daemon: triggers in, one reconcile at a time, state out.

Input: a repository, an entry path and a host target. Output: a converged host, the
state file, logs. I/O. Level-based: a trigger (a ref changed on disk, the resync
timer) only means "state may have changed"; triggers coalesce and each reconcile
works on the current head. Never busy-polls: it blocks on an event.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

import structlog
import watchfiles

from reconciler import source
from reconciler.errors import ReconcilerError
from reconciler.hostconfig import HostConfig, load_host_config
from reconciler.hypervisor import Hypervisor
from reconciler.model import Reason, ReconcileStatus
from reconciler.plan import PlanPolicy, format_plan
from reconciler.reconcile import HostTarget, reconcile_once
from reconciler.status import format_table, vm_statuses, write_state

log = structlog.get_logger("reconciler.daemon")


def _ref_filter(change: watchfiles.Change, path: str) -> bool:
    name = Path(path).name
    if name.endswith(".lock"):
        return False
    return "/refs/" in path or name in ("HEAD", "packed-refs")


class Daemon:
    def __init__(
        self,
        repo: str,
        entry: str,
        target: HostTarget,
        state_dir: str,
        ref: str = "HEAD",
        resync_s: float = 600.0,
        out: TextIO = sys.stdout,
    ) -> None:
        self.repo = repo
        self.entry = entry
        self.target = target
        self.state_dir = state_dir
        self.ref = ref
        self.resync_s = resync_s
        self.out = out
        self.trigger = threading.Event()
        self.stopping = threading.Event()
        self.last_status: ReconcileStatus | None = None
        self.reconciles = 0

    # -- triggers ---------------------------------------------------------------------

    def request(self) -> None:
        self.trigger.set()

    def stop(self) -> None:
        self.stopping.set()
        self.trigger.set()

    def _watch_refs(self) -> None:
        git_dir = Path(source.open_repo(self.repo).git_dir)
        for _changes in watchfiles.watch(
            git_dir, watch_filter=_ref_filter, stop_event=self.stopping, debounce=50, step=20, rust_timeout=0
        ):
            log.debug("refs changed", repo=self.repo)
            self.request()

    # -- the loop ---------------------------------------------------------------------

    def reconcile(self, hv: Hypervisor) -> ReconcileStatus:
        t0 = time.monotonic()
        try:
            snapshot = source.read_snapshot(self.repo, self.ref)
        except ReconcilerError as err:
            log.error("source failed", error=str(err))
            status = ReconcileStatus(Reason.SOURCE_FAILED, "", "", time.time(), 0, message=str(err))
            write_state(self.state_dir, status)
            return status
        bound = log.bind(revision=snapshot.commit[:12])
        plan, status = reconcile_once(snapshot, self.entry, self.target, hv, should_stop=self.stopping.is_set)
        host = self.target.policy.host or hv.hostname()
        rows = vm_statuses(plan, status.results, hv.list_domains(), host)
        status = ReconcileStatus(
            reason=status.reason,
            attempted_revision=status.attempted_revision,
            applied_revision=status.applied_revision,
            started_at=status.started_at,
            duration_ms=int((time.monotonic() - t0) * 1000),
            results=status.results,
            vms=rows,
            message=status.message,
        )
        write_state(self.state_dir, status)
        self.reconciles += 1
        if plan.has_changes or plan.errors or self.last_status is None:
            print(format_plan(plan), file=self.out)
            print(file=self.out)
            print(format_table(rows), file=self.out)
            print(file=self.out, flush=True)
        bound.info(
            "reconciled",
            reason=str(status.reason),
            duration_ms=status.duration_ms,
            changes=sum(1 for c in plan.changes if not c.is_noop),
        )
        self.last_status = status
        return status

    def run(self, once: bool = False) -> int:
        watcher = None
        if not once:
            watcher = threading.Thread(target=self._watch_refs, name="watch-refs", daemon=True)
            watcher.start()
        with Hypervisor(self.target.uri) as hv:
            status = self.reconcile(hv)
            if once:
                return 0 if status.reason == Reason.SUCCEEDED else 1
            log.info("watching", repo=self.repo, path=self.entry, connect=self.target.uri)
            while not self.stopping.is_set():
                self.trigger.wait(timeout=self.resync_s)
                self.trigger.clear()
                if self.stopping.is_set():
                    break
                self.reconcile(hv)
        log.info("stopped")
        return 0


def main(args: argparse.Namespace) -> int:
    repo = args.repo or "."
    config = HostConfig()
    if args.host_config:
        config = load_host_config(Path(args.host_config).read_bytes(), args.host_config)
    policy = PlanPolicy(host=config.name, claim_unselected=config.claim_unselected, prune=bool(args.prune))
    target = HostTarget(uri=args.connect or "test:///default", config=config, policy=policy)
    state_dir = args.state_dir or "/var/lib/reconciler"
    daemon = Daemon(repo, args.path or "", target, state_dir, ref=args.branch or "HEAD")

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal", signal=signal.Signals(signum).name)
        daemon.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return daemon.run(once=bool(args.once))
