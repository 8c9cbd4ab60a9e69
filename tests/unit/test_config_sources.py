"""Where ConfigMaps and Secrets come from: the build first, then the host's directories.

Covers: Secrets the build produced (a Secret with ``data`` / ``stringData``, a
``secretGenerator``) are used first, then ``secretsDirectory``, by every consumer
(secret and sysprep volumes, ``secretRef`` (user data) / ``networkDataSecretRef``,
``accessCredentials`` SSH keys), with no ``secretsDirectory`` needed for them;
ConfigMaps the build does not hold come from ``configMapsDirectory``; ``optional``
as on KubeVirt; a missing object is an error at the VM's field (file:line) or, on the
host, names the object; a malformed Secret names its file:line and key, not the value;
host directories are confined (no ``..``, no symlink out). A changed build Secret is
a restart-class change of the VMs that use it, by name only, in the plan (text and
JSON, staged on a running domain until its next cold boot) and in the PR diff
(text, Markdown, JSON); its value is in none of them, nor in the rendered XML, the
payload, reprs, errors or the logs.
"""

from __future__ import annotations

import base64
import json
import pickle
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
import structlog

from reconciler import ownership, prdiff, render, source
from reconciler.desired import Desired, desired_state
from reconciler.host.provision import ProvisionError, resolve_payload
from reconciler.model import LiveDomain, PowerState, RenderedDomain
from reconciler.model.changes import Action, ChangeClass
from reconciler.model.secretdata import SecretData
from reconciler.plan.build import build_plan
from reconciler.plan.output import plan_document
from reconciler.plan.text import format_plan
from reconciler.prdiff.history import simulated_live
from reconciler.settings.host import HostConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.wording.problems import words
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo

VALUE = "hunter2-build-secret"  # must never be shown
USERDATA = f"#cloud-config\npassword: {VALUE}\n"

VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  runStrategy: Always
  template:
    spec:
      accessCredentials:
        - sshPublicKey:
            source: {secret: {secretName: web-keys}}
            propagationMethod: {noCloud: {}}
      domain:
        memory: {guest: 64Mi}
        devices:
          disks:
            - {name: cidata, disk: {bus: virtio}}
            - {name: creds, cdrom: {bus: sata}}
            - {name: settings, cdrom: {bus: sata}}
      volumes:
        - name: cidata
          cloudInitNoCloud:
            secretRef: {name: web-userdata}
            networkDataSecretRef: {name: web-network}
        - name: creds
          secret: {secretName: db-creds}
        - name: settings
          configMap: {name: app-settings}
"""
KUSTOMIZATION = """resources: [web.yaml, network.yaml]
generatorOptions:
  disableNameSuffixHash: true
secretGenerator:
  - name: web-userdata
    files: [userdata=userdata.txt]
  - name: db-creds
    literals: [password={password}]
  - name: web-keys
    literals: ["key1=ssh-ed25519 AAAA-build k@x"]
"""
# A plain Secret: base64 ``data`` with ``stringData`` on top (as the API server merges them).
NETWORK = """apiVersion: v1
kind: Secret
metadata:
  name: web-network
data:
  networkdata: {b64}
  other: {other}
stringData:
  other: from-stringData
"""


def host(tmp_path: Path, secrets_dir: str = "", config_maps_dir: str = "") -> HostConfig:
    return HostConfig(
        allowed_dirs=(str(tmp_path),),
        volume_dir=str(tmp_path / "volumes"),
        secrets_dir=secrets_dir,
        config_maps_dir=config_maps_dir,
    )


def write_repo(git_repo: GitRepo, password: str = VALUE, vm: str = VM) -> str:
    git_repo.write("web.yaml", vm)
    git_repo.write("userdata.txt", USERDATA)
    b64 = base64.b64encode(b"version: 2\n").decode()
    git_repo.write("network.yaml", NETWORK.format(b64=b64, other=base64.b64encode(b"x").decode()))
    git_repo.write("kustomization.yaml", KUSTOMIZATION.format(password=password))
    return git_repo.commit()


def host_object(base: Path, namespace: str, name: str, **keys: str) -> None:
    d = base / namespace / name
    d.mkdir(parents=True)
    for k, v in keys.items():
        (d / k).write_text(v)


def build(git_repo: GitRepo, config: HostConfig, ref: str = "HEAD") -> Desired:
    return desired_state(source.read_snapshot(git_repo.path, ref), "", config, render.HostCaps.default())


def volume(d: RenderedDomain, name: str) -> tuple[bytes, SecretData]:
    vol = next(v for v in d.volumes if v.path.endswith(f"/{name}.iso"))
    return vol.content, vol.secrets


def test_build_secrets_serve_every_consumer_without_a_secrets_directory(
    git_repo: GitRepo, tmp_path: Path
) -> None:
    write_repo(git_repo)
    cm = tmp_path / "configmaps"
    host_object(cm, "default", "app-settings", mode="host-side")
    config = host(tmp_path, config_maps_dir=str(cm))
    d = build(git_repo, config)
    assert d.all_errors == ()
    (web,) = d.rendered
    content, secrets = volume(web, "cidata")
    payload = json.loads(content)
    assert sorted(payload["repositorySecrets"]) == [
        "default/web-keys",
        "default/web-network",
        "default/web-userdata",
    ]
    assert all(v.startswith("scrypt:") for v in payload["repositorySecrets"].values())
    label, files = resolve_payload(content, config, web.subject, secrets)
    assert label == "cidata"
    assert files["user-data"] == USERDATA + 'ssh_authorized_keys:\n  - "ssh-ed25519 AAAA-build k@x"\n'
    assert files["network-config"] == "version: 2\n"
    content, secrets = volume(web, "creds")
    assert resolve_payload(content, config, web.subject, secrets)[1] == {"password": VALUE.encode()}
    # The ConfigMap is not in the build: it comes from the host's directory.
    content, secrets = volume(web, "settings")
    assert resolve_payload(content, config, web.subject, secrets)[1] == {"mode": b"host-side"}
    assert [(c.volume, c.label) for c in web.config] == [
        ("cidata", "secret default/web-userdata, secret default/web-network, secret default/web-keys"),
        ("creds", "secret default/db-creds"),
        ("settings", "configMap default/app-settings (host)"),
    ]
    shown = web.xml + repr(web) + repr(d.expanded) + "".join(v.content.decode() for v in web.volumes)
    assert VALUE not in shown
    assert base64.b64encode(VALUE.encode()).decode() not in shown


def test_the_build_wins_over_the_host_and_the_host_serves_the_rest(git_repo: GitRepo, tmp_path: Path) -> None:
    write_repo(git_repo)
    git_repo.write(
        "settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-settings}\ndata: {mode: repo}\n",
    )
    git_repo.write(
        "kustomization.yaml",
        KUSTOMIZATION.format(password=VALUE).replace("network.yaml]", "network.yaml, settings.yaml]"),
    )
    git_repo.commit()
    secrets_dir, cm = tmp_path / "secrets", tmp_path / "configmaps"
    host_object(secrets_dir, "default", "db-creds", password="from-the-host")
    host_object(cm, "default", "app-settings", mode="host-side")
    config = host(tmp_path, secrets_dir=str(secrets_dir), config_maps_dir=str(cm))
    (web,) = build(git_repo, config).rendered
    for name, want in (("creds", {"password": VALUE.encode()}), ("settings", {"mode": "repo"})):
        content, secrets = volume(web, name)
        assert resolve_payload(content, config, web.subject, secrets)[1] == want
    # Without the build's Secret the host's is used.
    git_repo.write(
        "kustomization.yaml",
        KUSTOMIZATION.format(password=VALUE).replace(
            "  - name: db-creds\n    literals: [password=hunter2-build-secret]\n", ""
        ),
    )
    git_repo.commit()
    (web,) = build(git_repo, config).rendered
    content, secrets = volume(web, "creds")
    assert "default/db-creds" not in json.loads(content).get("repositorySecrets", {})
    assert resolve_payload(content, config, web.subject, secrets)[1] == {"password": b"from-the-host"}
    assert {c.volume: c.label for c in web.config}["creds"] == "secret default/db-creds (host)"


VOLUMES_ONLY = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: win
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory: {{guest: 64Mi}}
        devices:
          disks:
            - {{name: a, cdrom: {{bus: sata}}}}
      volumes:
        - name: a
          {source}
"""


@pytest.mark.parametrize(
    ("source", "config_maps", "error"),
    [
        (
            "configMap: {name: gone}",
            False,
            "volumes[0].configMap.name: ConfigMap 'gone' is not in the repository",
        ),
        (
            "secret: {secretName: gone}",
            False,
            "volumes[0].secret.secretName: Secret 'gone' is not in the repository",
        ),
        ("sysprep: {secret: {name: gone}}", False, "volumes[0].sysprep.secret.name: Secret 'gone'"),
        ("configMap: {name: gone, optional: true}", False, ""),
        ("secret: {secretName: gone, optional: true}", False, ""),
        ("configMap: {name: gone}", True, ""),  # read on the host when the ISO is built
    ],
)
def test_missing_objects_are_errors_at_the_field_unless_optional(
    git_repo: GitRepo, tmp_path: Path, source: str, config_maps: bool, error: str
) -> None:
    git_repo.write("vms/win.yaml", VOLUMES_ONLY.format(source=source))
    git_repo.commit()
    config = host(tmp_path, config_maps_dir=str(tmp_path / "cm")) if config_maps else host(tmp_path)
    d = build(git_repo, config)
    if error:
        (got,) = map(words, d.all_errors)
        assert got.startswith("vms/win.yaml:16:"), got
        assert error in got
        return
    assert d.all_errors == ()
    content, secrets = volume(d.rendered[0], "a")
    if config_maps:  # not optional: the host must have it
        with pytest.raises(ProvisionError, match=r"ConfigMap default/gone: no directory .*/cm/default/gone"):
            resolve_payload(content, config, "vm/win", secrets)
        host_object(tmp_path / "cm", "default", "gone", k="v")
        assert resolve_payload(content, config, "vm/win", secrets) == ("cfgdata", {"k": b"v"})
    else:
        assert resolve_payload(content, config, "vm/win", secrets) == ("cfgdata", {})


def test_optional_host_objects_are_empty_when_absent(git_repo: GitRepo, tmp_path: Path) -> None:
    git_repo.write("vms/win.yaml", VOLUMES_ONLY.format(source="configMap: {name: gone, optional: true}"))
    git_repo.commit()
    config = host(tmp_path, config_maps_dir=str(tmp_path / "cm"))
    content, secrets = volume(build(git_repo, config).rendered[0], "a")
    assert resolve_payload(content, config, "vm/win", secrets) == ("cfgdata", {})


def test_a_host_side_sysprep_config_map_must_hold_unattend_xml(git_repo: GitRepo, tmp_path: Path) -> None:
    git_repo.write("vms/win.yaml", VOLUMES_ONLY.format(source="sysprep: {configMap: {name: setup}}"))
    git_repo.commit()
    config = host(tmp_path, config_maps_dir=str(tmp_path / "cm"))
    content, secrets = volume(build(git_repo, config).rendered[0], "a")
    host_object(tmp_path / "cm", "default", "setup", notes="x")
    with pytest.raises(ProvisionError, match=r"ConfigMap default/setup holds neither autounattend\.xml"):
        resolve_payload(content, config, "vm/win", secrets)


def test_a_build_sysprep_secret_must_hold_unattend_xml_at_its_field(
    git_repo: GitRepo, tmp_path: Path
) -> None:
    git_repo.write("vms/win.yaml", VOLUMES_ONLY.format(source="sysprep: {secret: {name: setup}}"))
    git_repo.write(
        "setup.yaml",
        f"apiVersion: v1\nkind: Secret\nmetadata: {{name: setup}}\nstringData: {{notes: {VALUE}}}\n",
    )
    git_repo.commit()
    (error,) = map(words, build(git_repo, host(tmp_path)).all_errors)
    assert (
        "volumes[0].sysprep.secret.name: Secret 'setup' holds neither autounattend.xml nor unattend.xml"
        in error
    )
    assert VALUE not in error


def test_a_malformed_secret_names_its_file_line_and_key_not_the_value(
    git_repo: GitRepo, tmp_path: Path
) -> None:
    git_repo.write("vms/win.yaml", VOLUMES_ONLY.format(source="secret: {secretName: bad}"))
    git_repo.write(
        "bad.yaml", f"apiVersion: v1\nkind: Secret\nmetadata: {{name: bad}}\ndata:\n  password: '{VALUE}!'\n"
    )
    git_repo.commit()
    (error,) = map(words, build(git_repo, host(tmp_path)).all_errors)
    assert error.startswith("bad.yaml:5:"), error
    assert "Secret bad: data.password is not valid base64" in error
    assert VALUE not in error


def test_host_directories_are_confined(tmp_path: Path) -> None:
    from reconciler.host.payload import resolve_payload as resolve

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shadow").write_text(VALUE)
    base = tmp_path / "cm"
    host_object(base, "default", "app")
    (base / "default" / "app" / "leak").symlink_to(outside / "shadow")
    config = host(tmp_path, config_maps_dir=str(base), secrets_dir=str(base))
    payload = {
        "label": "cfgdata",
        "files": {},
        "configMapDirs": [{"configMap": "default/app", "optional": False}],
    }
    with pytest.raises(
        ProvisionError, match="ConfigMap default/app key leak: leads outside configMapsDirectory"
    ) as err:
        resolve(json.dumps(payload).encode(), config, "vm/x")
    assert VALUE not in str(err.value)
    (base / "default" / "away").symlink_to(outside)
    payload["configMapDirs"] = [{"configMap": "default/away", "optional": False}]
    with pytest.raises(ProvisionError, match="leads outside configMapsDirectory"):
        resolve(json.dumps(payload).encode(), config, "vm/x")
    payload = {"label": "cfgdata", "files": {}, "secretDirs": [{"secret": "../outside", "optional": False}]}
    with pytest.raises(ProvisionError, match=r"Secret \.\./outside: not a namespace/name"):
        resolve(json.dumps(payload).encode(), config, "vm/x")


def test_secret_data_never_shows_its_values() -> None:
    data = SecretData({"default/db": (("password", VALUE.encode()),)})
    assert VALUE not in repr(data) + str(data) + f"{data}"
    assert "default/db" in repr(data)
    with pytest.raises(TypeError):
        json.dumps(data)
    with pytest.raises(TypeError, match="never leave the process"):
        pickle.dumps(data)
    assert data == SecretData({"default/db": (("password", VALUE.encode()),)})
    assert data != SecretData({"default/db": (("password", b"other"),)})
    assert data.digest("default/db") != SecretData({"default/db": (("password", b"other"),)}).digest(
        "default/db"
    )


def test_payload_digest_mismatch_is_refused(git_repo: GitRepo, tmp_path: Path) -> None:
    write_repo(git_repo)
    config = host(tmp_path, config_maps_dir=str(tmp_path))
    (web,) = build(git_repo, config).rendered
    content, _ = volume(web, "creds")
    stale = SecretData({"default/db-creds": (("password", b"older"),)})
    with pytest.raises(
        ProvisionError, match="Secret default/db-creds: the build's values are not at hand"
    ) as err:
        resolve_payload(content, config, web.subject, stale)
    assert "older" not in str(err.value)


def _plan_on_base(
    base: Desired, head: Desired, running_booted_with: Desired | None = None
) -> tuple[str, str]:
    """Plan head on a host holding base (text, JSON); optionally running what another revision booted."""
    live = list(simulated_live(base))
    if running_booted_with is not None:
        booted = ownership.mark_for(running_booted_with.rendered[0], running_booted_with.revision)
        live = [replace(live[0], live_xml=ownership.with_mark(live[0].persistent_xml, booted))]
    plan = build_plan(head.revision, head.rendered, live, PlanPolicy())
    text = format_plan(plan, verbose=True)
    doc = json.dumps(plan_document(plan, HostTarget("test:///default", HostConfig()), "localhost"))
    return text, doc


def test_a_changed_build_secret_is_a_change_of_the_vm_by_name_only(git_repo: GitRepo, tmp_path: Path) -> None:
    with structlog.testing.capture_logs() as logs:
        base_ref = write_repo(git_repo, password="first-value-0001")
        head_ref = write_repo(git_repo, password=VALUE)
        config = host(tmp_path, config_maps_dir=str(tmp_path))
        base, head = build(git_repo, config, base_ref), build(git_repo, config, head_ref)
        assert base.rendered[0].xml == head.rendered[0].xml
        assert base.rendered[0].spec_hash != head.rendered[0].spec_hash

        live = simulated_live(base)
        plan = build_plan(head.revision, head.rendered, live, PlanPolicy())
        (change,) = plan.changes
        assert change.action == Action.UPDATE
        assert change.restart_required  # running: staged (rollout Stage) until the next cold boot
        (field,) = change.fields
        assert (field.path, field.old, field.new, field.change_class) == (
            "config/creds",
            "secret default/db-creds",
            "secret default/db-creds",
            ChangeClass.RESTART,
        )
        text, doc = _plan_on_base(base, head)
        assert "volume creds: secret default/db-creds changed" in text
        assert '"field": "volume creds"' in doc
        # Once defined, a running domain still booted with the old Secret: staged, not lost.
        applied = [
            replace(
                d,
                persistent_xml=ownership.with_mark(
                    d.persistent_xml, ownership.mark_for(head.rendered[0], head.revision)
                ),
                mark=ownership.mark_for(head.rendered[0], head.revision),
            )
            for d in live
        ]
        applied = [
            replace(
                d,
                live_xml=ownership.with_mark(d.live_xml, ownership.mark_for(base.rendered[0], base.revision)),
            )
            for d in applied
        ]
        (again,) = build_plan(head.revision, head.rendered, applied, PlanPolicy()).changes
        assert again.restart_required
        assert again.action == Action.UNCHANGED
        assert "restart required: the running domain still differs in volume creds" in said(again)
        # After a cold boot (the live XML carries the new mark) nothing is left.
        booted = [replace(d, live_xml=d.persistent_xml) for d in applied]
        (done,) = build_plan(head.revision, head.rendered, booted, PlanPolicy()).changes
        assert done.is_noop
        assert not done.restart_required

        result = prdiff.compare_desired(base, head)
        (entry,) = result.vms
        assert entry.kind == prdiff.EntryKind.CHANGED
        assert entry.change_class == "restart"
        reports = (
            prdiff.format_text(result, verbose=True)
            + prdiff.format_markdown(result)
            + prdiff.format_json(result)
        )
        assert "volume creds: secret default/db-creds changed" in prdiff.format_text(result)
        assert (
            "| restart | `volume creds` | `secret default/db-creds` | content changed |"
            in prdiff.format_markdown(result)
        )
    shown = text + doc + reports + str(logs) + repr(plan) + repr(result)
    for secret in (VALUE, "first-value-0001", base64.b64encode(VALUE.encode()).decode()):
        assert secret not in shown


def test_a_mark_recorded_before_scrypt_digests_is_refreshed_not_restarted(
    git_repo: GitRepo, tmp_path: Path
) -> None:
    """A domain defined when Secrets were digested with PBKDF2 records ``sha256:`` payload
    digests; against today's ``sha256+scrypt:`` ones drawing on the same objects they
    tell nothing: the record is refreshed, the running VM not restarted. A payload that
    draws on other objects is still a change."""
    write_repo(git_repo)
    desired = build(git_repo, host(tmp_path, config_maps_dir=str(tmp_path)))
    (web,) = desired.rendered
    assert all(c.digest.startswith("sha256+scrypt:") for c in web.config if "secret default/" in c.label)
    (live,) = simulated_live(desired)
    mark = live.mark
    assert mark is not None

    def recorded(label: str = "") -> LiveDomain:
        old = replace(
            mark,
            config=tuple(
                replace(c, digest="sha256:" + "0" * 64, label=label or c.label)
                if c.digest.startswith("sha256+scrypt:")
                else c
                for c in web.config
            ),
        )
        xml = ownership.with_mark(live.persistent_xml, old)
        return replace(live, persistent_xml=xml, live_xml=xml, mark=old)

    (change,) = build_plan(desired.revision, [web], [recorded()], PlanPolicy()).changes
    assert not change.fields
    assert not change.restart_required
    assert change.action == Action.UPDATE
    assert "ownership record refreshed" in said(change)
    (change,) = build_plan(
        desired.revision, [web], [recorded("configMap default/other")], PlanPolicy()
    ).changes
    assert change.restart_required


def test_the_mark_records_the_digests(git_repo: GitRepo, tmp_path: Path) -> None:
    write_repo(git_repo)
    (web,) = build(git_repo, host(tmp_path, config_maps_dir=str(tmp_path))).rendered
    mark = ownership.mark_for(web, "c" * 40)
    xml = ownership.with_mark(web.xml, mark)
    assert ownership.read_mark(xml) == mark
    assert ownership.read_mark(xml).config == web.config  # type: ignore[union-attr]
    assert VALUE not in xml
    assert ownership.mark_current(mark, web)
    live = LiveDomain(web.name, web.uuid, PowerState.RUNNING, xml, live_xml=xml, mark=mark)
    (c,) = build_plan("c" * 40, [web], [live], PlanPolicy()).changes
    assert c.is_noop


NAMEREFS = """nameReference:
  - kind: Secret
    fieldSpecs:
      - {path: spec/template/spec/volumes/cloudInitNoCloud/secretRef/name, kind: VirtualMachine}
      - {path: spec/template/spec/volumes/cloudInitNoCloud/networkDataSecretRef/name, kind: VirtualMachine}
      - {path: spec/template/spec/volumes/secret/secretName, kind: VirtualMachine}
      - {path: spec/template/spec/accessCredentials/sshPublicKey/source/secret/secretName, kind: VirtualMachine}
  - kind: ConfigMap
    fieldSpecs:
      - {path: spec/template/spec/volumes/configMap/name, kind: VirtualMachine}
"""


def test_generator_name_hashes_reach_the_vm_through_configurations(git_repo: GitRepo, tmp_path: Path) -> None:
    write_repo(git_repo)
    kust = KUSTOMIZATION.format(password=VALUE).replace(
        "generatorOptions:\n  disableNameSuffixHash: true\n", ""
    )
    kust += "configurations: [namerefs.yaml]\nconfigMapGenerator:\n  - name: app-settings\n    literals: [mode=prod]\n"
    git_repo.write("kustomization.yaml", kust)
    git_repo.write("namerefs.yaml", NAMEREFS)
    git_repo.commit()
    d = build(git_repo, host(tmp_path))  # neither directory: everything is the build's
    assert d.all_errors == ()
    (web,) = d.rendered
    labels = {c.volume: c.label for c in web.config}
    assert labels["creds"].startswith("secret default/db-creds-")
    assert labels["settings"].startswith("configMap default/app-settings-")
    assert "secret default/web-keys-" in labels["cidata"]
    assert "(host)" not in "".join(labels.values())
    content, secrets = volume(web, "cidata")
    files = resolve_payload(content, host(tmp_path), web.subject, secrets)[1]
    assert files["user-data"] == USERDATA + 'ssh_authorized_keys:\n  - "ssh-ed25519 AAAA-build k@x"\n'


def test_host_less_commands_never_print_a_build_secret(
    git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """render, validate, expand and diff (every format) on a repository whose Secret changed."""
    from reconciler import cli

    base = write_repo(git_repo, password="first-value-0001")
    head = write_repo(git_repo, password=VALUE)
    config = tmp_path / "host.yaml"
    config.write_text(
        f"allowedDirectories: [{tmp_path}]\nvolumeDirectory: {tmp_path}/v\nconfigMapsDirectory: {tmp_path}\n"
    )
    repo = str(git_repo.path)
    runs = [
        (["render", "--repo", repo, "--host-config", str(config)], 0),
        (["validate", "--repo", repo, "--host-config", str(config), "-o", "json"], 0),
        (["expand", "--repo", repo, "-o", "json"], 0),
    ]
    runs += [
        (
            [
                "diff",
                "--repo",
                repo,
                "--base",
                base,
                "--head",
                head,
                "--host-config",
                str(config),
                "-v",
                "-o",
                fmt,
            ],
            2,
        )
        for fmt in ("text", "markdown", "json")
    ]
    shown = ""
    for argv, code in runs:
        assert cli.main(["--log-level", "debug", *argv]) == code, argv
        out = capsys.readouterr()
        shown += out.out + out.err
    assert "volume creds: secret default/db-creds changed" in shown  # the diff names it
    assert "config ISO, label cfgdata" in shown  # render lists the ISO
    for secret in ("first-value-0001", VALUE, base64.b64encode(VALUE.encode()).decode()):
        assert secret not in shown


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        (f"literals: ['{VALUE}']", "literal of a Secret is not of the form KEY=VALUE"),
        ("envs: [creds.env]", "creds.env:2: env line has an empty key"),
        ("envs: [bad.env]", "bad.env:1: env line has no '='"),
    ],
)
def test_secret_generator_errors_never_echo_a_value(
    git_repo: GitRepo, tmp_path: Path, entry: str, error: str
) -> None:
    git_repo.write("creds.env", f"user=app\n={VALUE}\n")
    git_repo.write("bad.env", f"{VALUE}\n")
    git_repo.write("kustomization.yaml", f"secretGenerator:\n  - name: creds\n    {entry}\n")
    git_repo.commit()
    (got,) = map(words, build(git_repo, host(tmp_path)).all_errors)
    assert error in got
    assert VALUE not in got


def test_an_empty_secret_store_pickles() -> None:
    assert pickle.loads(pickle.dumps(SecretData())) == SecretData()


def test_a_secret_digest_is_slow_and_salted_by_name() -> None:
    """Whoever reads a domain's XML reads its Secrets' digests: they are derived with
    scrypt (memory-hard, salted with the Secret's name), not a plain hash one could test
    guesses on."""
    import hashlib

    from reconciler.model.secretdata import SCRYPT_N, SCRYPT_P, SCRYPT_R, SecretData

    data = SecretData({"default/a": (("password", b"hunter2"),), "default/b": (("password", b"hunter2"),)})
    plain = hashlib.sha256(b"8:password:7:hunter2").hexdigest()
    digest_a, digest_b = data.digest("default/a"), data.digest("default/b")
    assert digest_a.startswith("scrypt:")
    assert plain not in digest_a
    assert digest_a != digest_b  # the same value under two names: two digests
    material = hashlib.sha256(b"8:password:7:hunter2").digest()
    expected = hashlib.scrypt(
        material, salt=b"reconciler.secret/default/a", n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32
    ).hex()
    assert digest_a == f"scrypt:{expected}"
    assert SCRYPT_N * SCRYPT_R * 128 >= 512 * 1024  # each guess needs half a MiB
    assert SecretData({"default/a": (("password", b"hunter3"),)}).digest("default/a") != digest_a
