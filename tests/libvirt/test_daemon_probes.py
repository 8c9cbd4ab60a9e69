"""Ready and probes through the daemon, in-process on test:///default, with the real prober
and its real transport (``host/guest.py``).

Covers: a VM without a readiness probe is Ready once it runs; one whose ``tcpSocket``
probe reaches a listener (``host: 127.0.0.1``) becomes Ready, with the address and its
source (``spec``) in its row; one whose ``guestAgentPing`` gets no answer (the test
driver has no guest agent) stays not Ready with that answer; the prober's change asks
the loop for a reconcile (``health``), after which the rows, ``state.json``,
``status -o json`` (valid against its schema), ``/api/status``'s document and the
metric ``reconciler_vm_ready`` say it; a stopped VM is not Ready; the ``not-ready``
event is announced. A liveness probe that fails (``exec``: the test driver has no guest
agent) ends the guest; the next reconcile starts it again as a crash restart (counted in
its mark), the row and ``reconciler_vm_liveness_restarts`` count it, and the second end
waits out the crash-loop back-off (``CrashLoopBackOff``); a daemon started again on the
same state directory still reads that end as the probe's (the back-off kept, then a crash
restart) and counts on from the liveness restarts ``state.json`` kept.
"""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.daemon.scheduler import HEALTH, RESYNC
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from reconciler.model.keys import VMKey
from tests.helpers import schemas
from tests.helpers.clock import FakeClock
from tests.helpers.daemon import wait_for
from tests.helpers.loop import Daemons
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from reconciler.daemon.events import Event
    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test

DAEMONS = Daemons("probes-")
URI = "test:///default"


@pytest.fixture(autouse=True)
def _teardown() -> Iterator[None]:
    yield
    for d in DAEMONS.made:
        d.probes.close()
    DAEMONS.close()


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)  # the kernel completes the connections: nothing needs to accept them
        yield s.getsockname()[1]


def probed(name: str, probe: str) -> str:
    return vm_yaml(name).replace("    spec:\n", f"    spec:\n      readinessProbe:\n{probe}", 1)


def test_ready_through_the_daemon(
    tmp_path: Path,
    git_repo: GitRepo,
    listener: int,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    git_repo.write("vms/plain.yaml", vm_yaml("probes-plain"))
    tcp = f"        tcpSocket: {{host: 127.0.0.1, port: {listener}}}\n        periodSeconds: 1\n"
    git_repo.write("vms/tcp.yaml", probed("probes-tcp", tcp))
    git_repo.write("vms/agent.yaml", probed("probes-agent", "        guestAgentPing: {}\n"))
    git_repo.commit()
    d = DAEMONS.make(git_repo, tmp_path / "s")
    announced: list[Event] = []
    monkeypatch.setattr(d.publish, "health_changed", announced.extend)
    d.step({RESYNC})
    rows = {r.name: r for r in d.hosts[0].rows}
    assert rows["probes-plain"].ready is True
    assert rows["probes-plain"].ready_reason == "Running"
    assert (rows["probes-tcp"].ready, rows["probes-tcp"].ready_reason) == (False, "ProbePending")

    def answered() -> bool:
        health = d.probes.health()
        agent = health[VMKey("default", "probes-agent")].ready_state
        return d.probes.readiness[VMKey("default", "probes-tcp")].ready and bool(agent and agent.runs)

    wait_for("the probes' first answers", answered)
    assert HEALTH in d.take()  # the prober asked for a reconcile
    assert [(e.kind, e.subject, e.reason, e.resolved) for e in announced] == [
        ("not-ready", "vm/probes-agent", "ProbeFailed", False)  # the VMs that started Ready say nothing
    ]
    d.step({HEALTH})
    rows = {r.name: r for r in d.hosts[0].rows}
    tcp_row, agent_row = rows["probes-tcp"], rows["probes-agent"]
    assert (tcp_row.ready, tcp_row.ready_reason) == (True, "ProbePassed")
    assert (tcp_row.address, tcp_row.address_source) == ("127.0.0.1", "spec")
    assert tcp_row.probe == "readiness tcpSocket 127.0.0.1: passed"
    assert (agent_row.ready, agent_row.ready_reason) == (False, "ProbeFailed")
    assert agent_row.probe == "readiness guestAgentPing: no answer from the guest agent"

    recorded = {v["name"]: v for v in json.loads((tmp_path / "s" / "state.json").read_text())["vms"]}
    assert recorded["probes-tcp"]["ready"] is True
    assert recorded["probes-agent"]["ready_reason"] == "ProbeFailed"

    capsys.readouterr()
    assert cli.main(["status", "--state-dir", str(tmp_path / "s"), "--connect", URI, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    schemas.check(doc, "status")
    shown = {v["name"]: v for v in doc["vms"]}
    assert (shown["probes-tcp"]["ready"], shown["probes-tcp"]["addressSource"]) == (True, "spec")
    assert (shown["probes-plain"]["ready"], shown["probes-agent"]["ready"]) == (True, False)
    assert cli.main(["status", "--state-dir", str(tmp_path / "s"), "--connect", URI]) == 0
    table = capsys.readouterr().out
    assert any(line.split()[4:5] == ["READY"] for line in table.splitlines() if line.startswith("NAME"))
    assert "readiness guestAgentPing" in next(line for line in table.splitlines() if "probes-agent" in line)

    page = {v["name"]: v for h in d.publish.document["hosts"] for v in h["vms"]}
    assert (page["probes-tcp"]["ready"], page["probes-tcp"]["readyReason"]) == (True, "ProbePassed")
    assert page["probes-agent"]["ready"] is False
    metrics, host = d.metrics.render().decode(), d.hosts[0].name
    assert f'reconciler_vm_ready{{host="{host}",vm="vm/probes-tcp"}} 1.0' in metrics
    assert f'reconciler_vm_ready{{host="{host}",vm="vm/probes-agent"}} 0.0' in metrics
    assert f'reconciler_vm_ready{{host="{host}",vm="vm/probes-plain"}} 1.0' in metrics

    with Hypervisor(URI) as hv:  # stopped by someone: not Ready
        hv.destroy("probes-plain")
    assert cli.main(["status", "--state-dir", str(tmp_path / "s"), "--connect", URI, "-o", "json"]) == 0
    shown = {v["name"]: v for v in json.loads(capsys.readouterr().out)["vms"]}
    assert (shown["probes-plain"]["ready"], shown["probes-plain"]["readyReason"]) == (False, "NotRunning")


def test_a_failing_liveness_probe_restarts_the_guest_under_the_back_off(
    tmp_path: Path, git_repo: GitRepo
) -> None:
    live = "      livenessProbe:\n        exec: {command: [/bin/true]}\n        failureThreshold: 1\n"
    live += "        initialDelaySeconds: 5\n"
    git_repo.write("vms/live.yaml", vm_yaml("probes-live").replace("    spec:\n", f"    spec:\n{live}", 1))
    git_repo.commit()
    clock = FakeClock()
    d = DAEMONS.make(git_repo, tmp_path / "s", clock=clock)
    d.step({RESYNC})
    key = VMKey("default", "probes-live")

    def ended(count: int) -> bool:
        with Hypervisor(URI) as hv:
            off = hv.state("probes-live") == PowerState.SHUTOFF
        return off and d.probes.health()[key].liveness_restarts == count

    clock.advance(5)  # the initial delay: the first run now
    d.probes.prober.tick()
    wait_for("the liveness probe to end the guest", lambda: ended(1))  # no guest agent: exec fails
    assert HEALTH in d.take()
    clock.advance(1)
    d.step({HEALTH})
    (row,) = [r for r in d.hosts[0].rows if r.name == "probes-live"]
    assert row.state == "running"  # started again by its run strategy, as a crash restart
    assert (row.liveness_restarts, row.probe) == (1, "liveness exec: no answer from the guest agent")
    with Hypervisor(URI) as hv:
        mark = hv.get_domain("probes-live").mark  # type: ignore[union-attr]
    assert mark is not None
    assert mark.restarts == 1
    metrics = d.metrics.render().decode()
    assert (
        f'reconciler_vm_liveness_restarts_total{{host="{d.hosts[0].name}",vm="vm/probes-live"}} 1.0'
        in metrics
    )

    clock.advance(5)
    d.probes.prober.tick()
    wait_for("the second end", lambda: ended(2))
    d.step(d.take() | {HEALTH})
    (row,) = [r for r in d.hosts[0].rows if r.name == "probes-live"]
    assert row.sync == "CrashLoopBackOff"  # the second restart waits out the back-off
    assert (row.ready, row.ready_reason) == (False, "NotRunning")

    # the daemon started again on the same state directory, the guest still off: it keeps
    # the guest the probe ended and the count (the first one's connection stays open: the
    # test driver's domains live as long as one is)
    d.probes.close()
    kept = d.state.doc["hosts"][d.hosts[0].name]["liveness_ended"]
    assert list(kept) == ["probes-live"]
    again = DAEMONS.make(git_repo, tmp_path / "s", clock=clock)
    assert again.hosts[0].ended_by_probe == kept
    again.step({RESYNC})
    (row,) = [r for r in again.hosts[0].rows if r.name == "probes-live"]
    assert row.sync == "CrashLoopBackOff"  # a failure still waiting out its back-off, not a stop from outside
    assert row.liveness_restarts == 2
    clock.advance(10)  # the back-off over
    again.step({RESYNC})
    (row,) = [r for r in again.hosts[0].rows if r.name == "probes-live"]
    assert (row.state, row.liveness_restarts) == ("running", 2)
    with Hypervisor(URI) as hv:
        mark = hv.get_domain("probes-live").mark  # type: ignore[union-attr]
    assert mark is not None
    assert mark.restarts == 2  # started once more, as the crash restart it is
    assert again.hosts[0].ended_by_probe == {}
    assert "liveness_ended" not in again.state.doc["hosts"][again.hosts[0].name]
