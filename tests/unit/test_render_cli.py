"""``reconciler render`` on files: the whole pure pipeline up to domain XML.

Covers: ``-f`` files go through parse, catalog, expand (instancetype + preference)
and render; output is each VM's volume comments then its domain XML; a VM whose
hostDisk escapes the allowed directories is reported on stderr with its file and
the exit code is 1 while the other VMs are still printed; an invalid
``--host-config`` is reported with file and line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler import cli

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo

CATALOG = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: small
spec:
  cpu:
    guest: 2
  memory:
    guest: 1Gi
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: linux
spec:
  devices:
    preferredDiskBus: virtio
    preferredInterfaceModel: virtio
"""

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Always
  instancetype:
    name: small
  preference:
    name: linux
  template:
    spec:
      domain:
        devices: {{}}
      volumes:
        - name: root
          hostDisk:
            path: {path}
            type: DiskOrCreate
            capacity: 2Gi
"""


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    (tmp_path / "good.yaml").write_text(VM.format(name="good", path="/var/lib/libvirt/images/good.qcow2"))
    return [str(tmp_path / "catalog.yaml"), str(tmp_path / "good.yaml")]


def args(files: list[str], *extra: str) -> list[str]:
    out = ["render"]
    for f in files:
        out += ["-f", f]
    return out + list(extra)


def test_render_prints_volumes_and_domain(files: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(args(files)) == 0
    out = capsys.readouterr().out
    assert "<!-- vm/good from " in out
    assert "runStrategy Always" in out
    assert "<!-- volume: file /var/lib/libvirt/images/good.qcow2: qcow2 2147483648 bytes, sparse -->" in out
    assert "<name>good</name>" in out
    assert '<topology sockets="2" cores="1" threads="1" />' in out
    assert '<target dev="vda" bus="virtio" />' in out
    assert '<memory unit="b">1073741824</memory>' in out


def test_escaping_vm_is_reported_and_others_still_rendered(
    files: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(VM.format(name="bad", path="/etc/shadow"))
    assert cli.main(args([*files, str(bad)])) == 1
    captured = capsys.readouterr()
    assert "<name>good</name>" in captured.out
    assert "<name>bad</name>" not in captured.out
    assert f"{bad}" in captured.err
    assert (
        "vm/bad: spec.template.spec.volumes[0].hostDisk.path: path '/etc/shadow' is outside" in captured.err
    )


def test_bad_host_config(files: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hc = tmp_path / "host.yaml"
    hc.write_text("name: h\nnetworks:\n  pod: {wifi: x}\n")
    assert cli.main(args(files, "--host-config", str(hc))) == 1
    assert f"{hc}:3:" in capsys.readouterr().err


def test_render_from_a_git_revision(git_repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    repo = git_repo
    repo.write("catalog.yaml", CATALOG)
    repo.write("vms/web.yaml", VM.format(name="web", path="/var/lib/libvirt/images/web.qcow2"))
    repo.commit("add web")
    # the work tree is never read: only the committed revision
    repo.write("vms/web.yaml", "not: [valid")
    assert cli.main(["render", "--repo", str(repo.path), "--ref", "HEAD"]) == 0
    out = capsys.readouterr().out
    assert "<!-- vm/web from vms/web.yaml: runStrategy Always -->" in out
    assert "<name>web</name>" in out
