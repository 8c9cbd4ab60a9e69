"""Secrets from a host directory on real QEMU: the guest's cloud-init ISO carries them.

Covers: a VM whose user data comes from a host-side Secret (``secretRef``) and whose
SSH keys come from another (``accessCredentials``, noCloud) is applied and started;
its cloud-init ISO (read back from disk) holds the Secret's user data plus the keys
as ``ssh_authorized_keys``, and is readable by its owner only; the secret value
appears nowhere in the domain XML, the plan text or the reconcile's messages.
"""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

from reconciler.host.hypervisor import Hypervisor
from reconciler.host.provision import read_iso
from reconciler.model import PowerState, Reason
from reconciler.plan.build import format_plan
from tests.integration.test_apply_qemu import URI
from tests.integration.test_host_facts_qemu import host, snapshot

if TYPE_CHECKING:
    from pathlib import Path

    pass

PREFIX = "rtest-secrets-"
SECRET = "#cloud-config\nchpasswd: {expire: false}\npassword: hunter2-only-in-the-iso\n"
VM = f"""apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {PREFIX}web
spec:
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 1
      accessCredentials:
        - sshPublicKey:
            source: {{secret: {{secretName: web-keys}}}}
            propagationMethod: {{noCloud: {{}}}}
      domain:
        memory:
          guest: 64Mi
        devices:
          autoattachGraphicsDevice: false
          disks:
            - name: cidata
              disk: {{bus: virtio}}
      volumes:
        - name: cidata
          cloudInitNoCloud:
            secretRef: {{name: web-userdata}}
"""


def test_host_side_secrets_reach_the_iso_and_nothing_else(qemu_workdir: Path) -> None:
    repo = qemu_workdir
    from reconciler.reconcile import reconcile_once

    secrets = repo / "secrets" / "default"
    (secrets / "web-userdata").mkdir(parents=True)
    (secrets / "web-userdata" / "userdata").write_text(SECRET)
    (secrets / "web-keys").mkdir()
    (secrets / "web-keys" / "key1").write_text("ssh-ed25519 AAAAC3Nza-test-key test@example\n")
    (repo / "vms" / "web.yaml").write_text(VM)
    target = host(repo, secrets_dir=str(repo / "secrets"))
    with Hypervisor(URI) as hv:
        plan, status = reconcile_once(snapshot(repo, "a"), "", target, hv)
        assert status.reason == Reason.SUCCEEDED, status.message
        assert hv.state(PREFIX + "web") == PowerState.RUNNING
        xml = hv.get_domain(PREFIX + "web").persistent_xml  # type: ignore[union-attr]
        (iso_path,) = list((repo / "volumes").rglob("*.iso"))
        label, files = read_iso(str(iso_path)) or ("", {})
        assert label == "cidata"
        assert files["user-data"].startswith(SECRET)
        assert (
            'ssh_authorized_keys:\n  - "ssh-ed25519 AAAAC3Nza-test-key test@example"\n' in files["user-data"]
        )
        assert stat.S_IMODE(iso_path.stat().st_mode) & 0o077 == 0  # owner only
        shown = (
            xml
            + format_plan(plan, verbose=True)
            + status.message
            + "".join(r.message for r in status.results)
        )
        assert "hunter2" not in shown
