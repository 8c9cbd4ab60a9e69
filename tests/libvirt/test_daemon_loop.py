"""The daemon loop in-process (reconciler/daemon/service.py), stepping it by hand on test:///default.

Covers: triggers coalesce (many pokes, one reconcile); a refs event with an unchanged
head reconciles nothing while resync, lifecycle and reload triggers force a full
reconcile; transient failures back off exponentially and a success resets it;
lifecycle events caused by the daemon's own actions are not triggers while a crash
or a stop by someone else is; reload keeps the running config when the file is
broken and takes the new one when it is good. The daemon runs on a clock the test
advances (nothing becomes due unless the test moves it). VM names are unique to this
module (test:///default is shared by the test process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler.config.daemon import DaemonConfig, HostEntry, Overrides
from reconciler.config.daemon_file import load_config
from reconciler.daemon.notify import Notifier
from reconciler.daemon.scheduler import FETCH, LIFECYCLE, REFS, RELOAD, RESYNC
from reconciler.daemon.service import Daemon
from reconciler.errors import ConfigError
from reconciler.source.settings import SourceConfig
from tests.helpers.clock import FakeClock
from tests.helpers.loop import Daemons
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test

DAEMONS = Daemons("loop-")
make, track = DAEMONS.make, DAEMONS.track


@pytest.fixture(autouse=True)
def _teardown() -> Iterator[None]:
    """Close the daemons' connections and remove this module's domains from the shared driver."""
    yield
    DAEMONS.close()


def test_triggers_coalesce_into_one_reconcile(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("vms/a.yaml", vm_yaml("loop-coalesce"))
    sha = git_repo.commit()
    d = make(git_repo, tmp_path / "s")
    for kind in (REFS, REFS, LIFECYCLE, RESYNC, REFS, LIFECYCLE):
        d.poke(kind)
    d.step(d.take())
    assert d.reconciles == 1
    assert d.applied == sha
    d.step(d.take())  # nothing pending, no timer due
    assert d.reconciles == 1


def test_refs_event_without_a_new_head_does_nothing(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("vms/a.yaml", vm_yaml("loop-refs"))
    git_repo.commit()
    d = make(git_repo, tmp_path / "s")
    d.step({RESYNC})
    assert d.reconciles == 1
    d.step({REFS})  # e.g. another branch moved
    assert d.reconciles == 1
    git_repo.write("vms/a.yaml", vm_yaml("loop-refs", memory="96Mi"))
    moved = git_repo.commit()
    d.step({REFS})
    assert (d.reconciles, d.applied) == (2, moved)
    for forcing in (RESYNC, LIFECYCLE):
        d.step({forcing})
    assert d.reconciles == 4


def test_transient_failures_back_off(tmp_path: Path) -> None:
    config = DaemonConfig(
        source=SourceConfig(f"file://{tmp_path}/no-such-remote.git"),
        hosts=(HostEntry("test:///default"),),
        state_dir=str(tmp_path / "s"),
        listen="",
        resync_interval_s=600.0,  # the back-off is capped by the resync interval
    )
    d = track(Daemon(config, notifier=Notifier({}), clock=FakeClock()))
    delays = []
    for _ in range(4):
        d.step({FETCH})
        delays.append(d.timeout())  # the loop sleeps until the retry
    assert delays == [5, 10, 20, 40]
    assert d.reason == "SourceFailed"
    assert "no-such-remote" in d.message


def test_own_lifecycle_events_are_not_triggers(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("vms/a.yaml", vm_yaml("loop-events"))
    git_repo.commit()
    d = make(git_repo, tmp_path / "s")
    d.step({RESYNC})  # created and started loop-events
    d.take()
    d.on_lifecycle("localhost", "loop-events", "started", "booted")
    d.on_lifecycle("localhost", "loop-events", "defined", "added")
    assert d.take() == set()
    d.on_lifecycle("localhost", "loop-events", "crashed", "panicked")
    assert d.take() == {LIFECYCLE}
    d.on_lifecycle("localhost", "loop-events", "stopped", "destroyed")  # we only started it
    assert d.take() == {LIFECYCLE}
    d.on_lifecycle("localhost", "someone-elses", "started", "booted")
    assert d.take() == {LIFECYCLE}
    d.on_lifecycle("localhost", "loop-events", "suspended", "paused")  # changes nothing we plan
    assert d.take() == set()


def test_reload(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("a/web.yaml", vm_yaml("loop-reload-a"))
    git_repo.write("b/api.yaml", vm_yaml("loop-reload-b"))
    git_repo.commit()
    path = tmp_path / "config.yaml"
    path.write_text(f"source: {{repo: {git_repo.path}, path: a}}\nconnect: test:///default\nlisten: false\n")
    overrides = Overrides(state_dir=str(tmp_path / "s"))
    d = Daemon(
        load_config(str(path), overrides),
        loader=lambda: load_config(str(path), overrides),
        notifier=Notifier({}),
        clock=FakeClock(),
    )
    d.step({RESYNC})
    assert {r.name for r in d.hosts[0].rows} >= {"loop-reload-a"}
    path.write_text(
        path.read_text().replace("path: a", "path: b").replace("listen: false", "listen: nowhere")
    )
    with pytest.raises(ConfigError):
        load_config(str(path), overrides)
    d.step({RELOAD})
    assert d.config.source.path == "a"  # kept
    path.write_text(path.read_text().replace("listen: nowhere", "listen: false"))
    d.step({RELOAD})
    assert d.config.source.path == "b"
    assert "loop-reload-b" in {r.name for r in d.hosts[0].rows}
