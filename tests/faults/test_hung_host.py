"""Issues 32 and 42: health that tells the truth about a frozen libvirtd (real libvirtd),
and a hung libvirtd never hangs the loop. One freeze proves both.

libvirtd frozen (SIGSTOP) accepts connections and answers nothing. ``/healthz`` turns
503 within 10 s (the issue's bound, a hang guard here): each host's libvirt is asked a
cheap question off the loop, and one unanswered for seconds makes the host unreachable
before the loop's keepalive notices. ``/livez`` says so while the loop waits in a call
made as libvirtd froze (until the keepalive drops that connection, within 10 s), and is
200 after: the loop never waits on a connection attempt to a libvirt that does not answer
(the resyncs every 2 s keep trying: reconnecting is bounded). The dropped connection is
noticed (``host connection lost``) and the host stays unreachable in ``/healthz`` while
frozen. Thawed (SIGCONT), the host's answer triggers the reconnect at once, and
``/healthz`` is 200 again.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import TYPE_CHECKING

import pytest

from tests.helpers.daemon import Daemon, wait_for
from tests.helpers.faults import HOST, config, libvirtd_pids, name, vm

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)


def test_a_frozen_libvirtd_turns_healthz_within_seconds_and_never_blocks_the_loop(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    dom = name("frozen")
    own_domains.append(dom)
    git_repo.write("vms/a.yaml", vm(dom, strategy="Halted"))
    sha = git_repo.commit()
    d = start("--config", str(config(tmp_path, str(git_repo.path), extra="intervals: {resync: 2s}\n")))
    d.wait_applied(sha)
    wait_for("healthz 200", lambda: d.get("/healthz")[0] == 200)
    pids = libvirtd_pids()
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        _, body = wait_for("healthz 503", lambda: (r := d.get("/healthz"))[0] == 503 and r, timeout=10.0)
        assert json.loads(body)["hosts"][HOST]["reachable"] is False
        samples = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < 20:  # resyncs every 2 s
            code, live = d.get("/livez")
            samples.append((time.monotonic() - t0, code, json.loads(live)))
            time.sleep(0.5)
        # A reconcile caught in a call when libvirtd froze waits until the keepalive drops
        # the connection, and /livez says so; after it, no connection attempt waits.
        stuck = [s for s in samples if s[1] != 200]
        assert all(s[2]["loop"] == "waiting on a host that does not answer" for s in stuck), stuck
        assert all(s[1] == 200 and s[2]["waiting_s"] < 4 for s in samples if s[0] > 14), samples
        wait_for("the hung host noticed", lambda: d.events("host connection lost"), timeout=60)  # keepalive
        assert d.get("/healthz")[0] == 503  # still unreachable: never counted as answering
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    wait_for("healthz 200 again", lambda: d.get("/healthz")[0] == 200, timeout=60)
    assert d.events("host answers again")
