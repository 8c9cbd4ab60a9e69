"""DataVolumes from a DataSource (``sourceRef``), and ``inferFromVolume`` through one.

Covers: a dataVolumeTemplate's ``sourceRef`` to a DataSource clones the image the host
config maps to ``DataSource <namespace>/<name>`` into a pool volume; the DataSource of
the repository gives the VM its instancetype and preference through KubeVirt's
default-instancetype / default-preference labels (``inferFromVolume``); an unmapped
DataSource is an error at the field saying what to map.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler import render, source
from reconciler.desired import desired_state
from reconciler.settings.host import HostConfig, ImageSource
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from tests.helpers.git import GitRepo

REPO = {
    "catalog.yaml": """apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: u1.small
spec:
  cpu: {guest: 1}
  memory: {guest: 2Gi}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: fedora
spec:
  devices:
    preferredDiskBus: virtio
""",
    "images/fedora.yaml": """apiVersion: cdi.kubevirt.io/v1beta1
kind: DataSource
metadata:
  name: fedora
  namespace: golden
  labels:
    instancetype.kubevirt.io/default-instancetype: u1.small
    instancetype.kubevirt.io/default-preference: fedora
spec:
  source:
    pvc: {name: fedora-41, namespace: golden}
""",
    "vms/web.yaml": """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  runStrategy: Halted
  instancetype: {inferFromVolume: root}
  preference: {inferFromVolume: root}
  dataVolumeTemplates:
    - metadata: {name: web-root}
      spec:
        sourceRef: {kind: DataSource, name: fedora, namespace: golden}
        storage:
          resources: {requests: {storage: 20Gi}}
  template:
    spec:
      domain:
        devices:
          disks:
            - name: root
              disk: {}
      volumes:
        - name: root
          dataVolume: {name: web-root}
""",
}


def test_a_data_source_is_cloned_and_gives_the_defaults(git_repo: GitRepo) -> None:
    for path, text in REPO.items():
        git_repo.write(path, text)
    git_repo.commit()
    host = HostConfig(
        images={"DataSource golden/fedora": ImageSource("/var/lib/libvirt/images/fedora-41.qcow2")}
    )
    d = desired_state(source.read_snapshot(git_repo.path), "", host, render.HostCaps.default())
    assert d.all_errors == ()
    (web,) = d.rendered
    (volume,) = [v for v in web.volumes if v.kind == "pool-volume"]
    assert (volume.path, volume.backing, volume.capacity) == (
        "web-root",
        "/var/lib/libvirt/images/fedora-41.qcow2",
        20 * 2**30,
    )
    assert [r.name for r in web.revisions] == ["u1.small", "fedora"]  # inferred through the DataSource
    assert '<target dev="vda" bus="virtio" />' in web.xml  # the preference's disk bus


def test_an_unmapped_data_source_says_what_to_map(git_repo: GitRepo) -> None:
    for path, text in REPO.items():
        git_repo.write(path, text)
    git_repo.commit()
    d = desired_state(source.read_snapshot(git_repo.path), "", HostConfig(), render.HostCaps.default())
    (error,) = map(words, d.all_errors)
    assert error.startswith("vms/web.yaml:")
    assert (
        "spec.dataVolumeTemplates[0].spec.sourceRef: 'DataSource golden/fedora' is not in the host config's image map"
        in error
    )
