"""GitOps you can trust, against real libvirtd + QEMU (and the test driver served by
libvirtd, ``test+unix:///default``, as a second host).

Covers:
- the prune-guard bypass: one commit deletes every VM and adds three times as many;
  the originals are never deleted, on the second reconcile and after a restart of the
  daemon too; the refusal is recorded in state.json, the reconcile is PruneFailed and
  logged; a confirmation naming the revision lets the prunes through;
- two owners (two repositories) on one host: neither changes, prunes or counts the
  other's domains (a name the other holds is an error of the revision: nothing of it
  applies); taking one over is an explicit adoption;
- drift in detect-only mode (``selfHeal: false``): status OutOfSync with the fields,
  the metric, a log event, and ``plan`` exits 2;
- a host move between two hosts never has two running copies;
- a restart window in the future defers a restart-class change while a live change
  applies at once.

The daemon runs in this process (``Daemon.cycle``), one reconcile per call, so every
assertion is made between two reconciles. Domains are named ``rtest-trust-<pid>-*``.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import structlog

from reconciler import source
from reconciler.config.daemon_file import load_config
from reconciler.context import SystemClock
from reconciler.daemon.service import Daemon
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from reconciler.wording.reasons import said
from tests.helpers.daemon import wait_for
from tests.helpers.git import GitRepo

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
URI = "qemu:///system"
TEST_URI = "test+unix:///default"
PREFIX = f"rtest-trust-{os.getpid()}-"
BIN = Path(sys.executable).parent / "reconciler"

pytestmark = pytest.mark.timeout(300)


def vm(
    name: str, strategy: str = "Halted", memory: str = "64Mi", host: str = "", annotations: str = ""
) -> str:
    selector = f"      nodeSelector:\n        kubernetes.io/hostname: {host}\n" if host else ""
    meta = f"  annotations:\n{annotations}" if annotations else ""
    return f"""\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
{meta}spec:
  runStrategy: {strategy}
  template:
    spec:
{selector}      terminationGracePeriodSeconds: 2
      domain:
        devices: {{}}
        memory:
          guest: {memory}
"""


def remove(uri: str, prefix: str) -> None:
    with Hypervisor(uri) as hv:
        for d in hv.list_domains():
            if d.name.startswith(prefix):
                if d.active:
                    hv.destroy(d.name)
                hv.undefine(d.name)


@pytest.fixture
def hosts() -> Iterator[None]:
    subprocess.run([str(ROOT / "scripts" / "libvirtd-up")], check=True)
    for uri in (URI, TEST_URI):
        remove(uri, PREFIX)
    yield
    for uri in (URI, TEST_URI):
        remove(uri, PREFIX)


def names(uri: str = URI) -> dict[str, PowerState]:
    with Hypervisor(uri) as hv:
        return {d.name: d.state for d in hv.list_domains() if d.name.startswith(PREFIX)}


HOST = "  domainType: qemu\n  networks:\n    pod: {user: {}}\n"


def write_config(tmp: Path, repo: Path, policy: str = "", hosts: str = "", name: str = "config.yaml") -> Path:
    where = hosts or f"connect: {URI}\nhost:\n  name: trust-qemu\n{HOST}"
    path = tmp / name
    path.write_text(
        f"source:\n  repo: {repo}\n{where}"
        f"policy:\n  prune: true\n{policy}"
        f"stateDir: {tmp / ('state-' + name)}\n"
        "listen: false\n"
    )
    return path


def daemon(config: Path) -> Daemon:
    d = Daemon(load_config(str(config)), out=io.StringIO(), clock=SystemClock())
    d.keep_plans = True
    return d


def reconcile(d: Daemon) -> dict[str, Any]:
    d.cycle(fetch=False, force=True)
    state: dict[str, Any] = json.loads((Path(d.config.state_dir) / "state.json").read_text())
    return state


# -- 1. the prune-guard bypass ------------------------------------------------------------


def test_bypass_commit_never_deletes_the_originals(tmp_path: Path, git_repo: GitRepo, hosts: None) -> None:
    originals = [f"{PREFIX}orig{i}" for i in range(4)]
    for n in originals:
        git_repo.write(f"vms/{n}.yaml", vm(n))
    first = git_repo.commit("four VMs")
    config = write_config(tmp_path, git_repo.path)
    d = daemon(config)
    assert reconcile(d)["applied_revision"] == first
    assert set(names()) == set(originals)

    git_repo.remove("vms")
    dummies = [f"{PREFIX}dummy{i}" for i in range(12)]
    for n in dummies:
        git_repo.write(f"vms/{n}.yaml", vm(n))
    bypass = git_repo.commit("delete everything, add 3x dummies")
    with structlog.testing.capture_logs() as logs:
        state = reconcile(d)
    assert set(originals) <= set(names())
    assert state["reason"] == "PruneFailed"
    assert state["applied_revision"] == first
    assert "prune refused: 4 of 4 managed domains" in state["message"]
    refusal = state["hosts"]["trust-qemu"]["prune_refused"]
    assert refusal["revision"] == bypass
    assert refusal["would_prune"] == sorted(originals)
    assert [e for e in logs if e["event"] == "prune refused"]

    # The same commit again: the dummies it created do not dilute the count.
    state = reconcile(d)
    assert set(originals) <= set(names())
    assert state["reason"] == "PruneFailed"

    # A restarted daemon (state.json only) and a new commit on top: still refused.
    git_repo.write(f"vms/{PREFIX}dummy12.yaml", vm(f"{PREFIX}dummy12"))
    git_repo.commit("one more dummy")
    state = reconcile(daemon(config))
    assert set(originals) <= set(names())
    assert state["reason"] == "PruneFailed"

    # An explicit confirmation naming the revision lets the prunes through.
    head = git_repo.git("rev-parse", "HEAD")
    confirmed = write_config(tmp_path, git_repo.path, policy=f"  confirmPrune: '{head[:12]}'\n")
    state = reconcile(daemon(confirmed))
    assert state["reason"] == "Succeeded", state["message"]
    assert not set(originals) & set(names())


def test_plan_and_diff_say_the_prune_would_be_refused(tmp_path: Path, git_repo: GitRepo, hosts: None) -> None:
    originals = [f"{PREFIX}p{i}" for i in range(3)]
    for n in originals:
        git_repo.write(f"vms/{n}.yaml", vm(n))
    git_repo.commit("three")
    assert reconcile(daemon(write_config(tmp_path, git_repo.path)))["reason"] == "Succeeded"
    git_repo.remove("vms")
    git_repo.write(f"vms/{PREFIX}x.yaml", vm(f"{PREFIX}x"))
    git_repo.commit("replace")
    out = subprocess.run(
        [str(BIN), "diff", "--repo", str(git_repo.path), "--base", "HEAD~1", "--head", "HEAD"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2, out.stderr
    for n in originals:
        assert f"vm/{n}" in out.stdout
    assert "prune refused: 3 of 3 managed domains" in out.stdout


# -- 5. owners ----------------------------------------------------------------------------


def test_two_owners_on_one_host_ignore_each_other(tmp_path: Path, hosts: None) -> None:
    repo_a, repo_b = GitRepo(tmp_path / "a"), GitRepo(tmp_path / "b")
    a_vms = [f"{PREFIX}a{i}" for i in range(3)]
    for n in a_vms:
        repo_a.write(f"vms/{n}.yaml", vm(n))
    repo_a.commit("a")
    repo_b.write("vms/b.yaml", vm(f"{PREFIX}b0"))
    repo_b.write("vms/clash.yaml", vm(a_vms[0], memory="96Mi"))  # same name as one of A's
    repo_b.commit("b")
    da = daemon(write_config(tmp_path, repo_a.path, name="a.yaml"))
    db = daemon(write_config(tmp_path, repo_b.path, policy="  maxPrunePercent: 100\n", name="b.yaml"))
    assert reconcile(da)["reason"] == "Succeeded"
    with Hypervisor(URI) as hv:
        before = {n: hv.persistent_xml(n) for n in a_vms}

    state_b = reconcile(db)
    assert set(a_vms) <= set(names())  # B prunes nothing of A's
    # A name another owner holds is an error of B's revision: nothing of it applies.
    assert state_b["reason"] == "RenderFailed"
    assert "belongs to another owner" in state_b["message"]
    assert f"{PREFIX}b0" not in names()
    rows = {v["name"]: v for v in state_b["vms"]}
    assert set(rows) == {f"{PREFIX}b0", a_vms[0]}  # A's others are not B's to list
    assert rows[a_vms[0]]["sync"] == "Unmanaged"
    assert "belongs to another owner" in rows[a_vms[0]]["message"]
    with Hypervisor(URI) as hv:
        assert {n: hv.persistent_xml(n) for n in a_vms} == before  # not changed, not re-marked

    # Taking one over is an explicit adoption.
    repo_b.write(
        "vms/clash.yaml",
        vm(a_vms[0], memory="96Mi", annotations='    reconciler.kubevirt.io/adopt: "true"\n'),
    )
    repo_b.commit("adopt")
    assert reconcile(db)["reason"] == "Succeeded"
    with Hypervisor(URI) as hv:
        mark = hv.get_domain(a_vms[0]).mark  # type: ignore[union-attr]
    assert mark is not None
    # B's owner names its repository (no remote: its root commit), not the checkout.
    assert mark.owner == f"{source.repository_identity(repo_b.path)}#."
    assert mark.owner.startswith("git:")
    assert f"{PREFIX}b0" in names()

    # A's next reconcile neither prunes nor counts B's domains.
    reconcile(da)
    assert f"{PREFIX}b0" in names()


# -- 3. drift in detect-only mode -----------------------------------------------------------


def _edit_memory(name: str, mib: int) -> None:
    """``virsh define`` of an edited definition (the mark stays: only the spec drifts)."""
    import xml.etree.ElementTree as ET

    with Hypervisor(URI) as hv:
        dom = ET.fromstring(hv.persistent_xml(name))
        for tag in ("memory", "currentMemory"):
            el = dom.find(tag)
            assert el is not None
            el.text, el.attrib["unit"] = str(mib * 1024), "KiB"
        hv.define(ET.tostring(dom, encoding="unicode"), name)


def test_detect_only_drift_is_visible(tmp_path: Path, git_repo: GitRepo, hosts: None) -> None:
    edited, destroyed = f"{PREFIX}edited", f"{PREFIX}destroyed"
    git_repo.write("vms/edited.yaml", vm(edited, strategy="Halted"))
    git_repo.write("vms/destroyed.yaml", vm(destroyed, strategy="Always"))
    git_repo.commit("two")
    config = write_config(tmp_path, git_repo.path, policy="  selfHeal: false\n")
    d = daemon(config)
    state = reconcile(d)
    assert state["reason"] == "Succeeded"
    assert names()[destroyed] == PowerState.RUNNING

    _edit_memory(edited, 96)
    subprocess.run(["virsh", "-c", URI, "destroy", destroyed], check=True, capture_output=True)
    with structlog.testing.capture_logs() as logs:
        state = reconcile(d)
    rows = {v["name"]: v for v in state["vms"]}
    assert rows[edited]["sync"] == "OutOfSync"
    assert "memory" in rows[edited]["message"]
    assert "selfHeal off" in rows[edited]["message"]
    assert rows[destroyed]["sync"] == "OutOfSync"
    assert names()[destroyed] == PowerState.SHUTOFF  # reported, not reverted
    metrics = d.metrics.render().decode()
    assert 'reconciler_vms{host="trust-qemu",sync="OutOfSync"} 2.0' in metrics
    drift_events = {e["subject"]: e for e in logs if e["event"] == "drift"}
    assert set(drift_events) == {f"vm/{edited}", f"vm/{destroyed}"}
    assert any("memory" in f for f in drift_events[f"vm/{edited}"]["fields"])

    hc = tmp_path / "host.yaml"
    hc.write_text("name: trust-qemu\ndomainType: qemu\nnetworks:\n  pod: {user: {}}\n")
    out = subprocess.run(
        [
            str(BIN),
            "plan",
            "--repo",
            str(git_repo.path),
            "--connect",
            URI,
            "--host-config",
            str(hc),
            "--no-self-heal",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"vm/{edited}" in out.stdout
    assert "drift" in out.stdout


def test_metadata_and_device_events_trigger_a_check(tmp_path: Path, git_repo: GitRepo, hosts: None) -> None:
    name = f"{PREFIX}events"
    git_repo.write("vms/events.yaml", vm(name, strategy="Always"))
    git_repo.commit("one")
    Hypervisor.start_event_loop()
    d = daemon(write_config(tmp_path, git_repo.path, policy="  selfHeal: false\n"))
    assert reconcile(d)["reason"] == "Succeeded"
    assert reconcile(d)["reason"] == "Succeeded"  # a no-op: no event of the next minute is ours
    d.take()
    nic = tmp_path / "nic.xml"
    nic.write_text("<interface type='user'><model type='virtio'/></interface>")
    out = subprocess.run(
        ["virsh", "-c", URI, "attach-device", name, str(nic), "--live"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    wait_for("a trigger from the device-added event", lambda: "lifecycle" in d.triggers.queue)
    state = reconcile(d)
    rows = {v["name"]: v for v in state["vms"]}
    assert rows[name]["sync"] == "OutOfSync", rows[name]
    assert "interface" in rows[name]["message"], rows[name]


# -- 4. host moves ----------------------------------------------------------------------------


def two_hosts(test_uri: str = TEST_URI) -> str:
    return (
        f"hosts:\n  - connect: {URI}\n    host:\n      name: trust-qemu\n      claimUnselected: false\n"
        "      domainType: qemu\n      networks:\n        pod: {user: {}}\n"
        f"  - connect: {test_uri}\n    host:\n      name: trust-test\n      claimUnselected: false\n"
    )


def running_copies(name: str) -> int:
    return sum(1 for uri in (URI, TEST_URI) if names(uri).get(name) == PowerState.RUNNING)


def test_a_move_between_two_hosts_never_has_two_running_copies(
    tmp_path: Path, git_repo: GitRepo, hosts: None
) -> None:
    import threading

    name = f"{PREFIX}mover"
    git_repo.write("vms/mover.yaml", vm(name, strategy="Always", host="trust-test"))
    git_repo.commit("on the test host")
    d = daemon(write_config(tmp_path, git_repo.path, hosts=two_hosts()))
    assert reconcile(d)["reason"] == "Succeeded"
    assert names(TEST_URI)[name] == PowerState.RUNNING
    assert name not in names(URI)

    git_repo.write("vms/mover.yaml", vm(name, strategy="Always", host="trust-qemu"))
    git_repo.commit("move to the qemu host")
    most, stop = [0], threading.Event()

    def watch() -> None:
        while not stop.is_set():
            most[0] = max(most[0], running_copies(name))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        state = reconcile(d)  # qemu (first) waits; the test host moves its copy out
        rows = {(v["host"], v["name"]): v for v in state["vms"]}
        waiting = rows[("trust-qemu", name)]
        assert waiting["sync"] == "OutOfSync"
        assert "move trust-test → trust-qemu" in waiting["message"]
        # The old copy's graceful stop and undefine run on after the apply that started
        # them (the daemon's in-flight stops): gone without another reconcile.
        wait_for("the old copy moved out", lambda: name not in names(TEST_URI))
        assert d.schedule.requeue_at is not None  # the daemon plans again in a few seconds
        state = reconcile(d)  # that requeue: now the new copy starts
    finally:
        stop.set()
        watcher.join()
    assert names(URI)[name] == PowerState.RUNNING
    assert name not in names(TEST_URI)
    assert most[0] <= 1
    assert state["reason"] == "Succeeded"


def test_no_new_copy_while_the_old_host_is_unreachable(
    tmp_path: Path, git_repo: GitRepo, hosts: None
) -> None:
    name = f"{PREFIX}stuck"
    git_repo.write("vms/stuck.yaml", vm(name, strategy="Always", host="trust-test"))
    git_repo.commit("on the test host")
    assert (
        reconcile(daemon(write_config(tmp_path, git_repo.path, hosts=two_hosts())))["reason"] == "Succeeded"
    )
    git_repo.write("vms/stuck.yaml", vm(name, strategy="Always", host="trust-qemu"))
    git_repo.commit("move to the qemu host")
    gone = two_hosts(f"test+unix:///default?socket={tmp_path / 'no-such.sock'}")
    d = daemon(write_config(tmp_path, git_repo.path, hosts=gone))  # same state dir: the last known copies
    state = reconcile(d)
    assert name not in names(URI)  # not created, let alone started
    row = {(v["host"], v["name"]): v for v in state["vms"]}[("trust-qemu", name)]
    assert row["sync"] == "OutOfSync"
    assert "host trust-test is unreachable" in row["message"]
    assert names(TEST_URI)[name] == PowerState.RUNNING  # the old copy is untouched (unreachable)


# -- 6. restart windows --------------------------------------------------------------------


def test_a_future_window_defers_the_restart_while_live_changes_apply(hosts: None) -> None:
    import time as clock

    from reconciler.host.apply import apply_plan
    from reconciler.model import Rollout
    from reconciler.model.changes import Action
    from reconciler.settings.policy import PlanPolicy
    from reconciler.settings.windows import window
    from tests.helpers.qemu import domain_id, domain_xml, plan, rendered

    name = f"{PREFIX}window"
    before = rendered(name, domain_xml(name, vcpus=1, max_vcpus=2), rollout=Rollout.RESTART)
    with Hypervisor(URI) as hv:
        assert all(r.ok for r in apply_plan(plan(hv, name, [before]), hv))
        first_id = domain_id(hv, name)
        # vCPUs online 1 -> 2 (live) and the clock offset (restart-class), in one commit.
        after = rendered(
            name, domain_xml(name, vcpus=2, max_vcpus=2, clock="localtime"), rollout=Rollout.RESTART
        )
        now = clock.time()
        opens = datetime_in_a_year(now)
        policy = PlanPolicy(restart_windows=(window(f"0 3 {opens.day} {opens.month} *", "1h", "UTC"),))
        p = plan(hv, name, [after], policy, now=now)
        (c,) = p.changes
        assert c.action == Action.UPDATE
        assert c.restart_required
        assert f"graceful restart in the next restart window, {opens.year}-" in said(c)
        assert c.requeue_after_s > 0
        assert all(r.ok for r in apply_plan(p, hv))
        assert domain_id(hv, name) == first_id  # not restarted
        from reconciler.compare import essence as normalize

        running = normalize.essence(hv.running_xml(name))
        assert running["vcpu@current"] == "2"  # the live change applied now
        assert normalize.essence(hv.persistent_xml(name))["clock@offset"] == "localtime"  # staged
        # Still outside the window: nothing more; inside it: the restart.
        p = plan(hv, name, [after], policy, now=now + 60)
        assert p.changes[0].action == Action.UNCHANGED
        assert p.changes[0].restart_required
        p = plan(hv, name, [after], policy, now=p.changes[0].requeue_after_s + now + 60 + 1)
        assert p.changes[0].action == Action.RESTART
        assert all(r.ok for r in apply_plan(p, hv))
        assert domain_id(hv, name) != first_id


def datetime_in_a_year(now: float):  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime, timedelta

    return datetime.fromtimestamp(now, UTC) + timedelta(days=200)
