"""Two loops, one truth: the daemon in-process on test:///default, on a clock the test advances.

Covers: while the head cannot be applied (a misspelt field, ``restartPolicy`` beside
``runStrategy``, a rollback refused by ``allowRollback: false``, a history unrelated to
the applied one under the default policy, a source that fails) the last applied
revision is enforced: a VM stopped out of band is started again at the next trigger;
every row is Synced to the applied revision and says it is held there; ``state.json``,
``/healthz`` and ``status`` say both revisions (enforced, blocked with why); the
metrics count the VMs Synced. A reload keeps what the daemon knows of a host (its
applied revision, its rows' APPLIED and AGE, its connection). The state directory is
the daemon's alone (a second one refuses to start, naming the first); a state file
that cannot be written is said in ``/healthz`` and the metrics and written again
later. A rollback confirmed that hits a failed change leaves the applied revision,
and with its confirmation removed that revision is enforced again. ``/livez`` fails
when the loop has not moved for two minutes. ``--show-plans`` prints a plan with errors once, not at every resync; equal
outcomes fold into one history entry. VM names are unique to this module.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from reconciler.config.daemon import Overrides, Policy
from reconciler.config.daemon_file import load_config
from reconciler.daemon.notify import Notifier
from reconciler.daemon.scheduler import LIFECYCLE, REFS, RELOAD, RESYNC
from reconciler.daemon.service import LOOP_STUCK_S, Daemon
from reconciler.errors import ConfigError
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from reconciler.status import state as state_store
from reconciler.status import status_document, summary_lines
from tests.helpers.clock import FakeClock
from tests.helpers.faults import metric
from tests.helpers.loop import Daemons
from tests.helpers.manifests import vm_yaml
from tests.helpers.schemas import check

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test

PREFIX = "loops-"
DAEMONS = Daemons(PREFIX)
make = DAEMONS.make


@pytest.fixture(autouse=True)
def _teardown() -> Iterator[None]:
    yield
    DAEMONS.close()


def destroy(name: str) -> None:
    with Hypervisor("test:///default") as hv:
        hv.destroy(name)
        assert hv.state(name) == PowerState.SHUTOFF


def state_of(name: str) -> PowerState:
    with Hypervisor("test:///default") as hv:
        return hv.state(name)


def assert_held(d: Daemon, good: str, bad: str, reason: str) -> None:
    """Both truths: the applied revision enforced, the newer one blocked with why."""
    (h,) = d.hosts
    assert (d.attempted, d.applied, d.reason) == (bad, good, reason)
    assert h.rows
    assert {r.sync for r in h.rows} == {"Synced"}
    assert all(r.message.startswith(f"held at {good[:12]} (revision {bad[:12]} {reason})") for r in h.rows)
    held = d.state.doc["hosts"][h.name]["held"]
    assert (held["enforced"], held["blocked"], held["reason"]) == (good, bad, reason)
    ok, body = d._health()
    assert not ok
    assert body["held"][h.name]["enforced"] == good
    assert any(f"newer revision {bad[:12]} blocked ({reason})" in line for line in summary_lines(d.state.doc))
    synced = metric(d.metrics.render().decode(), "reconciler_vms", host=h.name, sync="Synced")
    assert synced == [float(len(h.rows))]
    document = status_document(d.state.doc, h.rows, ())  # `status -o json` says both as well
    check(document, "status")
    assert document["hosts"][h.name]["held"]["blocked"] == bad


@pytest.mark.parametrize(
    "broken",
    [
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: loops-typo}\n"
        "spec:\n  runStratgy: Always\n  template: {spec: {domain: {devices: {}}}}\n",
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: loops-both}\n"
        "spec:\n  runStrategy: Always\n  template: {spec: {restartPolicy: Always, domain: {devices: {}}}}\n",
    ],
    ids=["misspelt-field", "restartPolicy-beside-runStrategy"],
)
def test_a_bad_head_keeps_crash_recovery(tmp_path: Path, git_repo: GitRepo, broken: str) -> None:
    git_repo.write("vms/a.yaml", vm_yaml(f"{PREFIX}bad-head"))
    good = git_repo.commit()
    d = make(git_repo, tmp_path / "s")
    d.step({RESYNC})
    assert d.applied == good
    git_repo.write("vms/b.yaml", broken)
    bad = git_repo.commit("broken")
    d.step({REFS})
    reason = d.reason
    assert reason in ("ExpansionFailed", "RenderFailed", "BuildFailed")
    assert_held(d, good, bad, reason)
    destroy(f"{PREFIX}bad-head")  # QEMU killed, or virsh destroy: the VM must come back
    d.step({LIFECYCLE})
    assert state_of(f"{PREFIX}bad-head") == PowerState.RUNNING
    assert_held(d, good, bad, reason)
    git_repo.remove("vms/b.yaml")
    fixed = git_repo.commit("fixed")
    d.step({REFS})
    assert (d.applied, d.reason) == (fixed, "Succeeded")
    assert "held" not in d.state.doc["hosts"][d.hosts[0].name]


def test_a_refused_rollback_keeps_enforcing_and_a_reload_keeps_what_is_known(
    tmp_path: Path, git_repo: GitRepo
) -> None:
    git_repo.write("vms/a.yaml", vm_yaml(f"{PREFIX}rollback"))
    old = git_repo.commit("old")
    git_repo.write("vms/a.yaml", vm_yaml(f"{PREFIX}rollback", memory="96Mi"))
    git_repo.commit("new")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"source: {{repo: {git_repo.path}}}\nconnect: test:///default\nlisten: false\n"
        "policy: {allowRollback: false}\n"
    )
    overrides = Overrides(state_dir=str(tmp_path / "s"))
    clock = FakeClock()
    d = DAEMONS.track(
        Daemon(
            load_config(str(config), overrides),
            loader=lambda: load_config(str(config), overrides),
            notifier=Notifier({}),
            clock=clock,
        )
    )
    d.step({RESYNC})
    applied = d.applied
    (h,) = d.hosts
    stamped = {r.name: r.applied_at for r in h.rows}
    assert stamped[f"{PREFIX}rollback"] > 0
    git_repo.git("reset", "-q", "--hard", old)  # a force-push back
    d.step({REFS})
    assert_held(d, applied, old, "RollbackRefused")
    destroy(f"{PREFIX}rollback")
    d.step({LIFECYCLE})
    assert state_of(f"{PREFIX}rollback") == PowerState.RUNNING
    # A reload (another policy setting: the hosts are made anew) keeps what was known.
    clock.advance(60)
    config.write_text(
        config.read_text().replace("allowRollback: false", "allowRollback: false, selfHeal: true")
    )
    d.step({RELOAD})
    (h,) = d.hosts
    assert {r.name: r.applied_at for r in h.rows} == stamped  # APPLIED and AGE stay
    assert h.applied == applied
    assert_held(d, applied, old, "RollbackRefused")


def test_an_unrelated_history_is_refused_unless_confirmed(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("vms/a.yaml", vm_yaml(f"{PREFIX}unrelated"))
    git_repo.commit()
    d = make(git_repo, tmp_path / "s", policy=Policy())  # allowRollback: true (the default)
    d.step({RESYNC})
    applied = d.applied
    git_repo.git("checkout", "-q", "--orphan", "other")
    git_repo.write("vms/a.yaml", vm_yaml(f"{PREFIX}unrelated", memory="96Mi"))
    other = git_repo.commit("another repository's history")
    git_repo.git("branch", "-q", "-M", "other", "main")
    d.step({REFS})
    assert_held(d, applied, other, "RollbackRefused")
    assert "unrelated" in d.message
    d.step({RESYNC})
    assert d.applied == applied
    # Confirmed: applied.
    d.config = replace(d.config, policy=Policy(confirm_rollback=other[:12]))
    d.step({RESYNC})
    assert (d.applied, d.reason) == (other, "Succeeded")


def test_a_failing_source_keeps_enforcing(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("vms/a.yaml", vm_yaml(f"{PREFIX}source"))
    good = git_repo.commit()
    d = make(git_repo, tmp_path / "s")
    d.step({RESYNC})
    destroy(f"{PREFIX}source")
    hidden = git_repo.path / ".git" / "refs" / "heads" / "main"
    saved = hidden.read_text()
    hidden.unlink()  # the branch cannot be read: the source fails
    try:
        d.step({LIFECYCLE})
        assert d.reason == "SourceFailed"
        assert state_of(f"{PREFIX}source") == PowerState.RUNNING
        assert d.applied == good
    finally:
        hidden.write_text(saved)


def test_one_daemon_per_state_directory(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("vms/a.yaml", vm_yaml(f"{PREFIX}lock"))
    git_repo.commit()
    (tmp_path / "s").mkdir()
    first = make(git_repo, tmp_path / "s")
    assert first.state.lock(starting=True)
    second = make(git_repo, tmp_path / "s")
    with pytest.raises(ConfigError, match=rf"in use by another reconciler \(pid {os.getpid()} on "):
        second.state.lock(starting=True)
    first.close_hosts()  # stopping releases it
    assert second.state.lock(starting=True)
    second.close_hosts()


def test_a_state_file_that_cannot_be_written_is_said_and_written_again(
    tmp_path: Path, git_repo: GitRepo
) -> None:
    git_repo.write("vms/a.yaml", vm_yaml(f"{PREFIX}state"))
    git_repo.commit()
    clock = FakeClock()
    d = make(git_repo, tmp_path / "s", clock)
    d.step({RESYNC})
    target = tmp_path / "s" / state_store.STATE_FILE
    target.unlink()
    (target / "in-the-way").mkdir(parents=True)  # a real failure: state.json cannot be replaced
    d.step({RESYNC})
    ok, body = d._health()
    assert not ok
    assert any(p.startswith("state file: cannot write") for p in body["problems"])
    text = d.metrics.render().decode()
    assert "reconciler_state_file_ok 0.0" in text
    assert "reconciler_state_write_errors_total 1.0" in text
    assert d.timeout() <= 5.0  # the loop wakes to write it again
    clock.advance(5)
    d.step(set())  # still in the way: tried, not logged again
    assert not d._health()[0]
    (target / "in-the-way").rmdir()
    target.rmdir()
    clock.advance(5)
    d.step(set())
    assert d._health()[0]
    assert "reconciler_state_file_ok 1.0" in d.metrics.render().decode()
    assert json.loads(target.read_text())["applied_revision"] == d.applied


def test_show_plans_prints_a_plan_with_errors_once(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("vms/a.yaml", vm_yaml(f"{PREFIX}show"))
    git_repo.commit()
    out = io.StringIO()
    d = make(git_repo, tmp_path / "s")
    d.out, d.show_plans = out, True
    d.step({RESYNC})
    git_repo.write(
        "vms/b.yaml", "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: x}\nspec: [\n"
    )
    git_repo.commit("broken")
    d.step({REFS})
    printed = out.getvalue()
    assert printed.count("nothing will be applied") + printed.count("error:") >= 1
    for _ in range(3):
        d.step({RESYNC})
    assert out.getvalue() == printed  # the same error is not printed again at every resync
    history = d.state.doc["history"]
    assert (history[0]["result"], history[0]["count"]) == ("BuildFailed", 4)


NO_MEMORY = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {{name: {name}}}
spec:
  runStrategy: Always
  template: {{spec: {{domain: {{devices: {{}}}}}}}}
"""


def test_a_removed_confirm_rollback_after_a_failed_rollback_keeps_enforcing(
    tmp_path: Path, git_repo: GitRepo
) -> None:
    """The rollback, confirmed, does not apply (a VM of it asks for no memory: the revision
    has an error), so the applied revision stays; the confirmation removed, the rollback
    is refused again and the applied revision is enforced: a VM stopped out of band is
    started again, in each of the three states."""
    vm = f"{PREFIX}confirm"
    git_repo.write("vms/a.yaml", vm_yaml(vm))
    old = git_repo.commit("old")
    git_repo.write("vms/a.yaml", vm_yaml(vm, memory="96Mi"))
    git_repo.commit("new")
    d = make(git_repo, tmp_path / "s", policy=Policy(allow_rollback=False))
    d.step({RESYNC})
    applied = d.applied
    git_repo.git("reset", "-q", "--hard", old)  # a force-push back, with a VM in error
    git_repo.write("vms/b.yaml", NO_MEMORY.format(name=f"{PREFIX}confirm-b"))
    back = git_repo.commit("back, and a VM that asks for no memory")
    d.step({REFS})
    assert_held(d, applied, back, "RollbackRefused")
    d.config = replace(d.config, policy=Policy(allow_rollback=False, confirm_rollback=back[:12]))
    d.step({RESYNC})
    assert_held(d, applied, back, "RenderFailed")  # confirmed, and not applied
    destroy(vm)
    d.step({LIFECYCLE})
    assert state_of(vm) == PowerState.RUNNING
    d.config = replace(d.config, policy=Policy(allow_rollback=False))  # the confirmation removed
    d.step({RESYNC})
    assert (d.attempted, d.applied, d.reason) == (back, applied, "RollbackRefused")
    destroy(vm)
    d.step({LIFECYCLE})
    assert state_of(vm) == PowerState.RUNNING  # crash recovery goes on at the applied revision
    assert_held(d, applied, back, "RollbackRefused")


def test_livez_fails_when_the_loop_is_stuck(tmp_path: Path, git_repo: GitRepo) -> None:
    """``/livez`` answers from the loop's last sign of life on the injected clock: 503 once
    the loop has not moved for ``LOOP_STUCK_S`` (a libvirt call that never returns), 200
    as soon as it moves again."""
    git_repo.write("vms/a.yaml", vm_yaml(f"{PREFIX}livez"))
    git_repo.commit()
    clock = FakeClock()
    d = make(git_repo, tmp_path / "s", clock)
    d.step({RESYNC})
    d._looping = True  # as run() says while its loop turns
    assert d._live() == (True, {"loop": "running", "waiting_s": 0.0})
    clock.advance(LOOP_STUCK_S - 1)
    assert d._live()[0]
    clock.advance(2)
    ok, body = d._live()
    assert not ok
    assert body == {"loop": "stuck", "stuck_s": round(LOOP_STUCK_S + 1)}
    d.step(set())  # the loop moves again
    assert d._live()[0]
