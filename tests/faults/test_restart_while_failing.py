"""Issue 42: the daemon killed (SIGKILL) and started again while its git source fails
keeps the source's condition, on ``test:///default`` (no host is disturbed).

A branch deleted on the remote fails every fetch; a webhook receives the events. After
two failures the daemon is killed and started again on the same state directory:

- ``/healthz`` of the new process is never 200 from its first answer to its first
  reconcile and after (the condition is read back from ``state.json``);
- the failure is not announced again, and no resolution is sent (nothing changed);
- the retry delay goes on from where it was (the third failure waits the third
  delay, not the first one again).
"""

from __future__ import annotations

import signal
import subprocess
import threading
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

import pytest

from reconciler.daemon.scheduler import BACKOFF_BASE_S
from tests.helpers.daemon import Daemon, wait_for
from tests.helpers.manifests import vm_yaml
from tests.helpers.receiver import Receiver

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def hook() -> Iterator[Receiver]:
    r = Receiver(default=200)
    yield r
    r.close()


def _failed(hook: Receiver) -> list[tuple[str, bool]]:
    return [(g.json()["kind"], g.json()["resolved"]) for g in hook.requests() if g.json()["kind"] == "failed"]


class _Health:
    """``/healthz`` asked again and again from another thread: every code it answered."""

    def __init__(self, d: Daemon) -> None:
        self.d, self.codes, self.stop = d, list[int](), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        url = f"http://{self.d.address}/healthz"
        while not self.stop.wait(0.05):
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    self.codes.append(resp.status)
            except urllib.error.HTTPError as err:
                self.codes.append(err.code)
            except OSError:
                continue

    def close(self) -> list[int]:
        self.stop.set()
        self.thread.join(timeout=10)
        return self.codes


def test_a_crash_restart_keeps_a_failing_source_failing(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], hook: Receiver
) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    git_repo.git("remote", "add", "origin", str(remote))
    git_repo.write("vms/a.yaml", vm_yaml("rtest-failing-a", strategy="Halted"))
    git_repo.commit()
    git_repo.git("push", "-q", "origin", "main", "main:deploy")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"source: {{repo: 'file://{remote}', branch: deploy}}\nconnect: test:///default\n"
        "listen: 127.0.0.1:0\nintervals: {fetch: 1s, resync: 1h}\n"
        f"notify:\n  webhooks: [{{url: {hook.url}/hook}}]\n"
    )
    d = start("--config", str(config))
    wait_for("applied", lambda: d.state().get("reason") == "Succeeded")
    git_repo.git("push", "-q", "origin", ":deploy")
    wait_for("two source failures", lambda: len(d.events("retry scheduled")) >= 2, timeout=60)
    before = [float(r["in_s"]) for r in d.events("retry scheduled")]
    assert before[:2] == [BACKOFF_BASE_S, 2 * BACKOFF_BASE_S]
    wait_for("the failure announced", lambda: _failed(hook))
    announced = _failed(hook)
    assert announced == [("failed", False)]

    d.signal(signal.SIGKILL)
    d.proc.wait(timeout=30)
    again = start("--config", str(config))
    health = _Health(again)
    retry = wait_for(
        "the first retry of the new process", lambda: again.events("retry scheduled"), timeout=60
    )
    wait_for("/healthz asked after it", lambda: len(health.codes) > 20)
    codes = health.close()
    assert codes, "the new process's /healthz answered"
    assert 200 not in codes, codes
    assert float(retry[0]["in_s"]) == 4 * BACKOFF_BASE_S  # the third failure: the delay goes on
    assert again.events("event")  # the failure seen again by the new process ...
    assert _failed(hook) == announced  # ... and neither announced again nor resolved
