"""The daemon configuration's records: its policy, its hosts, the flags that override it.

Input: the values ``config/daemon_file.py`` reads from the configuration file and the
command line. Output: frozen records: ``DaemonConfig`` (source, hosts, policy,
intervals, listener, webhook secret, SOPS keys, notifications, state directory, log),
``Policy`` (prune and its guard, self-heal, rollout, instancetype revisions, owner,
restart windows, rollbacks), ``HostEntry`` (a libvirt URI and its host config) and
``Overrides`` (the ``run`` flags); the defaults; ``resolved_policy``, a host's config
with the daemon-wide policy applied. Reads nothing: no file, no environment, no git,
no libvirt; the SOPS keys and the webhook secret are never shown in a record's repr.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import TYPE_CHECKING, Any

from reconciler.config.notify import NotifyConfig
from reconciler.model.rollout import Pacing
from reconciler.records import dataclass
from reconciler.settings.host import HostConfig
from reconciler.source.settings import Credentials, SourceConfig, Verify

if TYPE_CHECKING:
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import RestartWindow

DEFAULT_CONFIG = "/etc/reconciler/config.yaml"
DEFAULT_STATE_DIR = "/var/lib/reconciler"
DEFAULT_LISTEN = "127.0.0.1:9469"
DEFAULT_URI = "test:///default"
LOG_FORMATS = ("auto", "console", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")
VERIFY_MODES = ("gpg", "ssh")


@dataclass(frozen=True, slots=True)
class Policy:
    prune: bool = False
    max_prune_percent: int = 30
    max_prune: int | None = None  # at most this many deletions, whatever the share (None: no count)
    prune_window_s: float = 3600.0  # the guard counts against the managed domains of this window's start
    self_heal: bool = True
    rollout: str | None = None  # None: the host config's rollout
    instancetype_revisions: str | None = None  # None: the host config's setting
    owner: str = ""  # "" = derived from the repository and entry path (ownership.default_owner)
    confirm_prune: str = ""  # a revision whose prunes pass the guard
    restart_windows: tuple[RestartWindow, ...] = ()  # when restart-class changes may restart VMs
    allow_rollback: bool = True  # apply a head that does not descend from the last applied one
    confirm_rollback: str = ""  # the commit (sha or prefix) a refused rollback may go to
    pacing: Pacing = field(default_factory=Pacing)  # maxUnavailable, progressDeadline, onFailure


@dataclass(frozen=True, slots=True)
class HostEntry:
    uri: str
    config: HostConfig = field(default_factory=HostConfig)


@dataclass(frozen=True, slots=True)
class DaemonConfig:
    source: SourceConfig
    hosts: tuple[HostEntry, ...] = (HostEntry(DEFAULT_URI),)
    policy: Policy = field(default_factory=Policy)
    fetch_interval_s: float = 60.0
    resync_interval_s: float = 30.0
    listen: str = DEFAULT_LISTEN  # "" = no HTTP listener
    webhook_secret: bytes = field(default=b"", repr=False)
    # SOPS decryption (``decryption.ageKeyFile``): the keys it holds, never shown.
    keys: Keys | None = field(default=None, repr=False, compare=False)
    age_key_file: str = ""
    notify: NotifyConfig = field(default_factory=NotifyConfig)  # commit statuses, notifications
    state_dir: str = DEFAULT_STATE_DIR
    log_format: str = "auto"
    log_level: str = "info"
    path: str = ""  # the file it was read from ("" = flags only)


@dataclass(frozen=True, slots=True)
class Overrides:
    """Command-line flags; ``None`` leaves the file's value."""

    repo: str | None = None
    branch: str | None = None
    path: str | None = None
    connect: str | None = None
    host_config: str | None = None
    state_dir: str | None = None
    listen: str | None = None
    prune: bool | None = None
    owner: str | None = None
    # False: ``decryption.ageKeyFile`` is checked as a setting, its key not read (``diff
    # --config``: a review needs no key; the CLI's own keys or none are used instead).
    read_keys: bool = True


def parse_listen(value: str) -> tuple[str, int]:
    """``127.0.0.1:9469`` / ``[::1]:9469`` / ``:9469`` -> (host, port)."""
    host, sep, port_s = value.rpartition(":")
    if not sep or not port_s.isdigit() or int(port_s) > 65535:
        raise ValueError(f"{value!r} is not HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port_s)


def resolved_policy(config: DaemonConfig, host: HostConfig) -> HostConfig:
    """The host config with the daemon-wide policy's rollout / instancetypeRevisions applied."""
    kw: dict[str, Any] = {}
    if config.policy.rollout is not None:
        kw["rollout"] = config.policy.rollout
    if config.policy.instancetype_revisions is not None:
        kw["instancetype_revisions"] = config.policy.instancetype_revisions
    return dataclasses.replace(host, **kw) if kw else host


__all__ = [
    "DEFAULT_CONFIG",
    "Credentials",
    "DaemonConfig",
    "HostEntry",
    "Overrides",
    "Policy",
    "SourceConfig",
    "Verify",
    "parse_listen",
    "resolved_policy",
]
