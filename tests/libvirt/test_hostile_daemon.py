"""Hostile input and restartPolicy in the daemon loop, in-process on test:///default.

Covers: a commit that fails to parse (10k nesting) is BuildFailed, not ApplyFailed,
and is not built again by resyncs or lifecycle events until something changes (a new
commit, a configuration reload), while every trigger enforces the last applied
revision (its rows say they are held there); interval fetches and the other timer triggers are
counted in ``reconciler_triggers_total``; ``spec.restartPolicy`` runs the VM under
the mapped run strategy (``Never`` -> Once: started once, left off after a stop;
``Always``: started again; ``OnFailure`` -> RerunOnFailure), and set together with
``runStrategy`` is a RenderFailed revision that defines nothing. The daemon runs on a
clock the test advances. VM names are unique to this module (test:///default is
shared by the test process).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from reconciler.config.daemon import Overrides
from reconciler.config.daemon_file import load_config
from reconciler.daemon.notify import Notifier
from reconciler.daemon.scheduler import LIFECYCLE, REFS, RELOAD, RESYNC
from reconciler.daemon.service import Daemon
from reconciler.host.hypervisor import Hypervisor
from reconciler.source.settings import SourceConfig
from tests.helpers.clock import FakeClock
from tests.helpers.loop import Daemons
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test

PREFIX = "hostile-"
DAEMONS = Daemons(PREFIX)
make, track = DAEMONS.make, DAEMONS.track


@pytest.fixture(autouse=True)
def _teardown() -> Iterator[None]:
    """Close the daemons' connections and remove this module's domains from the shared driver."""
    yield
    DAEMONS.close()


def counter(d: Daemon, kind: str) -> float:
    m = re.search(rf'^reconciler_triggers_total\{{kind="{kind}"\}} (\S+)$', d.metrics.render().decode(), re.M)
    return float(m.group(1)) if m else 0.0


def test_a_revision_that_fails_to_parse_is_build_failed_and_not_built_again(
    tmp_path: Path, git_repo: GitRepo
) -> None:
    git_repo.write("a/vms/web.yaml", vm_yaml(f"{PREFIX}parse"))
    good = git_repo.commit()
    path = tmp_path / "config.yaml"
    path.write_text(f"source: {{repo: {git_repo.path}, path: a}}\nconnect: test:///default\nlisten: false\n")
    overrides = Overrides(state_dir=str(tmp_path / "s"))
    d = Daemon(
        load_config(str(path), overrides),
        loader=lambda: load_config(str(path), overrides),
        notifier=Notifier({}),
        clock=FakeClock(),
    )
    track(d)
    d.step({RESYNC})
    assert d.applied == good
    git_repo.write("a/vms/deep.yaml", "a: " + "[" * 10_000 + "]" * 10_000 + "\n")
    bad = git_repo.commit("10k nested brackets")
    d.step({REFS})
    assert (d.attempted, d.applied, d.reason) == (bad, good, "BuildFailed")
    assert "a/vms/deep.yaml:1:" in d.message
    assert "nested more than" in d.message
    assert d.schedule.retry_at is None  # no back-off retry of a revision that cannot change
    (h,) = d.hosts
    head_plan = h.head_plan
    assert head_plan is not None
    assert head_plan.errors
    for kind in (RESYNC, LIFECYCLE, RESYNC):
        d.step({kind})
        # The last applied revision is enforced at every trigger; the broken head is not
        # built again (the same input would fail the same way).
        assert h.head_plan is head_plan
        assert (d.attempted, d.applied, d.reason) == (bad, good, "BuildFailed")
        assert {r.name: r.sync for r in h.rows} == {f"{PREFIX}parse": "Synced"}
        assert all(r.message.startswith(f"held at {good[:12]}") for r in h.rows)
    d.step({RELOAD})  # a reload is a change: tried again
    assert h.head_plan is not head_plan
    assert d.reason == "BuildFailed"
    git_repo.remove("a/vms/deep.yaml")
    fixed = git_repo.commit("fixed")
    d.step({REFS})
    assert (d.applied, d.reason) == (fixed, "Succeeded")


def test_timer_triggers_are_counted(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("vms/a.yaml", vm_yaml(f"{PREFIX}count"))
    git_repo.commit()
    bare = tmp_path / "forge.git"
    git_repo.git("clone", "-q", "--bare", str(git_repo.path), str(bare))
    clock = FakeClock()
    fetch_s, resync_s = 10.0, 30.0
    source = SourceConfig(f"file://{bare}", branch="main")
    d = make(
        git_repo, tmp_path / "s", clock, source=source, fetch_interval_s=fetch_s, resync_interval_s=resync_s
    )
    assert d.source.remote
    d.step(set())  # at the start both timers are due: one reconcile, both counted
    assert (counter(d, "fetch"), counter(d, "resync"), d.reconciles) == (1, 1, 1)
    clock.advance(fetch_s)  # the fetch interval is due
    d.step(set())
    assert (counter(d, "fetch"), counter(d, "resync")) == (2, 1)
    clock.advance(resync_s)  # both timers due: one reconcile, both counted
    d.step(set())
    assert (counter(d, "fetch"), counter(d, "resync"), d.reconciles) == (3, 2, 2)
    d.poke(RESYNC)  # a queued trigger is counted once, not again as a timer
    clock.advance(resync_s)
    d.step(d.take())
    assert counter(d, "resync") == 3


def restart_policy_vm(name: str, policy: str, extra: str = "") -> str:
    return vm_yaml(name).replace("  runStrategy: Always\n", f"  restartPolicy: {policy}\n{extra}")


def test_restart_policy_runs_under_the_mapped_strategy(tmp_path: Path, git_repo: GitRepo) -> None:
    never, always, onfailure = f"{PREFIX}never", f"{PREFIX}always", f"{PREFIX}onfailure"
    git_repo.write("vms/never.yaml", restart_policy_vm(never, "never"))
    git_repo.write("vms/always.yaml", restart_policy_vm(always, "Always"))
    git_repo.write("vms/onfailure.yaml", restart_policy_vm(onfailure, "ONFAILURE"))
    sha = git_repo.commit()
    d = make(git_repo, tmp_path / "s")
    d.step({RESYNC})
    assert (d.applied, d.reason) == (sha, "Succeeded")
    rows = {r.name: r for r in d.hosts[0].rows}
    assert {n: rows[n].run_strategy for n in (never, always, onfailure)} == {
        never: "Once",
        always: "Always",
        onfailure: "RerunOnFailure",
    }
    with Hypervisor("test:///default") as hv:
        assert all(hv.get_domain(n).active for n in (never, always, onfailure))  # type: ignore[union-attr]
        hv.destroy(never)
        hv.destroy(always)
        hv.shutdown(onfailure)  # a clean power-off by the guest
        assert hv.get_domain(onfailure).state_reason == "shutdown"  # type: ignore[union-attr]
    d.step({LIFECYCLE})
    with Hypervisor("test:///default") as hv:
        assert not hv.get_domain(never).active  # type: ignore[union-attr]  # Once: started once only
        assert hv.get_domain(always).active  # type: ignore[union-attr]
        assert not hv.get_domain(onfailure).active  # type: ignore[union-attr]  # no failure: left off


def test_restart_policy_with_run_strategy_defines_nothing(tmp_path: Path, git_repo: GitRepo) -> None:
    name = f"{PREFIX}both"
    git_repo.write("vms/both.yaml", restart_policy_vm(name, "Never", "  runStrategy: Always\n"))
    git_repo.commit()
    d = make(git_repo, tmp_path / "s")
    d.step({RESYNC})
    assert d.reason == "RenderFailed"
    assert "vms/both.yaml:6:" in d.message
    assert "restartPolicy and runStrategy are mutually exclusive" in d.message
    with Hypervisor("test:///default") as hv:
        assert hv.get_domain(name) is None
