"""Cloud-init Secrets and SSH keys read on the host (render/cloudinit.py, provision.py).

Covers: ``secretRef`` / ``networkDataSecretRef`` and ``accessCredentials`` SSH keys
(noCloud and configDrive propagation) render as references only: no secret value is
in the payload or the XML; on the host the payload resolves from
``<secretsDirectory>/<namespace>/<name>/<key>`` (either key spelling), SSH keys are
added to cloud-config user data as ``ssh_authorized_keys``; errors name the field
(no secretsDirectory, a propagation without its volume, the guest agent, passwords)
or, on the host, the missing Secret and key; user data that is not cloud-config
cannot take SSH keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from reconciler.errors import RenderError
from reconciler.host.provision import ProvisionError, resolve_payload
from reconciler.model import ExpandedVM, Manifest
from reconciler.render import HostCaps, render_domain
from reconciler.settings.host import HostConfig

if TYPE_CHECKING:
    from pathlib import Path

SECRET_TEXT = "#cloud-config\npassword: s3cr3t-value\n"


def vm(
    volume: dict[str, Any], creds: list[dict[str, Any]] | None = None, namespace: str = "default"
) -> ExpandedVM:
    spec: dict[str, Any] = {
        "domain": {
            "memory": {"guest": "64Mi"},
            "devices": {"disks": [{"name": "ci", "disk": {"bus": "virtio"}}]},
        },
        "volumes": [{"name": "ci", **volume}],
    }
    if creds is not None:
        spec["accessCredentials"] = creds
    obj = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"runStrategy": "Halted", "template": {"spec": spec}},
    }
    return ExpandedVM(vm=obj, source=Manifest(obj, "vms/web.yaml", 1))


def ssh(method: str, secret: str = "keys") -> dict[str, Any]:
    return {"sshPublicKey": {"source": {"secret": {"secretName": secret}}, "propagationMethod": {method: {}}}}


def host(tmp_path: Path) -> HostConfig:
    return HostConfig(
        allowed_dirs=(str(tmp_path),),
        volume_dir=str(tmp_path / "volumes"),
        secrets_dir=str(tmp_path / "secrets"),
    )


def secret(tmp_path: Path, name: str, **keys: str) -> None:
    d = tmp_path / "secrets" / "default" / name
    d.mkdir(parents=True)
    for k, v in keys.items():
        (d / k).write_text(v)


def payload(rendered: Any) -> bytes:
    (vol,) = [v for v in rendered.volumes if v.kind == "cloudinit-iso"]
    return bytes(vol.content)


def test_nocloud_secrets_and_ssh_keys_resolve_on_the_host(tmp_path: Path) -> None:
    volume = {"cloudInitNoCloud": {"secretRef": {"name": "ud"}, "networkDataSecretRef": {"name": "nd"}}}
    rendered = render_domain(vm(volume, [ssh("noCloud")]), host(tmp_path), HostCaps.default())
    content = payload(rendered)
    assert b"s3cr3t" not in content
    assert "s3cr3t" not in rendered.xml
    secret(tmp_path, "ud", userdata=SECRET_TEXT)
    secret(tmp_path, "nd", networkData="version: 2\n")
    secret(tmp_path, "keys", a="ssh-ed25519 AAAA1 a@x\n", b="# comment\nssh-rsa BBBB2 b@x\n")
    label, files = resolve_payload(content, host(tmp_path), "vm/web")
    assert label == "cidata"
    assert (
        files["user-data"]
        == SECRET_TEXT + 'ssh_authorized_keys:\n  - "ssh-ed25519 AAAA1 a@x"\n  - "ssh-rsa BBBB2 b@x"\n'
    )
    assert files["network-config"] == "version: 2\n"
    meta = files["meta-data"]
    assert isinstance(meta, str)
    assert meta.startswith("instance-id: web.default")


def test_config_drive_keys_only(tmp_path: Path) -> None:
    rendered = render_domain(
        vm({"cloudInitConfigDrive": {}}, [ssh("configDrive")]), host(tmp_path), HostCaps.default()
    )
    secret(tmp_path, "keys", key="ssh-ed25519 AAAA1 a@x")
    label, files = resolve_payload(payload(rendered), host(tmp_path), "vm/web")
    assert label == "config-2"
    assert (
        files["openstack/latest/user_data"]
        == '#cloud-config\nssh_authorized_keys:\n  - "ssh-ed25519 AAAA1 a@x"\n'
    )


@pytest.mark.parametrize(
    ("volume", "creds", "field", "text"),
    [
        (
            {"cloudInitNoCloud": {"secretRef": {"name": "ud"}}},
            None,
            "cloudInitNoCloud.secretRef",
            "set secretsDirectory",
        ),
        (
            {"cloudInitNoCloud": {"userData": "#!/bin/sh"}},
            [ssh("configDrive")],
            "propagationMethod.configDrive",
            "needs a cloudInitConfigDrive volume",
        ),
        (
            {"cloudInitNoCloud": {"userData": "#!/bin/sh"}},
            [ssh("qemuGuestAgent")],
            "propagationMethod.qemuGuestAgent",
            "use noCloud or configDrive",
        ),
        (
            {"cloudInitNoCloud": {"userData": "x"}},
            [{"userPassword": {}}],
            "accessCredentials[0].userPassword",
            "guest agent",
        ),
        (
            {"cloudInitNoCloud": {"userData": "#!/bin/sh\n"}},
            [ssh("noCloud")],
            "cloudInitNoCloud.userData",
            "#cloud-config",
        ),
    ],
)
def test_errors_name_the_field(
    tmp_path: Path, volume: dict[str, Any], creds: list[dict[str, Any]] | None, field: str, text: str
) -> None:
    config = (
        host(tmp_path) if creds else HostConfig(allowed_dirs=(str(tmp_path),), volume_dir=str(tmp_path / "v"))
    )
    with pytest.raises(RenderError) as err:
        render_domain(vm(volume, creds), config, HostCaps.default())
    assert field in str(err.value), str(err.value)
    assert text in str(err.value), str(err.value)


def test_a_missing_secret_or_key_names_it(tmp_path: Path) -> None:
    content = payload(
        render_domain(
            vm({"cloudInitNoCloud": {"secretRef": {"name": "ud"}}}), host(tmp_path), HostCaps.default()
        )
    )
    with pytest.raises(ProvisionError, match="Secret default/ud: no directory"):
        resolve_payload(content, host(tmp_path), "vm/web")
    secret(tmp_path, "ud", other="x")
    with pytest.raises(ProvisionError, match="Secret default/ud has no key userdata or userData"):
        resolve_payload(content, host(tmp_path), "vm/web")
