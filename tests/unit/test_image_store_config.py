"""The host config's ``imageStore`` (``config/images.py``): defaults, values read, and
each bad value an error naming the file, line and key."""

from __future__ import annotations

import pytest

from reconciler.config.host import load_host_config
from reconciler.errors import ConfigError
from reconciler.settings.images import DEFAULT_STORE_DIR, ImageStoreConfig


def load(text: str) -> ImageStoreConfig:
    return load_host_config(text.encode(), "host.yaml").image_store


def test_defaults() -> None:
    assert load("name: h1\n") == ImageStoreConfig(DEFAULT_STORE_DIR, 100 * 2**30, 86400.0)


def test_values_are_read() -> None:
    got = load(
        "allowedDirectories: [/srv/vms]\nvolumeDirectory: /srv/vms/volumes\nimageStore: {dir: /srv/vms/images, maxBytes: 20Gi, gracePeriod: 2h}\n"
    )
    assert got == ImageStoreConfig("/srv/vms/images", 20 * 2**30, 7200.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "imageStore: {dir: /srv/elsewhere}\n",
            "imageStore.dir: /srv/elsewhere is not inside allowedDirectories",
        ),
        ("imageStore: {dir: images}\n", "must be an absolute, normalized path"),
        ("imageStore: {maxBytes: lots}\n", "imageStore.maxBytes"),
        ("imageStore: {maxBytes: 0}\n", "imageStore.maxBytes: must be more than zero"),
        ("imageStore: {gracePeriod: soon}\n", "imageStore.gracePeriod"),
        ("imageStore: {size: 1Gi}\n", "unknown key 'size'"),
    ],
)
def test_bad_values_name_file_and_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load("name: h1\n" + text)
    assert message in str(err.value)
    assert "host.yaml:2" in str(err.value)
