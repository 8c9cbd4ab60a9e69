"""Issue 42: 200 clients polling ``/api/status`` cannot hurt the loop (a daemon on
``test:///default``: no host is disturbed).

While 200 threads poll as fast as they are answered, a commit is applied, every poller
gets an answer (the document, or a refusal: 429 over the client's rate, 503 over the
connection cap; never a reset nor a timeout), ``/livez`` answers, the refusals are
counted, and the daemon's memory stays within a bound. Time is bench/pollers' subject.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler.daemon.http import BURST, RATE_PER_S
from tests.helpers.faults import metric
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.helpers.daemon import Daemon
    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)
POLLERS = 200
RSS_BOUND_MIB = 200  # the daemon with its listener, whatever the pollers do


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_two_hundred_pollers_get_answers_and_the_commit_is_applied(
    git_repo: GitRepo, start: Callable[..., Daemon]
) -> None:
    git_repo.write("vms/web.yaml", vm_yaml("rtest-pollers-web", strategy="Halted"))
    first = git_repo.commit("web")
    d = start("--repo", str(git_repo.path), "--connect", "test:///default", "--listen", "127.0.0.1:0")
    d.wait_applied(first)
    url = f"http://{d.address}/api/status"
    stop = threading.Event()
    answers: Counter[object] = Counter()
    lock = threading.Lock()

    def poll() -> None:
        while not stop.is_set():
            try:
                with urllib.request.urlopen(url, timeout=30) as r:
                    r.read()
                    code: object = r.status
            except urllib.error.HTTPError as err:
                code = err.code
            except OSError as err:
                code = type(err).__name__
            with lock:
                answers[code] += 1

    threads = [threading.Thread(target=poll, daemon=True) for _ in range(POLLERS)]
    for t in threads:
        t.start()
    try:
        git_repo.write("vms/db.yaml", vm_yaml("rtest-pollers-db", strategy="Halted"))
        second = git_repo.commit("db")
        d.wait_applied(second)
        assert d.get("/livez")[0] == 200
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert set(answers) <= {200, 429, 503}, answers
    assert answers[200] > 0
    # The pollers spent this client address's rate: wait until its bucket is full again
    # (BURST at RATE_PER_S), so that reading the metrics is not refused itself.
    time.sleep(BURST / RATE_PER_S + 1)
    status, text = d.get("/metrics")
    assert status == 200, text
    refused = sum(metric(text, "reconciler_http_refused_total"))
    assert refused == answers[429] + answers[503]
    assert _rss_mib(d.proc.pid) < RSS_BOUND_MIB
