"""SOPS-encrypted Secrets on real QEMU: the guest gets the values, nothing else does.

Covers: a repository whose cloud-init user data is a SOPS-encrypted Secret (age, the
key file read as the daemon reads ``decryption.ageKeyFile``, mode 0600) and whose
second Secret comes from an encrypted env file of a ``secretGenerator`` is applied and
its VM started on a tiny TCG guest; the cloud-init ISO read back from disk holds the
decrypted user data, the secret volume's ISO the env file's values, both readable by
their owner only; the committed files, the domain XML (persistent and running), the
plan (text and JSON), the status and the log hold none of them. Then a tampered file
(a value moved to another key) stops the revision with a file:line error and nothing
of it is applied: the domain and its ISO stay as they were.
"""

from __future__ import annotations

import json
import stat
from typing import TYPE_CHECKING

import structlog

from reconciler.config.keys import read_age_key_file
from reconciler.host.hypervisor import Hypervisor
from reconciler.host.provision import read_iso
from reconciler.model import PowerState
from reconciler.model.results import Reason
from reconciler.plan.output import plan_document
from reconciler.plan.text import format_plan
from reconciler.reconcile import reconcile_once
from reconciler.wording.problems import words
from tests.helpers.qemu import URI, host, snapshot
from tests.helpers.sops import age_key, encrypt

if TYPE_CHECKING:
    from pathlib import Path

PREFIX = "rtest-sops-"
PASSWORD = "sops-only-in-the-guest-4e1f"
DB_PASSWORD = "db-value-only-in-the-iso-9b2c"
USERDATA = f"""apiVersion: v1
kind: Secret
metadata:
  name: web-userdata
stringData:
  userdata: |
    #cloud-config
    chpasswd: {{expire: false}}
    password: {PASSWORD}
"""
VM = f"""apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {PREFIX}web
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
            - name: db
              disk: {{bus: virtio}}
      volumes:
        - name: cidata
          cloudInitNoCloud:
            secretRef: {{name: web-userdata}}
        - name: db
          secret: {{secretName: db-creds}}
"""
KUSTOMIZATION = """resources: [vms/web.yaml, secrets/web-userdata.yaml]
configurations: [namerefs.yaml]
secretGenerator:
  - {name: db-creds, envs: [secrets/db.env]}
"""
NAMEREFS = """nameReference:
  - kind: Secret
    fieldSpecs:
      - {path: spec/template/spec/volumes/secret/secretName, kind: VirtualMachine}
"""


def test_an_encrypted_repository_boots_its_vm_and_a_tampered_file_applies_nothing(
    qemu_workdir: Path, tmp_path: Path
) -> None:
    repo = qemu_workdir
    key = age_key(tmp_path / "keys")
    keys = read_age_key_file(str(key.path))  # as the daemon reads decryption.ageKeyFile
    (repo / "secrets").mkdir()
    (repo / "secrets" / "web-userdata.yaml").write_bytes(encrypt(USERDATA, key.recipient))
    (repo / "secrets" / "db.env").write_bytes(
        encrypt(f"DB_PASSWORD={DB_PASSWORD}\n", key.recipient, "dotenv", regex=None)
    )
    (repo / "vms" / "web.yaml").write_text(VM)
    (repo / "kustomization.yaml").write_text(KUSTOMIZATION)
    (repo / "namerefs.yaml").write_text(NAMEREFS)
    committed = "".join(p.read_text() for p in (repo / "secrets").iterdir())
    target = host(repo)  # no secretsDirectory: the Secrets are the repository's
    name = PREFIX + "web"
    shown: list[str] = [committed]
    with structlog.testing.capture_logs() as logs, Hypervisor(URI) as hv:
        plan, status = reconcile_once(snapshot(repo, "a"), "", target, hv, keys=keys)
        assert status.reason == Reason.SUCCEEDED, status.message
        assert hv.state(name) == PowerState.RUNNING
        by_label = {}
        for path in (repo / "volumes").rglob("*.iso"):
            got = read_iso(str(path))
            assert got is not None, path
            by_label[got[0]] = (got[1], path)
        user_files, user_iso = by_label["cidata"]
        assert user_files["user-data"].startswith(
            f"#cloud-config\nchpasswd: {{expire: false}}\npassword: {PASSWORD}\n"
        )
        db_files, db_iso = by_label["cfgdata"]
        assert db_files == {"DB_PASSWORD": DB_PASSWORD}
        for iso in (user_iso, db_iso):
            assert stat.S_IMODE(iso.stat().st_mode) & 0o077 == 0  # owner only
        before = hv.get_domain(name).persistent_xml  # type: ignore[union-attr]
        shown += [
            before,
            hv.running_xml(name),
            format_plan(plan, verbose=True),
            json.dumps(plan_document(plan, target, "h1")),
            status.message,
            *(r.message for r in status.results),
        ]

        # A value moved to another key of the file: it no longer decrypts. Nothing applies.
        tampered = (repo / "secrets" / "web-userdata.yaml").read_text().replace("  userdata:", "  user-data:")
        (repo / "secrets" / "web-userdata.yaml").write_text(tampered)
        (repo / "vms" / "web.yaml").write_text(VM.replace("64Mi", "96Mi"))
        user_iso_before = user_iso.read_bytes()
        plan, status = reconcile_once(snapshot(repo, "b"), "", target, hv, keys=keys)
        assert status.reason == Reason.BUILD_FAILED
        errors = [words(e) for e in plan.errors]
        assert any(
            e.startswith("secrets/web-userdata.yaml:6:3: SOPS: stringData.user-data does not decrypt")
            for e in errors
        ), errors
        assert hv.get_domain(name).persistent_xml == before  # type: ignore[union-attr]
        assert user_iso.read_bytes() == user_iso_before
        shown += [*errors, format_plan(plan, verbose=True), status.message]
    shown.append(str(logs))
    text = "\n".join(shown)
    for value in (PASSWORD, DB_PASSWORD, "sops-only", "db-value-only"):
        assert value not in text
