"""Probes against a real guest: `reconciler run` on libvirtd + QEMU with the minimal test
guest (``tests/helpers/guest.py``), domains ``rtest-probe-*``.

Covers:
- a VM whose readiness probe is ``guestAgentPing`` is not Ready when first recorded (the
  guest still boots) and becomes Ready only once its guest agent answers, the row saying
  ``readiness guestAgentPing: passed``; a guest booted without its agent stays not Ready
  with ``no answer from the guest agent``;
- an ``exec`` liveness probe (``test -f /tmp/healthy``, through ``guest-exec``) that
  starts failing once the file is removed through ``guest-exec``: the daemon ends the
  guest and its run strategy starts it again (a crash restart in its mark, the row's
  ``livenessRestarts``), and the new boot, with the file back, is Ready again;
- over the bridge the test makes: an ``httpGet`` readiness probe to ``/healthz`` on the
  guest's address, which comes from the guest agent (``addressSource: agent``), and a
  ``tcpSocket`` liveness probe to port 8080 that keeps passing.

The liveness probes come with a second commit, once the guests are Ready (a probe adds
nothing to the domain: the guests run on; its initial delay counts from then), so no
initial delay has to outlast a TCG boot on a loaded machine; once the exec probe has
ended its guest, a third commit takes it off again, so the new boot is never raced by
it (its ``livenessRestarts`` kept).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import yaml

from reconciler.host.hypervisor import Hypervisor
from tests.helpers.daemon import vm_rows, wait_for
from tests.helpers.guest import (
    IMAGE,
    agent_ping,
    build_test_guest,
    guest_bridge,
    guest_exec,
    vm_manifest,
)
from tests.helpers.qemu import domain_id

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.daemon import Daemon
    from tests.helpers.git import GitRepo

PREFIX = "rtest-probe-"
READY, MUTE, NET = PREFIX + "ready", PREFIX + "mute", PREFIX + "net"
BOOT_S = 240.0  # a hang guard for a boot under TCG on a busy machine, not a speed check
LIVE = {"periodSeconds": 2, "failureThreshold": 2}  # the guests up: two failures in a row end one
# the liveness probes' initial delay: every boot (the restart's too) has its agent and
# listeners up by then; the liveness restart waits it out, so it sets the test's length
BOOTED_S = 30
HEALTHY = ["/bin/test", "-f", "/tmp/healthy"]
pytestmark = pytest.mark.timeout(900)


def config(repo: Path, images: Path, workdir: Path, bridge: str) -> str:
    """The daemon's config: the test guest's host config (``host_config_yaml``'s, the image
    directory allowed through its parent), its pod network the test's bridge."""
    host = yaml.safe_dump(
        {
            "name": "h1",
            "allowedDirectories": [str(images.parent), str(workdir)],
            "volumeDirectory": str(workdir / "volumes"),
            "domainType": "qemu",
            "defaults": {"graphics": "none"},
            "images": {IMAGE: {"path": str(images), "format": "raw"}},
            "networks": {"pod": {"bridge": bridge}},
        },
        sort_keys=False,
    )
    host = "".join(f"  {line}\n" for line in host.splitlines())
    return (
        f"source:\n  repo: {repo}\nconnect: qemu:///system\nhost:\n{host}"
        "intervals:\n  resync: 1h\n  fetch: 1s\nlisten: 127.0.0.1:0\nlog: {level: debug}\n"
    )


def probed(name: str, readiness: dict[str, Any], liveness: dict[str, Any] | None = None, **kw: Any) -> str:
    manifest = vm_manifest(name, **kw)
    spec = manifest["spec"]["template"]["spec"]
    spec["readinessProbe"] = readiness
    if liveness is not None:
        spec["livenessProbe"] = liveness
    return str(yaml.safe_dump(manifest, sort_keys=False))


def test_probes_against_the_guest(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], qemu_workdir: Path
) -> None:
    images = build_test_guest()
    with guest_bridge() as bridge:
        every_second = {"periodSeconds": 1}
        ready_probe = {"guestAgentPing": {}, **every_second}
        # a TCG guest on a loaded machine may take more than the default second
        web_probe = {"httpGet": {"port": 80, "path": "/healthz"}, **every_second, "timeoutSeconds": 5}
        web_live = {"tcpSocket": {"port": 8080}, **LIVE, "timeoutSeconds": 5}
        ip = f"{bridge.guest_ip(2)}/24"
        git_repo.write("vms/ready.yaml", probed(READY, ready_probe))
        git_repo.write("vms/mute.yaml", probed(MUTE, ready_probe, agent=False))
        git_repo.write("vms/net.yaml", probed(NET, web_probe, ip=ip))
        sha = git_repo.commit()
        path = tmp_path / "config.yaml"
        path.write_text(config(git_repo.path, images, qemu_workdir, bridge.name))
        d = start("--config", str(path))
        first = vm_rows(d.wait_applied(sha))
        assert first[READY]["ready"] is False  # recorded as the guest starts: its agent not up yet
        assert first[READY]["ready_reason"] in ("ProbePending", "ProbeFailed")

        def row(name: str) -> dict[str, Any]:
            return vm_rows(d.state()).get(name, {})

        wait_for("the probed guest Ready", lambda: row(READY).get("ready") is True, timeout=BOOT_S)
        assert agent_ping("qemu:///system", READY)
        assert row(READY)["ready_reason"] == "ProbePassed"
        assert row(READY)["probe"].startswith("readiness guestAgentPing: passed")
        wait_for("the mute guest's answer", lambda: "guestAgentPing" in row(MUTE).get("probe", ""))
        assert row(MUTE)["ready"] is False
        assert row(MUTE)["probe"] == "readiness guestAgentPing: no answer from the guest agent"

        wait_for("the web guest Ready", lambda: row(NET).get("ready") is True, timeout=BOOT_S)
        assert (row(NET)["address"], row(NET)["address_source"]) == (bridge.guest_ip(2), "agent")
        assert row(NET)["probe"].startswith(f"readiness httpGet {bridge.guest_ip(2)}: passed")

        with Hypervisor("qemu:///system") as hv:
            ids = {n: domain_id(hv, n) for n in (READY, NET)}
        git_repo.write("vms/ready.yaml", probed(READY, ready_probe, {"exec": {"command": HEALTHY}, **LIVE}))
        git_repo.write("vms/net.yaml", probed(NET, web_probe, web_live, ip=ip))
        d.wait_applied(git_repo.commit("liveness probes"))
        assert guest_exec("qemu:///system", READY, "/bin/rm", "/tmp/healthy") == 0
        wait_for(
            "the liveness probe to end the guest and its restart",
            lambda: row(READY).get("liveness_restarts") == 1,
            timeout=BOOT_S,
        )
        git_repo.write("vms/ready.yaml", probed(READY, ready_probe))  # the new boot not raced by it
        d.wait_applied(git_repo.commit("the exec liveness probe off"))
        wait_for("the restarted guest Ready again", lambda: row(READY).get("ready") is True, timeout=BOOT_S)
        assert row(READY)["liveness_restarts"] == 1
        with Hypervisor("qemu:///system") as hv:
            live = hv.get_domain(READY)
            assert domain_id(hv, NET) == ids[NET]  # a probe added runs beside the guest: no restart
            assert domain_id(hv, READY) != ids[READY]
        assert live is not None
        assert live.mark is not None
        assert live.mark.restarts == 1  # started again as a crash restart
        ended = [
            e for e in d.events("liveness probe failed: guest ended") if e.get("subject") == f"vm/{READY}"
        ]
        assert [e["why"] for e in ended] == ["exec: exit 1"]
        net_ended = [
            e for e in d.events("liveness probe failed: guest ended") if e.get("subject") == f"vm/{NET}"
        ]
        assert [e["why"] for e in net_ended] == []  # its tcpSocket liveness probe kept passing
        assert row(NET)["liveness_restarts"] == 0
        net_live = f"liveness tcpSocket {bridge.guest_ip(2)}: passed"  # it ran, and passes
        wait_for("the web guest's liveness answer shown", lambda: net_live in row(NET)["probe"])
