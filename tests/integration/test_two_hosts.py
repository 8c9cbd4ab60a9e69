"""Hosts are independent: one daemon driving ``qemu:///system`` and ``test+unix:///default``.

Covers: a VM pinned to host1 that needs dedicated CPUs (host1 dedicates some, host2
none) and a network only host1 maps never fails host2's reconcile: each host plans
only the VMs it runs, both revisions apply, each VM is defined on its own host only,
``/healthz`` is 200. A VM of host1 that host1 cannot run is an error of the revision on
host1 alone (held at its last applied revision there), while host2 applies it.

Domains are named ``rtest-hosts-*-<pid>``; removed from both hosts at the end.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from reconciler.host.hypervisor import Hypervisor
from tests.helpers.daemon import Daemon, vm_rows, wait_for

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)
HOST1, HOST2 = "qemu:///system", "test+unix:///default"


def name(what: str) -> str:
    return f"rtest-hosts-{what}-{os.getpid()}"


def vm(vm_name: str, host: str, extra: str = "") -> str:
    return f"""\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {vm_name}
spec:
  runStrategy: Halted
  template:
    spec:
      nodeSelector:
        kubernetes.io/hostname: {host}
      domain:
        devices: {{}}
        memory:
          guest: 64Mi
{extra}"""


PINNED = """\
        cpu:
          cores: 1
          dedicatedCpuPlacement: true
"""
NET = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Halted
  template:
    spec:
      nodeSelector:
        kubernetes.io/hostname: host1
      domain:
        devices:
          interfaces:
            - name: fast
              bridge: {{}}
        memory:
          guest: 64Mi
      networks:
        - name: fast
          multus:
            networkName: fast
"""


def defined(uri: str) -> set[str]:
    with Hypervisor(uri) as hv:
        return {d.name for d in hv.list_domains() if d.name.startswith("rtest-hosts-")}


@pytest.fixture
def both_hosts(qemu_uri: str) -> Iterator[None]:
    yield
    for uri in (HOST1, HOST2):
        with Hypervisor(uri) as hv:
            for d in hv.list_domains():
                if d.name.startswith("rtest-hosts-") and d.name.endswith(f"-{os.getpid()}"):
                    if d.active:
                        hv.destroy(d.name)
                    hv.undefine(d.name)


def test_a_vm_of_another_host_never_fails_this_one(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], both_hosts: None
) -> None:
    pinned, net, other = name("pinned"), name("net"), name("two")
    git_repo.write(
        "vms/pinned.yaml", vm(pinned, "host1").replace("      domain:\n", "      domain:\n" + PINNED)
    )
    git_repo.write("vms/net.yaml", NET.format(name=net))
    git_repo.write("vms/two.yaml", vm(other, "host2"))
    good = git_repo.commit()
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        f"source: {{repo: {git_repo.path}}}\nlisten: 127.0.0.1:0\n"
        "hosts:\n"
        f"  - connect: {HOST1}\n"
        "    host: {name: host1, domainType: qemu, dedicatedCpus: '0', "
        "networks: {pod: {user: {}}, multus: {fast: {bridge: eth0}}}}\n"
        f"  - connect: {HOST2}\n"
        "    host: {name: host2}\n"
    )
    d = start("--config", str(cfg))
    state = d.wait_applied(good)
    assert {h: v["reason"] for h, v in state["hosts"].items()} == {"host1": "Succeeded", "host2": "Succeeded"}
    assert defined(HOST1) >= {pinned, net}
    assert other not in defined(HOST1)
    assert other in defined(HOST2)
    assert not defined(HOST2) & {pinned, net}
    rows = vm_rows(state)
    assert (rows[pinned]["host"], rows[other]["host"]) == ("host1", "host2")
    wait_for("healthz 200", lambda: d.get("/healthz")[0] == 200)

    # A VM host1 cannot run (more dedicated CPUs than it has): host1 holds, host2 applies.
    greedy, later = name("greedy"), name("later")
    git_repo.write(
        "vms/greedy.yaml",
        vm(greedy, "host1").replace(
            "      domain:\n", "      domain:\n" + PINNED.replace("cores: 1", "cores: 4")
        ),
    )
    git_repo.write("vms/later.yaml", vm(later, "host2"))
    bad = git_repo.commit("one VM too many for host1")
    state = wait_for(
        "both hosts reconciled",
        lambda: (
            (s := d.state()).get("attempted_revision") == bad
            and all(h.get("attempted_revision") == bad for h in s.get("hosts", {}).values())
            and s
        ),
    )
    assert state["hosts"]["host1"]["reason"] == "RenderFailed"
    assert state["hosts"]["host1"]["held"]["enforced"] == good
    assert state["hosts"]["host2"]["reason"] == "Succeeded"
    assert state["hosts"]["host2"]["applied_revision"] == bad
    assert later in defined(HOST2)
    assert greedy not in defined(HOST1)
