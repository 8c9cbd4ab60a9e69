"""The host's image store as a record: where a host keeps the images its VMs are made from,
how much it may hold, how long an unused image stays (``config.images`` reads it)."""

from __future__ import annotations

from reconciler.records import dataclass

DEFAULT_STORE_DIR = "/var/lib/reconciler/images"
DEFAULT_MAX_BYTES = 100 * 2**30  # 100 GiB
DEFAULT_GRACE_S = 24 * 3600.0  # an image no domain uses is kept a day


@dataclass(frozen=True, slots=True)
class ImageStoreConfig:
    """Where the store lives, how much it may hold, how long an unused image stays."""

    dir: str = DEFAULT_STORE_DIR
    max_bytes: int = DEFAULT_MAX_BYTES
    grace_s: float = DEFAULT_GRACE_S
