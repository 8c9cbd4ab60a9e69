"""YAML documents the tests commit: VirtualMachines and an instancetype catalog.

Output: ``vm_yaml`` (a small VM by name, memory and run strategy), ``VM`` (a labelled VM
template, ``{name}``), ``CATALOG`` (two cluster instancetypes and a preference,
``{small_memory}`` and ``{topology}``) and ``VM_WITH_TYPE`` (a VM using them, ``{name}``,
``{strategy}``, ``{instancetype}``). Text only.
"""

from __future__ import annotations


def vm_yaml(name: str, memory: str = "64Mi", strategy: str = "Always") -> str:
    return f"""\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: {strategy}
  template:
    spec:
      domain:
        devices: {{}}
        memory:
          guest: {memory}
"""


VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
  labels:
    app: fleet
spec:
  runStrategy: Always
"""


CATALOG = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: u1.small
spec:
  cpu:
    guest: 1
  memory:
    guest: {small_memory}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: u1.medium
spec:
  cpu:
    guest: 2
  memory:
    guest: 2Gi
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: fedora
spec:
  cpu:
    preferredCPUTopology: {topology}
  devices:
    preferredDiskBus: virtio
"""


VM_WITH_TYPE = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: {strategy}
  instancetype:
    name: {instancetype}
  preference:
    name: fedora
  template:
    spec:
      domain:
        devices: {{}}
      volumes:
        - name: root
          hostDisk:
            path: /var/lib/libvirt/images/{name}-root.qcow2
            type: DiskOrCreate
            capacity: 10Gi
"""
