"""``plan`` and ``apply`` say the batches of paced restarts and the probe each waits for
(test:///default; the PR diff's own surface: tests/unit/test_prdiff.py).

Covers: a restart-class change to a pool of 3 with ``maxUnavailable: 1`` whose replicas
have a ``guestAgentPing`` readiness probe is planned as 3 batches of 1, each waiting for
Ready (guestAgentPing), in ``plan``'s text and JSON and in what ``apply`` prints; the
same pool without a probe waits for Ready (running). VM names are unique to this module.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.host.hypervisor import Hypervisor
from tests.helpers.domains import drop_domains

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test

URI = "test:///default"
NAMES = tuple(f"planbatch-web-{i}" for i in range(3))
POOL = """apiVersion: pool.kubevirt.io/v1beta1
kind: VirtualMachinePool
metadata: {{name: planbatch-web}}
spec:
  replicas: 3
  maxUnavailable: 1
  updateStrategy: {{proactive: {{selectionPolicy: {{sortPolicy: AscendingOrder}}}}}}
  selector: {{matchLabels: {{app: planbatch}}}}
  virtualMachineTemplate:
    metadata:
      labels: {{app: planbatch}}
      annotations: {{reconciler.kubevirt.io/rollout: Restart}}
    spec:
      runStrategy: Always
      template:
        spec:
          {probe}
          domain:
            machine: {{type: {machine}}}
            devices: {{}}
            memory: {{guest: 64Mi}}
"""
PROBE = "readinessProbe: {guestAgentPing: {}, periodSeconds: 5}"
BATCHES = "rollout: restart in 3 batches of 1: " + ", ".join(NAMES) + "; each waits for Ready ({})"


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as h:  # open: the test driver's domains live while a connection is
        yield h
        drop_domains(h, NAMES)


@pytest.mark.parametrize(("probe", "waits"), [(PROBE, "guestAgentPing"), ("", "running")])
def test_plan_and_apply_show_the_batches_and_the_probe_each_waits_for(
    git_repo: GitRepo, hv: Hypervisor, capsys: pytest.CaptureFixture[str], probe: str, waits: str
) -> None:
    git_repo.write("pools/web.yaml", POOL.format(probe=probe, machine="q35"))
    git_repo.commit("a pool")
    args = ["--repo", str(git_repo.path), "--connect", URI]
    assert cli.main(["apply", *args, "--yes"]) == 0
    assert {d.name for d in hv.list_domains()} >= set(NAMES)
    capsys.readouterr()
    git_repo.write("pools/web.yaml", POOL.format(probe=probe, machine="pc"))
    git_repo.commit("a restart-class change")

    assert cli.main(["plan", *args]) == 2
    out = capsys.readouterr().out
    assert BATCHES.format(waits) in out, out
    assert cli.main(["plan", *args, "-o", "json"]) == 2
    (doc,) = json.loads(capsys.readouterr().out)["plans"]
    assert doc["rollout"]["batches"] == [{"vms": [f"vm/{n}"], "waitsFor": waits} for n in NAMES]

    assert cli.main(["apply", *args, "--yes"]) == 0
    assert BATCHES.format(waits) in capsys.readouterr().out
