"""A probed pool on QEMU with the real test guest: success only once Ready, and a halt.

The daemon in-process on qemu:///system (its prober on the system clock, its commit
statuses sent to a local forge, ``tests/helpers/receiver.py``), a VirtualMachinePool of
3 replicas of the minimal test guest (``tests/helpers/guest.py``) with ``maxUnavailable:
1``, rollout Restart and a ``guestAgentPing`` readiness probe. Four boots in all.

Covers:
- the pool applied: the commit status is ``pending`` while the guests boot and their
  probes have not passed (a ``Degraded`` one arrives before the last probe passed), and
  ``success`` only after the last replica's probe passed (the forge's arrival times
  against the prober's Ready ``since``);
- a restart-class change that switches the guest agent off (its kernel command line):
  the probe never passes on the new definition, so the rollout loses exactly one
  replica (the first of its order; never more than one replica off or on the change at
  any observation), halts after ``progressDeadline`` saying where and the probe's last
  answer (state.json, the commit status ``failure``), and more reconciles restart
  nothing more: the other two keep running their old definition, Ready.
"""

from __future__ import annotations

import dataclasses
import time
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from reconciler.config.daemon_file import load_config
from reconciler.config.notify import CommitStatusConfig, NotifyConfig
from reconciler.context import SystemClock
from reconciler.daemon.notify import Notifier
from reconciler.daemon.service import Daemon
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState, VMKey
from tests.helpers.git import GitRepo
from tests.helpers.guest import build_test_guest, host_config_yaml, pool_manifest
from tests.helpers.qemu import cycle_until
from tests.helpers.receiver import Receiver

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests.helpers.receiver import Got

PREFIX = "rtest-hp-"
POOL = f"{PREFIX}web"
NAMES = [f"{POOL}-{i}" for i in range(3)]
HANG_GUARD_S = 300.0  # TCG boots on a busy machine: a hang guard, not a speed check
DEADLINE = "20s"
pytestmark = pytest.mark.timeout(900)


def pool(*, agent: bool) -> str:
    m = pool_manifest(POOL, 3, agent=agent)
    m["spec"]["maxUnavailable"] = 1
    m["spec"]["updateStrategy"] = {"proactive": {"selectionPolicy": {"sortPolicy": "AscendingOrder"}}}
    template = m["spec"]["virtualMachineTemplate"]
    template["metadata"]["annotations"] = {"reconciler.kubevirt.io/rollout": "Restart"}
    # a TCG guest on a loaded machine may take more than the default second to answer
    probe = {"guestAgentPing": {}, "periodSeconds": 1, "timeoutSeconds": 5}
    template["spec"]["template"]["spec"]["readinessProbe"] = probe
    return str(yaml.safe_dump(m, sort_keys=False))


def observe() -> dict[str, tuple[bool, PowerState]]:
    """Each replica: whether what it runs (else its definition) has the agent off, its state."""
    out = {}
    with Hypervisor("qemu:///system") as hv:
        for d in hv.list_domains():
            if d.name in NAMES:
                cmdline = ET.fromstring(d.live_xml or d.persistent_xml).findtext("os/cmdline") or ""
                out[d.name] = ("rtest.agent=0" in cmdline, d.state)
    return out


@pytest.fixture
def forge() -> Iterator[Receiver]:
    r = Receiver(default=201)
    yield r
    r.close()


def daemon(repo: Path, workdir: Path, tmp_path: Path, forge: Receiver) -> Daemon:
    host = "".join(f"  {line}\n" for line in host_config_yaml(build_test_guest(), workdir).splitlines())
    path = tmp_path / "config.yaml"
    path.write_text(
        f"source: {{repo: {repo}}}\nconnect: qemu:///system\nhost:\n{host}"
        f"policy: {{owner: rtest-hp, progressDeadline: {DEADLINE}}}\n"
        f"stateDir: {tmp_path / 'state'}\nlisten: false\n"
    )
    d = Daemon(load_config(str(path)), notifier=Notifier({}), clock=SystemClock())
    notify = NotifyConfig(commit_status=CommitStatusConfig("github", forge.url, "infra/vms", "tok"))
    d.config = dataclasses.replace(d.config, notify=notify)
    d.publish.reload(d.config)
    return d


def statuses(forge: Receiver, d: Daemon, sha: str) -> list[tuple[Got, dict[str, Any]]]:
    d.publish.outbox.pump()
    return [(g, g.json()) for g in forge.requests() if g.path.endswith(f"/statuses/{sha}")]


def converge_until(d: Daemon, done: Callable[[], bool], seen: list[Any]) -> None:
    cycle_until(d, done, observe, seen, HANG_GUARD_S)


def test_a_probed_pool_is_success_only_once_ready_and_a_change_never_ready_halts_after_one(
    qemu_workdir: Path, tmp_path: Path, forge: Receiver
) -> None:
    repo = GitRepo(qemu_workdir)
    repo.write("pools/web.yaml", pool(agent=True))
    first = repo.commit("a probed pool")
    d = daemon(qemu_workdir, qemu_workdir, tmp_path, forge)
    keys = [VMKey.from_domain(n) for n in NAMES]
    try:
        d.cycle(fetch=True, force=True)
        seen = [observe()]
        assert {s for _, s in seen[0].values()} == {PowerState.RUNNING}

        def said(sha: str, state: str) -> bool:
            return any(s["state"] == state for _, s in statuses(forge, d, sha))

        converge_until(d, lambda: said(first, "success"), seen)
        ready_since = [d.probes.readiness[k].since for k in keys]
        assert all(d.probes.readiness[k].ready for k in keys)
        applied = statuses(forge, d, first)

        repo.write("pools/web.yaml", pool(agent=False))
        head = repo.commit("the guest agent off: the readiness probe never passes")
        d.cycle(fetch=True, force=True)
        seen.append(observe())
        converge_until(d, lambda: said(head, "failure"), seen)
        for _ in range(3):  # halted: more reconciles restart nothing more
            d.cycle(fetch=False, force=True)
            seen.append(observe())
            time.sleep(1)
        entry = d.state.doc["hosts"]["h1"]["rollout"]
        halted = statuses(forge, d, head)
        still_ready = [d.probes.readiness[k].ready for k in keys[1:]]
    finally:
        for h in d.hosts:
            h.close()
        d.probes.close()

    # pending while the guests booted, success only after the last probe passed
    states = [s["state"] for _, s in applied]
    assert states[-1] == "success"
    assert set(states[:-1]) == {"pending"}
    booting = [
        g.at for g, s in applied[:-1] if "Degraded" in s["description"] or "Progressing" in s["description"]
    ]  # applied, not Ready: said before the last probe passed
    assert booting
    assert min(booting) < max(ready_since)
    assert applied[-1][0].at >= max(ready_since)

    # the change never Ready: one replica lost, halted, the others on their old definition
    last = seen[-1]
    assert [n for n in NAMES if last[n][0]] == NAMES[:1]
    assert all(last[n] == (False, PowerState.RUNNING) for n in NAMES[1:])
    for snap in seen:
        assert sum(1 for off, s in snap.values() if off or s != PowerState.RUNNING) <= 1, snap
    assert still_ready == [True, True]
    assert entry["health"] == "Halted"
    assert entry["halt"]["vm"] == NAMES[0]
    words = f"halted at vm/{NAMES[0]}: not Ready after "
    assert entry["message"].startswith(f"Halted: {words}")
    assert "guestAgentPing: no answer from the guest agent" in entry["halt"]["cause"], entry["message"]
    assert entry["message"].endswith(f"({entry['halt']['cause']})")
    assert [s["state"] for _, s in halted][-1] == "failure"
    assert words in halted[-1][1]["description"]
