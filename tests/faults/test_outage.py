"""Issue items 5 and 6 (connection): libvirtd going away, idle or in the middle of an apply.

- Idle outage: the dropped connection is noticed between triggers (no resync for an
  hour), ``/healthz`` is 503 and says why, ``/livez`` stays 200; when libvirtd is back
  the daemon reconnects and reconciles at once (a "reconnect" trigger, not the retry
  back-off), lifecycle events flow again (drift is reverted), health is 200, and the
  VM metrics sum to the number of VMs (no stale ``Unknown``).
- Outage mid-apply: one error line for the cause with a count, not one per change;
  a short message; after recovery every VM is defined exactly once.
"""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING

import pytest

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.daemon import Daemon, wait_for
from tests.helpers.faults import HOST, URI, config, kill_libvirtd, libvirtd_up, metric, name, state_of, vm

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(240)


def vm_total(d: Daemon) -> float:
    _, text = d.get("/metrics")
    return sum(metric(text, "reconciler_vms", host=HOST))


def test_idle_outage_is_noticed_and_recovered_at_once(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    dom = name("outage")
    own_domains.append(dom)
    git_repo.write("vms/a.yaml", vm(dom))
    sha = git_repo.commit()
    cfg = config(tmp_path, str(git_repo.path), extra="intervals: {resync: 1h}\n")
    d = start("--config", str(cfg))
    d.wait_applied(sha)
    assert d.get("/healthz")[0] == 200
    assert vm_total(d) == 1

    kill_libvirtd()
    wait_for("the lost connection noticed", lambda: d.events("host connection lost"))
    _code, body = wait_for("healthz 503", lambda: (r := d.get("/healthz"))[0] == 503 and r)
    info = json.loads(body)
    assert any("unreachable" in p for p in info["problems"]), info
    assert info["hosts"][HOST]["reachable"] is False
    assert d.get("/livez")[0] == 200  # the loop runs: no reason to restart the daemon
    _, text = d.get("/metrics")
    assert metric(text, "reconciler_host_up", host=HOST) == [0.0]
    assert vm_total(d) == 1  # the VM is Unknown now, counted once

    libvirtd_up()
    wait_for("reconnected", lambda: d.events("host reconnected"), timeout=60)
    wait_for("healthz 200", lambda: d.get("/healthz")[0] == 200, timeout=60)
    _, text = d.get("/metrics")
    assert metric(text, "reconciler_triggers_total", kind="reconnect") == [1.0]
    assert metric(text, "reconciler_host_up", host=HOST) == [1.0]
    assert vm_total(d) == 1  # Unknown reset to 0: not counted twice
    assert metric(text, "reconciler_vms", host=HOST, sync="Unknown") == [0.0]

    # Lifecycle events are subscribed again on the new connection: drift is reverted.
    before = len(d.events("started"))
    subprocess.run(["virsh", "-c", URI, "destroy", dom], check=True, capture_output=True)
    wait_for("the guest started again", lambda: len(d.events("started")) > before, timeout=60)
    wait_for("running", lambda: state_of(dom) == PowerState.RUNNING)


def test_outage_mid_apply_gives_one_error_line_per_cause(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    count = 100
    names = [name(f"many-{i:03d}") for i in range(count)]
    own_domains += names
    git_repo.write("vms/keep.yaml", vm(name("many-keep"), strategy="Halted"))
    own_domains.append(name("many-keep"))
    first = git_repo.commit("one")
    cfg = config(tmp_path, str(git_repo.path), extra="intervals: {resync: 1h}\n")
    d = start("--config", str(cfg))
    d.wait_applied(first)
    for n in names:
        git_repo.write(f"vms/{n}.yaml", vm(n, strategy="Halted"))
    second = git_repo.commit("many")
    subjects = {f"vm/{n}" for n in names}
    wait_for("the apply under way", lambda: [e for e in d.events("created") if e.get("subject") in subjects])
    kill_libvirtd()
    stopped = wait_for("the apply given up", lambda: d.events("apply stopped: host unreachable"))
    assert stopped[0]["not_attempted"] > 0
    assert len(stopped) == 1
    assert len(d.events("apply failed")) <= 8  # changes in flight, never one per remaining change
    failed = [
        e for e in d.events("reconciled") if e["revision"] == second[:12] and e["reason"] == "ApplyFailed"
    ]
    assert failed
    assert failed[0]["changes"] > 0
    message = failed[0]["error"]
    assert len(message) < 2000, len(message)
    assert "VMs:" in message, message  # grouped by cause, with a count
    history = [h for h in d.state()["history"] if h["revision"] == second]
    assert history
    assert all(len(h.get("message", "")) <= 500 for h in history)

    libvirtd_up()
    d.wait_applied(second)
    with Hypervisor(URI) as hv:
        defined = [dd.name for dd in hv.list_domains() if dd.name in names]
    assert sorted(defined) == sorted(names)
    assert vm_total(d) == count + 1
