"""Host limits against a real libvirtd + QEMU: refused at plan time, nothing defined.

Covers: a VM with more vCPUs than the host's machine type takes (its ``maxCpus`` in
the host capabilities, 288 for q35 on QEMU 7.2) passes the hostless ``validate``
(within the global 4096) but is a plan error naming the file and line on the host,
and ``apply`` of that revision defines no domain, not even the valid VM next to it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler import cli
from reconciler.host.hypervisor import Hypervisor

if TYPE_CHECKING:
    import pytest

    from tests.helpers.git import GitRepo

NAME = "rtest-limits"

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        machine:
          type: q35
        cpu:
          sockets: {sockets}
        memory:
          guest: 64Mi
        devices: {{}}
"""


def test_vcpus_beyond_the_machine_type_are_a_plan_error(
    qemu_uri: str, git_repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    with Hypervisor(qemu_uri) as hv:
        caps_xml, _ = hv.capabilities_xml()
    q35 = ET.fromstring(caps_xml).find(".//guest/arch[@name='x86_64']/machine[.='q35']")
    assert q35 is not None
    most = int(q35.get("maxCpus", "0"))
    git_repo.write("vms/ok.yaml", VM.format(name=f"{NAME}-ok", sockets=1))
    git_repo.write("vms/big.yaml", VM.format(name=f"{NAME}-big", sockets=most + 1))
    git_repo.commit()
    repo = str(git_repo.path)
    assert cli.main(["validate", "--repo", repo]) == 0  # hostless: no machine limit known
    capsys.readouterr()
    assert cli.main(["plan", "--repo", repo, "--connect", qemu_uri]) == 1
    err = capsys.readouterr().err
    assert re.search(
        rf"vms/big.yaml:\d+:\d+: .*{most + 1} vCPUs: machine type 'q35' on this host takes at most {most}",
        err,
    )
    assert cli.main(["apply", "--repo", repo, "--connect", qemu_uri]) == 1
    with Hypervisor(qemu_uri) as hv:
        assert hv.get_domain(f"{NAME}-ok") is None
        assert hv.get_domain(f"{NAME}-big") is None
