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

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.daemon import Daemon
    from tests.helpers.git import GitRepo

PREFIX = "rtest-probe-"
READY, MUTE, NET = PREFIX + "ready", PREFIX + "mute", PREFIX + "net"
BOOT_S = 240.0  # a hang guard for a boot under TCG on a busy machine, not a speed check
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
        "intervals:\n  resync: 1h\nlisten: 127.0.0.1:0\nlog: {level: debug}\n"
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
        git_repo.write(
            "vms/ready.yaml",
            probed(
                READY,
                {"guestAgentPing": {}, **every_second},
                # the boot's time to come up first: then two failures in a row end the guest
                {
                    "exec": {"command": HEALTHY},
                    "initialDelaySeconds": 60,
                    "periodSeconds": 2,
                    "failureThreshold": 2,
                },
            ),
        )
        git_repo.write("vms/mute.yaml", probed(MUTE, {"guestAgentPing": {}, **every_second}, agent=False))
        git_repo.write(
            "vms/net.yaml",
            probed(
                NET,
                {"httpGet": {"port": 80, "path": "/healthz"}, **every_second},
                # a TCG guest on a loaded machine may take more than the default second
                {
                    "tcpSocket": {"port": 8080},
                    "initialDelaySeconds": 60,
                    "periodSeconds": 2,
                    "timeoutSeconds": 5,
                },
                ip=f"{bridge.guest_ip(2)}/24",
            ),
        )
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

        assert guest_exec("qemu:///system", READY, "/bin/rm", "/tmp/healthy") == 0
        wait_for(
            "the liveness probe to end the guest and its restart",
            lambda: row(READY).get("liveness_restarts") == 1,
            timeout=BOOT_S,
        )
        wait_for("the restarted guest Ready again", lambda: row(READY).get("ready") is True, timeout=BOOT_S)
        with Hypervisor("qemu:///system") as hv:
            live = hv.get_domain(READY)
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
