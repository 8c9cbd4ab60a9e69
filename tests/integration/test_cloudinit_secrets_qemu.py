"""Secrets from a host directory on real QEMU: the guest's cloud-init ISO carries them.

Covers: a VM whose user data comes from a host-side Secret (``secretRef``) and whose
SSH keys come from another (``accessCredentials``, noCloud) is applied and started;
its cloud-init ISO (read back from disk) holds the Secret's user data plus the keys
as ``ssh_authorized_keys``, and is readable by its owner only; the secret value
appears nowhere in the domain XML, the plan text or the reconcile's messages.

A VM whose user data comes from a ``secretGenerator`` Secret of the repository
(name hash suffix rewritten through ``configurations``) needs no secretsDirectory:
its ISO carries the Secret; a new value is a restart-class change of the VM named by
the Secret alone, the ISO is rewritten and the running guest stays RestartRequired
until its next cold boot; the value is in no XML, plan (text or JSON), message or log.
"""

from __future__ import annotations

import json
import stat
from typing import TYPE_CHECKING

import structlog

from reconciler.host.hypervisor import Hypervisor
from reconciler.host.provision import read_iso
from reconciler.model import PowerState
from reconciler.model.results import Reason
from reconciler.plan.output import plan_document
from reconciler.plan.text import format_plan
from reconciler.wording.reasons import said
from tests.helpers.qemu import URI, host, snapshot

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


GENERATED = f"""apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {PREFIX}gen
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
            - name: cidata
              disk: {{bus: virtio}}
      volumes:
        - name: cidata
          cloudInitNoCloud:
            secretRef: {{name: gen-userdata}}
"""
KUSTOMIZATION = """resources: [vms/gen.yaml]
configurations: [namerefs.yaml]
secretGenerator:
  - name: gen-userdata
    files: [userdata=userdata.txt]
"""
NAMEREFS = """nameReference:
  - kind: Secret
    fieldSpecs:
      - {path: spec/template/spec/volumes/cloudInitNoCloud/secretRef/name, kind: VirtualMachine}
"""


def test_a_generated_secret_reaches_the_iso_and_its_change_is_named_only(qemu_workdir: Path) -> None:
    repo = qemu_workdir
    from reconciler.reconcile import reconcile_once

    first = "#cloud-config\npassword: first-gen-value-7f3a\n"
    second = "#cloud-config\npassword: second-gen-value-9c1d\n"
    (repo / "vms" / "gen.yaml").write_text(GENERATED)
    (repo / "kustomization.yaml").write_text(KUSTOMIZATION)
    (repo / "namerefs.yaml").write_text(NAMEREFS)
    (repo / "userdata.txt").write_text(first)
    target = host(repo)  # no secretsDirectory: the Secret is the build's
    name = PREFIX + "gen"
    shown: list[str] = []
    with structlog.testing.capture_logs() as logs, Hypervisor(URI) as hv:
        plan, status = reconcile_once(snapshot(repo, "a"), "", target, hv)
        assert status.reason == Reason.SUCCEEDED, status.message
        assert hv.state(name) == PowerState.RUNNING
        (iso_path,) = list((repo / "volumes").rglob("*.iso"))
        assert read_iso(str(iso_path)) == (
            "cidata",
            {"meta-data": f"instance-id: {name}.default\nlocal-hostname: {name}\n", "user-data": first},
        )
        assert stat.S_IMODE(iso_path.stat().st_mode) & 0o077 == 0  # owner only
        shown += [
            format_plan(plan, verbose=True),
            json.dumps(plan_document(plan, target, "h1")),
            status.message,
        ]
        shown += [r.message for r in status.results]

        (repo / "userdata.txt").write_text(second)
        plan, status = reconcile_once(snapshot(repo, "b"), "", target, hv, dry_run=True)
        (change,) = plan.changes
        (field,) = change.fields
        assert field.path == "config/cidata"
        assert field.old is not None
        assert field.new is not None
        assert field.old.startswith("secret default/gen-userdata-")
        assert field.new.startswith("secret default/gen-userdata-")
        assert field.old != field.new  # kustomize's name hash moved with the content
        assert change.restart_required
        shown += [format_plan(plan, verbose=True), json.dumps(plan_document(plan, target, "h1"))]

        plan, status = reconcile_once(snapshot(repo, "b"), "", target, hv)
        assert status.reason == Reason.SUCCEEDED, status.message
        assert read_iso(str(iso_path)) is not None
        assert read_iso(str(iso_path))[1]["user-data"] == second  # type: ignore[index]
        again, status = reconcile_once(snapshot(repo, "b"), "", target, hv, dry_run=True)
        (staged,) = again.changes
        assert staged.restart_required  # the guest still runs with the old ISO
        assert "volume cidata" in said(staged)
        shown += [format_plan(again, verbose=True), status.message, hv.get_domain(name).persistent_xml]  # type: ignore[union-attr]
        shown += [hv.running_xml(name)]
    shown.append(str(logs))
    text = "\n".join(shown)
    for value in ("first-gen-value", "second-gen-value"):
        assert value not in text
