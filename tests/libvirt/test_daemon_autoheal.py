"""A pool's autohealing through the daemon, in-process on test:///default, a fake clock.

Covers: a replica of a pool with ``autohealing: {startUpFailureThreshold: 2}`` whose
guest keeps failing (its liveness probe ends it: the test driver has no guest agent, so
``exec`` fails) is started again once as a crash restart, and on its second failure in
a row reprovisioned from the template: the plan says why, the domain is defined anew and
started with its restart count back at 0, the ``autohealed`` event is announced (valid
against the shipped schema) and the row says it. The same pool without ``autohealing``
only restarts under the back-off. (The disks recreated from their sources need a host
that runs guests: tests/integration/test_autoheal_qemu.py.)
"""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING

import jsonschema
import pytest

from reconciler.daemon import events
from reconciler.daemon.scheduler import HEALTH, RESYNC
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from reconciler.model.keys import VMKey
from reconciler.wording.reasons import said
from tests.helpers.clock import FakeClock
from tests.helpers.daemon import wait_for
from tests.helpers.loop import Daemons

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from reconciler.daemon.service import Daemon
    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test

DAEMONS = Daemons("heal-")
URI = "test:///default"
NAME = "heal-web-0"
POOL = """apiVersion: pool.kubevirt.io/v1beta1
kind: VirtualMachinePool
metadata: {{name: heal-web}}
spec:
  replicas: 1
{autohealing}  selector: {{matchLabels: {{app: heal}}}}
  virtualMachineTemplate:
    metadata: {{labels: {{app: heal}}}}
    spec:
      runStrategy: Always
      template:
        spec:
          livenessProbe: {{exec: {{command: [/bin/true]}}, failureThreshold: 1, initialDelaySeconds: 5}}
          domain:
            devices: {{}}
            memory: {{guest: 64Mi}}
"""


@pytest.fixture(autouse=True)
def _teardown() -> Iterator[None]:
    yield
    for d in DAEMONS.made:
        d.probes.close()
    DAEMONS.close()


def ended(d: Daemon, count: int) -> bool:
    with Hypervisor(URI) as hv:
        off = hv.state(NAME) == PowerState.SHUTOFF
    return off and d.probes.health()[VMKey("default", NAME)].liveness_restarts == count


def daemon(git_repo: GitRepo, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Daemon:
    d = DAEMONS.make(git_repo, tmp_path / "s", clock=clock)
    d.keep_plans = True
    d.announced = []  # type: ignore[attr-defined]
    monkeypatch.setattr(d.publish, "_announce", d.announced.append)  # type: ignore[attr-defined]
    return d


def fail_once(d: Daemon, clock: FakeClock, count: int) -> list[events.Event]:
    """The guest's liveness probe ends it (its ``count``-th end); then a reconcile: the
    events that reconcile announces."""
    clock.advance(5)  # the initial delay: the probe runs now
    d.probes.prober.tick()
    wait_for(f"the liveness probe to end the guest ({count})", lambda: ended(d, count))
    clock.advance(30)  # past the back-off of a second restart (10 s)
    d.announced.clear()  # type: ignore[attr-defined]
    d.step(d.take() | {HEALTH})
    return list(d.announced)  # type: ignore[attr-defined]


def test_a_replica_that_keeps_failing_is_reprovisioned(
    tmp_path: Path, git_repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo.write("pools/web.yaml", POOL.format(autohealing="  autohealing: {startUpFailureThreshold: 2}\n"))
    git_repo.commit()
    clock = FakeClock()
    d = daemon(git_repo, tmp_path, clock, monkeypatch)
    d.step({RESYNC})

    first = fail_once(d, clock, 1)  # failure 1: a crash restart
    (h,) = d.hosts
    assert h.plan is not None
    (c,) = [c for c in h.plan.changes if c.name == NAME]
    assert (c.reprovision, c.restarts) == (False, 1)
    assert [e.kind for e in first if e.subject == f"vm/{NAME}"] == ["crash-restart"]

    second = fail_once(d, clock, 2)  # failure 2 in a row: the threshold
    assert h.plan is not None
    (c,) = [c for c in h.plan.changes if c.name == NAME]
    assert c.reprovision
    assert said(c).startswith("autohealing: 2 failed starts in a row (startUpFailureThreshold 2): ")
    (row,) = [r for r in h.rows if r.name == NAME]
    assert row.state == "running"
    assert "autohealing: 2 failed starts in a row" in row.message
    with Hypervisor(URI) as hv:
        mark = hv.get_domain(NAME).mark  # type: ignore[union-attr]
    assert mark is not None
    assert mark.restarts == 0  # a new VM: its failed starts count from none
    healed = [e for e in second if e.kind == "autohealed"]
    assert [(e.subject, e.severity) for e in healed] == [(f"vm/{NAME}", "warning")]
    assert "reprovisioned from the pool's template" in healed[0].message
    schema = json.loads(resources.files("reconciler").joinpath("data/notify/event.schema.json").read_text())
    jsonschema.validate(events.event_document(healed[0], "repo", ""), schema)


def test_without_autohealing_the_replica_only_restarts(
    tmp_path: Path, git_repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo.write("pools/web.yaml", POOL.format(autohealing=""))
    git_repo.commit()
    clock = FakeClock()
    d = daemon(git_repo, tmp_path, clock, monkeypatch)
    d.step({RESYNC})
    fail_once(d, clock, 1)
    second = fail_once(d, clock, 2)
    (h,) = d.hosts
    assert h.plan is not None
    (c,) = [c for c in h.plan.changes if c.name == NAME]
    assert (c.reprovision, c.restarts) == (False, 2)
    assert not [e for e in second if e.kind == "autohealed"]
