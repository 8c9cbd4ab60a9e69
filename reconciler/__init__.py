"""reconciler: KubeVirt-style virtual machines on plain libvirt hosts, GitOps-style."""

__version__ = "0.1.0"
