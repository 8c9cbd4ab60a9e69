"""configMap, secret and sysprep volumes as ISO disks (render/configdisk.py, provision.py).

Covers: a ConfigMap of the repository (data and binaryData, from a configMapGenerator
too) becomes an ISO labelled ``cfgdata`` (or the volume's ``volumeLabel``) with one file
per key; a Secret is only named in the payload and read from the host's
secretsDirectory when the ISO is built (its value never in the payload or the XML); a
sysprep ConfigMap or Secret becomes an ``unattendCD`` ISO and must hold
(auto)unattend.xml; a missing ConfigMap is an error at its field unless the volume is
optional; a changed ConfigMap changes the VM's disk content.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

import pytest

from reconciler import render, source
from reconciler.desired import desired_state
from reconciler.host.provision import ProvisionError, resolve_payload
from reconciler.settings.host import HostConfig
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from pathlib import Path

    from reconciler.model import RenderedDomain
    from tests.helpers.git import GitRepo

VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: win
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory:
          guest: 1Gi
        devices:
          disks:
            - name: settings
              cdrom: {{bus: sata}}
            - name: creds
              cdrom: {{bus: sata}}
            - name: setup
              cdrom: {{bus: sata}}
      volumes:
        - name: settings
          configMap:
            name: app-settings
{label}        - name: creds
          secret:
            secretName: db-creds
        - name: setup
          sysprep:
            {sysprep}
"""
CONFIG_MAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
data:
{data}binaryData:
  logo.png: {logo}
"""
LOGO = base64.b64encode(b"\x89PNG\x00\x01").decode()


def host(tmp_path: Path) -> HostConfig:
    return HostConfig(
        allowed_dirs=(str(tmp_path),),
        volume_dir=str(tmp_path / "volumes"),
        secrets_dir=str(tmp_path / "secrets"),
    )


def build(
    git_repo: GitRepo, tmp_path: Path, *, label: str = "", sysprep: str = "configMap: {name: unattend}"
) -> tuple[RenderedDomain | None, tuple[str, ...]]:
    git_repo.write("vms/win.yaml", VM.format(label=label, sysprep=sysprep))
    git_repo.write(
        "config/settings.yaml",
        CONFIG_MAP.format(name="app-settings", data="  mode: prod\n  level: '3'\n", logo=LOGO),
    )
    git_repo.write(
        "config/unattend.yaml",
        CONFIG_MAP.format(name="unattend", data="  Autounattend.xml: <unattend/>\n", logo=LOGO),
    )
    git_repo.commit()
    d = desired_state(source.read_snapshot(git_repo.path), "", host(tmp_path), render.HostCaps.default())
    return (d.rendered[0] if d.rendered else None), tuple(map(words, d.all_errors))


def payloads(d: RenderedDomain) -> dict[str, dict[str, object]]:
    return {v.path.rsplit("/", 1)[1]: json.loads(v.content) for v in d.volumes if v.kind == "cloudinit-iso"}


def test_config_map_secret_and_sysprep_become_iso_disks(git_repo: GitRepo, tmp_path: Path) -> None:
    d, errors = build(git_repo, tmp_path, label="            volumeLabel: settings\n")
    assert errors == ()
    assert d is not None
    p = payloads(d)
    assert p["settings.iso"] == {
        "label": "settings",
        "files": {"level": "3", "mode": "prod"},
        "binary": {"logo.png": LOGO},
        "configMaps": ["default/app-settings"],
    }
    assert p["creds.iso"] == {
        "label": "cfgdata",
        "files": {},
        "secretDirs": [{"secret": "default/db-creds", "optional": False, "mustHave": []}],
    }
    assert p["setup.iso"]["label"] == "unattendCD"
    assert p["setup.iso"]["files"] == {"Autounattend.xml": "<unattend/>"}
    for iso in ("settings", "creds", "setup"):
        assert f"/win/{iso}.iso" in d.xml

    secrets = tmp_path / "secrets" / "default" / "db-creds"
    secrets.mkdir(parents=True)
    (secrets / "password").write_text("hunter2")
    (secrets / "user").write_text("app")
    creds = next(v for v in d.volumes if v.path.endswith("creds.iso"))
    label, files = resolve_payload(creds.content, host(tmp_path), d.subject)
    assert (label, files) == ("cfgdata", {"password": b"hunter2", "user": b"app"})
    assert "hunter2" not in d.xml
    assert b"hunter2" not in creds.content
    settings = next(v for v in d.volumes if v.path.endswith("settings.iso"))
    assert resolve_payload(settings.content, host(tmp_path), d.subject)[1]["logo.png"] == b"\x89PNG\x00\x01"


def test_a_sysprep_secret_must_hold_unattend_xml(git_repo: GitRepo, tmp_path: Path) -> None:
    d, errors = build(git_repo, tmp_path, sysprep="secret: {name: winsetup}")
    assert errors == ()
    assert d is not None
    setup = next(v for v in d.volumes if v.path.endswith("setup.iso"))
    (tmp_path / "secrets" / "default" / "winsetup").mkdir(parents=True)
    (tmp_path / "secrets" / "default" / "winsetup" / "notes.txt").write_text("x")
    with pytest.raises(ProvisionError, match=r"holds neither autounattend\.xml nor unattend\.xml"):
        resolve_payload(setup.content, host(tmp_path), d.subject)
    (tmp_path / "secrets" / "default" / "winsetup" / "unattend.xml").write_text("<u/>")
    assert resolve_payload(setup.content, host(tmp_path), d.subject)[0] == "unattendCD"


def test_missing_config_maps_are_errors_unless_optional(git_repo: GitRepo, tmp_path: Path) -> None:
    _d, errors = build(git_repo, tmp_path, sysprep="configMap: {name: nowhere}")
    (error,) = errors
    assert error.startswith("vms/win.yaml:")
    assert (
        "spec.template.spec.volumes[2].sysprep.configMap.name: ConfigMap 'nowhere' is not in the repository"
        in error
    )
    optional = VM.format(label="", sysprep="configMap: {name: unattend}").replace(
        "name: app-settings\n", "name: gone\n            optional: true\n"
    )
    git_repo.write("vms/win.yaml", optional)
    git_repo.commit()
    d = desired_state(source.read_snapshot(git_repo.path), "", host(tmp_path), render.HostCaps.default())
    assert d.all_errors == ()
    assert payloads(d.rendered[0])["settings.iso"]["files"] == {}


def test_a_sysprep_config_map_without_unattend_xml_is_refused(git_repo: GitRepo, tmp_path: Path) -> None:
    _d, errors = build(git_repo, tmp_path, sysprep="configMap: {name: app-settings}")
    (error,) = errors
    assert "holds neither autounattend.xml nor unattend.xml" in error
