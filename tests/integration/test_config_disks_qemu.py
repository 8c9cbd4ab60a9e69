"""Config disks on real QEMU: ConfigMaps of the repository and of the host, a host-side Secret.

Covers: a VM with a ``configMap`` volume (a ConfigMap in the repository), another
(a ConfigMap only in the host's configMapsDirectory) and a ``secret`` volume (a
Secret in the host's secretsDirectory) is applied and started;
each ISO (read back from disk) holds one file per key with the ``cfgdata`` label; the
Secret's ISO is readable by its owner only; the secret value appears nowhere in the
domain XML, the plan or the reconcile's messages; a re-plan changes nothing.
"""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

from reconciler.host.hypervisor import Hypervisor
from reconciler.host.provision import read_iso
from reconciler.model import PowerState
from reconciler.model.results import Reason
from reconciler.plan.text import format_plan
from reconciler.wording.reasons import said
from tests.helpers.qemu import URI, host, snapshot

if TYPE_CHECKING:
    from pathlib import Path

    pass

PREFIX = "rtest-cfgdisk-"
VM = f"""apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {PREFIX}app
spec:
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 1
      domain:
        memory:
          guest: 64Mi
        devices:
          autoattachGraphicsDevice: false
          disks:
            - name: settings
              cdrom: {{bus: sata}}
            - name: creds
              cdrom: {{bus: sata}}
            - name: local
              cdrom: {{bus: sata}}
      volumes:
        - name: settings
          configMap: {{name: app-settings}}
        - name: creds
          secret: {{secretName: app-creds}}
        - name: local
          configMap: {{name: site-local}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-settings
data:
  mode: prod
"""


def test_config_map_and_secret_volumes_reach_their_isos(qemu_workdir: Path) -> None:
    repo = qemu_workdir
    from reconciler.reconcile import reconcile_once

    (repo / "secrets" / "default" / "app-creds").mkdir(parents=True)
    (repo / "secrets" / "default" / "app-creds" / "password").write_text("hunter2-only-in-the-iso")
    (repo / "configmaps" / "default" / "site-local").mkdir(parents=True)
    (repo / "configmaps" / "default" / "site-local" / "zone").write_text("eu-west\n")
    (repo / "vms" / "app.yaml").write_text(VM)
    target = host(repo, secrets_dir=str(repo / "secrets"), config_maps_dir=str(repo / "configmaps"))
    with Hypervisor(URI) as hv:
        plan, status = reconcile_once(snapshot(repo, "a"), "", target, hv)
        assert status.reason == Reason.SUCCEEDED, status.message
        assert hv.state(PREFIX + "app") == PowerState.RUNNING
        isos = {p.name: p for p in (repo / "volumes").rglob("*.iso")}
        assert read_iso(str(isos["settings.iso"])) == ("cfgdata", {"mode": "prod"})
        assert read_iso(str(isos["creds.iso"])) == ("cfgdata", {"password": "hunter2-only-in-the-iso"})
        assert read_iso(str(isos["local.iso"])) == ("cfgdata", {"zone": "eu-west\n"})
        assert stat.S_IMODE(isos["creds.iso"].stat().st_mode) & 0o077 == 0  # owner only
        domain = hv.get_domain(PREFIX + "app")
        assert domain is not None
        shown = domain.persistent_xml + format_plan(plan, verbose=True) + status.message
        shown += "".join(r.message for r in status.results)
        assert "hunter2" not in shown
        again, status = reconcile_once(snapshot(repo, "a"), "", target, hv, dry_run=True)
        assert not again.has_changes, [(c.name, c.action, said(c)) for c in again.changes if not c.is_noop]
