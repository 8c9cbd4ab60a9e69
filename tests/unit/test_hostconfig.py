"""The host configuration file (``reconciler.config.host``).

Covers: ``HostConfig()`` defaults work on their own; examples/host-config.yaml
loads and equals the defaults; every key is read into its field; network targets
(network / bridge / user) and multus lookup by ``name`` and ``namespace/name``;
image entries as string or mapping; a daemon config's embedded ``host:`` mapping;
unknown keys and bad values are ``ConfigError`` with file, line and column;
directories must be absolute and normalized, ``/`` is refused, the volume
directory and image files must lie inside the allowed directories; the ``host:``
sections of examples/config.yaml load.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from reconciler.config.host import host_config_from_obj, load_host_config
from reconciler.errors import ConfigError
from reconciler.settings.host import HostConfig, ImageSource, NetworkTarget, path_inside

ROOT = Path(__file__).resolve().parents[2]


def load(text: str) -> HostConfig:
    return load_host_config(text.encode(), "host.yaml")


def test_defaults() -> None:
    h = HostConfig()
    assert h.pod_network is None  # auto: the libvirt network "default" where the host has it
    assert h.storage_pool == "default"
    assert path_inside(h.volume_dir + "/vm/x.qcow2", h.allowed_dirs)
    assert load("") == h
    assert host_config_from_obj(None, "x") == h


def test_example_file_is_the_defaults() -> None:
    path = ROOT / "examples" / "host-config.yaml"
    assert load_host_config(path.read_bytes(), str(path)) == HostConfig()


def test_every_key() -> None:
    h = load(
        """
name: host-b
claimUnselected: false
allowedDirectories: [/srv/vms, /data/images/]
volumeDirectory: /srv/vms/gen
nvramDirectory: /srv/nvram
secretsDirectory: /etc/reconciler/secrets
configMapsDirectory: /etc/reconciler/configmaps
storagePool: fast
storagePoolFormat: raw
images:
  a/b:1: /data/images/b.qcow2
  c/d:2: {path: /data/images/d.img}
  e/f:3: {path: /data/images/f.bin, format: raw}
networks:
  pod: {bridge: br0}
  multus:
    storage: {bridge: br-storage}
    infra/mgmt: {network: mgmt}
firmware:
  efiCode: /opt/ovmf/CODE.fd
  efiVars: /opt/ovmf/VARS.fd
  secureBootCode: /opt/ovmf/CODE.sb.fd
  secureBootVars: /opt/ovmf/VARS.sb.fd
domainType: qemu
emulator: /opt/qemu/bin/qemu-system-x86_64
rollout: Restart
instancetypeRevisions: follow
defaults: {cpuModel: Haswell, graphics: none, graphicsListen: 0.0.0.0}
"""
    )
    assert h.name == "host-b"
    assert h.claim_unselected is False
    assert h.allowed_dirs == ("/srv/vms", "/data/images")
    assert (h.volume_dir, h.nvram_dir, h.storage_pool, h.storage_pool_format) == (
        "/srv/vms/gen",
        "/srv/nvram",
        "fast",
        "raw",
    )
    assert (h.secrets_dir, h.config_maps_dir) == ("/etc/reconciler/secrets", "/etc/reconciler/configmaps")
    assert h.images == {
        "a/b:1": ImageSource("/data/images/b.qcow2", "qcow2"),
        "c/d:2": ImageSource("/data/images/d.img", "raw"),
        "e/f:3": ImageSource("/data/images/f.bin", "raw"),
    }
    assert h.pod_network == NetworkTarget("bridge", "br0")
    assert h.network_for("storage", "default") == NetworkTarget("bridge", "br-storage")
    assert h.network_for("mgmt", "infra") == NetworkTarget("network", "mgmt")
    assert h.network_for("infra/mgmt", "other") == NetworkTarget("network", "mgmt")
    assert h.network_for("mgmt", "default") is None
    assert (h.ovmf_code, h.ovmf_vars, h.ovmf_secure_code, h.ovmf_secure_vars) == (
        "/opt/ovmf/CODE.fd",
        "/opt/ovmf/VARS.fd",
        "/opt/ovmf/CODE.sb.fd",
        "/opt/ovmf/VARS.sb.fd",
    )
    assert (h.domain_type, h.emulator, h.rollout, h.instancetype_revisions) == (
        "qemu",
        "/opt/qemu/bin/qemu-system-x86_64",
        "Restart",
        "follow",
    )
    assert (h.cpu_model, h.graphics, h.graphics_listen) == ("Haswell", "none", "0.0.0.0")


def test_user_networking_and_embedded_section() -> None:
    assert load("networks: {pod: {user: {}}}").pod_network == NetworkTarget("user", "")
    h = host_config_from_obj({"name": "h", "storagePool": "p"}, "daemon.yaml")
    assert (h.name, h.storage_pool) == ("h", "p")
    with pytest.raises(ConfigError, match=r"^daemon.yaml: host config: unknown key 'bogus'"):
        host_config_from_obj({"bogus": 1}, "daemon.yaml")


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("name: a\nbogus: 1\n", "host.yaml:2:1", "unknown key 'bogus'"),
        ("defaults:\n  cpuModle: x\n", "host.yaml:2:3", "unknown key 'cpuModle'"),
        ("rollout: Later\n", "host.yaml:1:10", "'Later' is not one of Stage, Restart"),
        ("domainType: xen\n", "host.yaml:1:13", "is not one of"),
        ("claimUnselected: yes please\n", "host.yaml:1:18", "expected true or false"),
        ("allowedDirectories: [/]\n", "host.yaml:1:22", "'/' would allow every file"),
        ("allowedDirectories: [relative/dir]\n", "host.yaml:1:22", "absolute, normalized path"),
        ("allowedDirectories: [/srv/../etc]\n", "host.yaml:1:22", "absolute, normalized path"),
        ("allowedDirectories: []\n", "host.yaml:1:21", "non-empty list"),
        ("volumeDirectory: /tmp/elsewhere\n", "host.yaml:1:18", "not inside allowedDirectories"),
        ("images:\n  x/y:1: /etc/shadow\n", "host.yaml:2:10", "not inside allowedDirectories"),
        (
            "images:\n  x/y:1: {path: /var/lib/reconciler/a, format: vmdk}\n",
            "host.yaml:2:",
            "is not one of qcow2, raw",
        ),
        ("networks:\n  pod: {network: a, bridge: b}\n", "host.yaml:2:", "exactly one of"),
        ("networks:\n  multus:\n    x: {user: {}}\n", "host.yaml:3:", "unknown key 'user'"),
        ("networks:\n  pod: {bridge: ''}\n", "host.yaml:2:", "name must not be empty"),
        ("firmware:\n  efiCode: OVMF.fd\n", "host.yaml:2:12", "absolute, normalized path"),
        ("name: [a\n", "host.yaml:2:1", "invalid YAML"),
        ("- a\n- b\n", "host.yaml", "expected a mapping"),
    ],
)
def test_errors_name_file_line_and_column(text: str, where: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(text)
    assert str(err.value).startswith(where), str(err.value)
    assert message in str(err.value)


def test_record_is_read_only() -> None:
    h = HostConfig(images={"a": ImageSource("/var/lib/reconciler/a")})
    with pytest.raises(TypeError):
        h.images["b"] = ImageSource("/x")  # type: ignore[index]


def test_host_sections_of_the_example_daemon_config() -> None:
    path = ROOT / "examples" / "config.yaml"
    doc = YAML(typ="rt").load(path.read_text())
    hosts = [host_config_from_obj(h["host"], str(path)) for h in doc["hosts"] if "host" in h]
    assert [h.name for h in hosts] == ["host1", "host2"]
    assert hosts[1].claim_unselected is False
