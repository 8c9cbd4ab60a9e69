"""Paced restarts in the daemon, in-process on test:///default with a clock the test moves.

Covers: a restart-class change to a pool of 3 with ``maxUnavailable: 1`` under rollout
Restart restarts one replica per reconcile, in its ``selectionPolicy`` order, each
batch after the last is Ready; a readiness source that never says Ready halts the
rollout after ``progressDeadline`` with one replica restarted: the others keep their
running definition, state.json and the commit status say it, a daemon started again on
the same state directory stays halted, and a new commit replaces the halted rollout.
VM names are unique to this module.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from reconciler.config.daemon import Policy
from reconciler.daemon import events, forge, rollouts
from reconciler.daemon.publish import outcome_of
from reconciler.daemon.scheduler import REFS, RESYNC
from reconciler.host.hypervisor import Hypervisor
from reconciler.model.rollout import Health, OnFailure, Pacing, ReadySource
from reconciler.plan.output import plan_document, plans_document
from reconciler.status import summary_lines
from tests.helpers.clock import FakeClock
from tests.helpers.loop import Daemons
from tests.helpers.schemas import check

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from reconciler.daemon.service import Daemon
    from reconciler.model import VMKey
    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test

PREFIX = "pace-"
DAEMONS = Daemons(PREFIX)
NAMES = [f"{PREFIX}web-{i}" for i in range(3)]

POOL = """apiVersion: pool.kubevirt.io/v1beta1
kind: VirtualMachinePool
metadata:
  name: pace-web
spec:
  replicas: 3
  maxUnavailable: 1
  updateStrategy:
    proactive:
      selectionPolicy:
        sortPolicy: AscendingOrder
  selector:
    matchLabels:
      app: pace
  virtualMachineTemplate:
    metadata:
      labels:
        app: pace
      annotations:
        reconciler.kubevirt.io/rollout: Restart
    spec:
      runStrategy: Always
      template:
        spec:
          domain:
            machine:
              type: {machine}
            devices: {{}}
            memory:
              guest: 64Mi
"""


@pytest.fixture(autouse=True)
def _teardown() -> Iterator[None]:
    yield
    DAEMONS.close()


def commits() -> dict[str, str]:
    """Each replica's commit, as its ownership mark says (the revision it runs)."""
    with Hypervisor("test:///default") as hv:
        return {d.name: d.mark.commit if d.mark else "" for d in hv.list_domains() if d.name in NAMES}


def broken_by(revision: str) -> Callable[[VMKey], bool]:
    """A readiness probe that never passes in a guest of ``revision`` (and does before)."""
    return lambda k: commits().get(k.domain) != revision


def rollout_state(d: Daemon) -> dict[str, object]:
    entry = d.state.doc["hosts"][d.hosts[0].name]["rollout"]
    assert isinstance(entry, dict)
    return entry


def started(git_repo: GitRepo, tmp_path: Path, clock: FakeClock, pacing: Pacing) -> tuple[Daemon, str]:
    git_repo.write("pools/web.yaml", POOL.format(machine="q35"))
    first = git_repo.commit()
    d = DAEMONS.make(git_repo, tmp_path / "s", clock, policy=Policy(pacing=pacing))
    d.step({RESYNC})
    assert d.applied == first
    assert set(commits().values()) == {first}
    return d, first


def test_a_pool_takes_a_restart_class_change_one_replica_at_a_time(tmp_path: Path, git_repo: GitRepo) -> None:
    clock = FakeClock()
    d, _ = started(git_repo, tmp_path, clock, Pacing())
    git_repo.write("pools/web.yaml", POOL.format(machine="pc"))  # restart class
    head = git_repo.commit("machine type")
    seen = []
    for _ in range(3):
        d.step({REFS})
        (h,) = d.hosts
        if h.inflight is not None:  # a batch's graceful stops run on after its apply
            h.inflight.wait()
        seen.append(commits())
        assert h.paced is not None
        assert h.paced.health == Health.PROGRESSING  # a batch just restarted: Ready is judged next time
        assert rollouts.commit_state(h.paced, head) is not None  # pending
        clock.advance(rollouts.POLL_S)
    assert [sorted(n for n, c in s.items() if c == head) for s in seen] == [NAMES[:1], NAMES[:2], NAMES]
    d.step({RESYNC})
    (h,) = d.hosts
    assert h.paced is not None
    assert h.paced.health == Health.HEALTHY
    assert rollouts.commit_state(h.paced, head) is None  # Healthy: the status is success


def test_a_pool_never_ready_halts_after_one_replica_and_stays_halted(
    tmp_path: Path, git_repo: GitRepo
) -> None:
    clock = FakeClock()
    d, _ = started(git_repo, tmp_path, clock, Pacing(progress_deadline_s=600))
    (h,) = d.hosts
    git_repo.write("pools/web.yaml", POOL.format(machine="pc"))
    head = git_repo.commit("machine type")
    h.ready = ReadySource(broken_by(head))
    d.step({REFS})
    assert sorted(n for n, c in commits().items() if c == head) == NAMES[:1]
    assert h.paced is not None
    assert rollouts.commit_state(h.paced, head) == (
        forge.PENDING,
        "Progressing",
        f"waiting for {NAMES[0]} to be Ready",
    )
    for _ in range(3):
        clock.advance(300)
        d.step({RESYNC})
    assert sorted(n for n, c in commits().items() if c == head) == NAMES[:1]  # one replica lost, no more
    state = rollout_state(d)
    assert state["health"] == "Halted"
    assert state["message"] == f"Halted: halted at vm/{NAMES[0]}: not Ready after 10m"
    assert h.paced is not None
    health = rollouts.commit_state(h.paced, head)
    assert health is not None
    assert health[0] == forge.FAILURE
    halted_event = events.detect(events.HostOutcome(h.name), outcome_of(h, None, None), clock.time())
    assert [(e.kind, e.message) for e in halted_event if e.kind == "rollout-halted"] == [
        (
            "rollout-halted",
            f"{h.name}: revision {head[:12]}: rollout halted at vm/{NAMES[0]}: not Ready after 10m",
        )
    ]
    (page,) = d.publish.document["hosts"]  # the status page and /api/status say it
    assert page["health"] == {
        "revision": head,
        "health": "Halted",
        "message": f"halted at vm/{NAMES[0]}: not Ready after 10m",
    }
    lines = summary_lines(d.state.doc)  # `status` says it
    assert (
        f"host {h.name}: revision {head[:12]} Halted: halted at vm/{NAMES[0]}: not Ready after 10m" in lines
    )

    # the daemon started again on the same state directory: still halted (the first one's
    # connection stays open: the test driver's domains live as long as one is open)
    again = DAEMONS.make(
        git_repo, tmp_path / "s", clock, policy=Policy(pacing=Pacing(progress_deadline_s=600))
    )
    again.hosts[0].ready = ReadySource(broken_by(head))
    again.step({RESYNC})
    assert rollout_state(again)["health"] == "Halted"
    assert sorted(n for n, c in commits().items() if c == head) == NAMES[:1]

    # a new commit replaces the halted rollout: the next replica goes
    git_repo.write("pools/web.yaml", POOL.format(machine="pc").replace("64Mi", "96Mi"))
    newer = git_repo.commit("more memory")
    again.hosts[0].ready = None  # Ready = running
    again.step({REFS})
    assert rollout_state(again)["health"] == "Progressing"
    assert newer in commits().values()


def test_the_plan_says_the_batches(tmp_path: Path, git_repo: GitRepo) -> None:
    clock = FakeClock()
    d, _ = started(git_repo, tmp_path, clock, replace(Pacing(), max_unavailable="1"))
    d.keep_plans = True
    git_repo.write("pools/web.yaml", POOL.format(machine="pc"))
    git_repo.commit("machine type")
    d.step({REFS})
    from reconciler.plan.text import format_plan

    (h,) = d.hosts
    assert h.plan is not None
    text = format_plan(h.plan)
    assert (
        f"rollout: restart in 3 batches of 1: {', '.join(NAMES)}; each waits for Ready (running)" in text
    ), text
    assert f"vm/{NAMES[1]}: wait [RestartRequired]" in text, text
    doc = plan_document(h.plan, d.hosts[0].target, "localhost")  # plan -o json
    check(plans_document([doc]), "plan")
    assert doc["rollout"]["batches"] == [{"vms": [f"vm/{n}"], "waitsFor": "running"} for n in NAMES]


def test_on_failure_revert_sends_the_halted_replica_back(tmp_path: Path, git_repo: GitRepo) -> None:
    clock = FakeClock()
    pacing = Pacing(progress_deadline_s=60, on_failure=OnFailure.REVERT)
    d, first = started(git_repo, tmp_path, clock, pacing)
    (h,) = d.hosts
    git_repo.write("pools/web.yaml", POOL.format(machine="pc"))
    head = git_repo.commit("machine type")
    h.ready = ReadySource(broken_by(head))
    d.step({REFS})
    assert commits()[NAMES[0]] == head
    clock.advance(60)
    d.step({RESYNC})  # halted, and vm 0 planned at the last healthy revision and restarted into it
    assert commits() == dict.fromkeys(NAMES, first)
    state = rollout_state(d)
    assert (state["health"], state["healthy_revision"], state["reverted"]) == ("Halted", first, NAMES[:1])
    assert str(state["message"]).endswith(f"; {NAMES[0]} reverted to {first[:12]}")
    clock.advance(60)
    d.step({RESYNC})  # stays so: the head's restarts wait, the revert has nothing more to do
    assert commits() == dict.fromkeys(NAMES, first)
