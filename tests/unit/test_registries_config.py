"""The host config's ``registries:`` section (``reconciler.config.registries``).

Covers: absent, the record is empty and every registry is TLS-verified; ``insecure``,
``mirrors`` and ``authFile`` read into their fields; ``verifies`` is false only for a
listed ``HOST:PORT``; bad values (a URL instead of a host, a registry listed twice, a
registry as its own mirror, an empty mirror list, a relative auth file, an unknown key)
are ``ConfigError``s naming file:line:col.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler.config.host import load_host_config
from reconciler.errors import ConfigError
from reconciler.settings.registries import Registries, is_registry_host

if TYPE_CHECKING:
    from reconciler.settings.host import HostConfig


def load(text: str) -> HostConfig:
    return load_host_config(text.encode(), "host.yaml")


def test_absent_means_every_registry_verified() -> None:
    assert load("name: h\n").registries == Registries()
    assert Registries().verifies("quay.io")
    assert Registries().verifies("127.0.0.1:5000")


def test_keys_read() -> None:
    reg = load(
        "registries:\n"
        "  insecure: ['127.0.0.1:5000', registry.lan]\n"
        "  mirrors:\n"
        "    quay.io: ['127.0.0.1:5000', mirror.lan:443]\n"
        "  authFile: /etc/reconciler/auth.json\n"
    ).registries
    assert reg.insecure == ("127.0.0.1:5000", "registry.lan")
    assert dict(reg.mirrors) == {"quay.io": ("127.0.0.1:5000", "mirror.lan:443")}
    assert reg.auth_file == "/etc/reconciler/auth.json"
    assert not reg.verifies("127.0.0.1:5000")
    assert reg.verifies("127.0.0.1:5001")
    assert reg.verifies("quay.io")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "registries:\n  insecure: ['http://127.0.0.1:5000']\n",
            r"host.yaml:2:\d+: registries.insecure\[0\]",
        ),
        (
            "registries:\n  insecure: [a.lan, a.lan]\n",
            r"host.yaml:2:\d+: registries.insecure\[1\]: a.lan is listed twice",
        ),
        ("registries:\n  insecure: a.lan\n", r"host.yaml:2:\d+: registries.insecure: expected a list"),
        ("registries:\n  mirrors:\n    quay.io: [quay.io]\n", r"host.yaml:3:\d+: .*not its own mirror"),
        ("registries:\n  mirrors:\n    quay.io: []\n", r"host.yaml:3:\d+: .*at least one mirror"),
        ("registries:\n  mirrors:\n    quay.io/x: [a.lan]\n", r"host.yaml:3:\d+: registries.mirrors: a key"),
        ("registries:\n  authFile: auth.json\n", r"host.yaml:2:\d+: registries.authFile"),
        ("registries:\n  tls: false\n", r"host.yaml:2:\d+: registries: unknown key 'tls'"),
    ],
)
def test_bad_values_name_the_line(text: str, where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        load(text)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("quay.io", True),
        ("127.0.0.1:5000", True),
        ("localhost", True),
        ("Quay.io", False),
        ("quay.io:0", False),
        ("quay.io:99999", False),
        ("quay.io/ns", False),
        ("-a.lan", False),
        ("", False),
    ],
)
def test_registry_hosts(text: str, ok: bool) -> None:
    assert is_registry_host(text) is ok
