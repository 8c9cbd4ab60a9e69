"""The one place a host's target and plan policy are resolved from configuration.

Input: a ``DaemonConfig`` (read from the daemon's file, or built from the CLI's
flags, or for ``diff`` without ``--config`` from the host config alone), the policy
flags of ``plan``/``apply`` given on top (``with_flags``) and one of its host entries. Output: the ``HostTarget`` the daemon's runner, ``plan``, ``apply``
and ``diff`` all use, so an operator plans and a reviewer reads exactly what the
daemon does: the host config's rollout and instancetypeRevisions unless the
daemon-wide policy overrides them, the owner derived from the repository and entry
path, the prune guard, restart windows. Pure: reads no files.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler import ownership
from reconciler.config.daemon import DaemonConfig, HostEntry, Policy, SourceConfig, resolved_policy
from reconciler.errors import ConfigError
from reconciler.model import RestartWindow, Rollout
from reconciler.model.identifiers import is_remote_url
from reconciler.records import dataclass
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget

if TYPE_CHECKING:
    from reconciler.settings.host import HostConfig


@dataclass(frozen=True, slots=True)
class PolicyFlags:
    """The ``plan``/``apply`` flags that override the configuration's policy; the
    defaults leave it as it is."""

    prune: bool = False  # --prune
    max_prune_percent: int | None = None
    no_self_heal: bool = False
    rollout: str | None = None  # None: the config's, else the host config's
    owner: str = ""
    confirm_prune: str = ""
    restart_windows: tuple[RestartWindow, ...] = ()


def with_flags(config: DaemonConfig, flags: PolicyFlags) -> DaemonConfig:
    """``config`` with the flags given on top of its policy."""
    kw: dict[str, Any] = {}
    if flags.prune:
        kw["prune"] = True
    if flags.max_prune_percent is not None:
        kw["max_prune_percent"] = flags.max_prune_percent
    if flags.no_self_heal:
        kw["self_heal"] = False
    if flags.rollout is not None:
        kw["rollout"] = flags.rollout
    if flags.owner:
        kw["owner"] = flags.owner
    if flags.confirm_prune:
        kw["confirm_prune"] = flags.confirm_prune.lower()
    if flags.restart_windows:
        kw["restart_windows"] = flags.restart_windows
    return replace(config, policy=replace(config.policy, **kw)) if kw else config


TEST_DRIVER_NOTE = "libvirt's in-memory test driver: nothing persists after this process"


def host_target(
    config: DaemonConfig,
    entry: HostEntry,
    *,
    restart_now: bool = False,
    restart_staged: bool = False,
    repository: str = "",
    formerly: str = "",
    roll_forward: frozenset[str] = frozenset(),
) -> HostTarget:
    """The target (URI, host config with the policy applied, plan policy) of one host.

    ``restart_now`` (``--restart-now``) restarts at once whatever differs on a running VM,
    staged or new, whatever the rollout and the windows; ``restart_staged`` (``--rollout
    Restart`` given on the command line) makes rollout Restart restart what was staged
    before too. ``repository``: what names the source repository whichever clone it is
    (``source.repository_identity``, read by the caller; ``formerly``: what older versions
    named it by, ``source.former_identity``); the owner is derived from it
    and the entry path unless ``policy.owner`` names one. ``roll_forward``: VMs (domain
    names) that take the repository's instancetype and preference revisions this time."""
    host = resolved_policy(config, entry.config)
    p = config.policy
    owner, former = owner_of(config, repository, formerly)
    host = replace(host, mac_seed=owner)
    policy = PlanPolicy(
        host=host.name,
        claim_unselected=host.claim_unselected,
        prune=p.prune,
        max_prune_percent=p.max_prune_percent,
        max_prune=p.max_prune,
        self_heal=p.self_heal,
        rollout=Rollout(host.rollout),
        owner=owner,
        former_owners=former,
        confirm_prune=p.confirm_prune,
        restart_windows=p.restart_windows,
        restart_now=restart_now,
        restart_staged=restart_staged or restart_now,
        roll_forward=roll_forward,
        pacing=p.pacing,
    )
    return HostTarget(uri=entry.uri, config=host, policy=policy)


def owner_of(config: DaemonConfig, repository: str = "", formerly: str = "") -> tuple[str, tuple[str, ...]]:
    """The owner identity and the owners of older versions it answers to (their marks are
    re-marked): ``policy.owner`` alone, else ``<repository>#<entry path>``; ``formerly``:
    what older versions named the repository by (``source.former_identity``)."""
    if config.policy.owner:
        return config.policy.owner, ()
    src = config.source
    legacy = ownership.legacy_owner(src.repo, src.path)
    identity = repository or (src.repo if is_remote_url(src.repo) else "")
    owner = ownership.default_owner(identity, src.path) if identity else legacy
    before = ownership.default_owner(formerly, src.path) if formerly else ""
    return owner, tuple(dict.fromkeys(o for o in (legacy, before) if o and o != owner))


def pick_host(config: DaemonConfig, name: str | None) -> HostEntry:
    """The host entry named ``name`` (``--host``); with one host, that one."""
    names = [h.config.name for h in config.hosts]
    if name is None:
        if len(config.hosts) == 1:
            return config.hosts[0]
        raise ConfigError(
            f"the config has {len(names)} hosts ({', '.join(names)}): give --host NAME, the host to speak for",
            config.path,
        )
    for h in config.hosts:
        if h.config.name == name:
            return h
    raise ConfigError(f"--host {name}: no such host in the config (hosts: {', '.join(names)})", config.path)


def hostless(host: HostConfig) -> DaemonConfig:
    """What ``diff`` assumes without the daemon's config: the host config alone, and
    pruning on, so the report says what a pruning host does (and words the others)."""
    return DaemonConfig(source=SourceConfig(""), hosts=(HostEntry("", host),), policy=Policy(prune=True))


def in_memory(uri: str) -> bool:
    """``test:///…``: a driver inside this process (``test+unix://`` is libvirtd's, it persists there)."""
    return uri.startswith("test:///")


def describe(target: HostTarget) -> str:
    """The policy a plan applies, in one line (``plan`` and ``apply`` print it)."""
    p = target.policy
    most = f"{p.max_prune_percent}% of managed domains" + (
        f", {p.max_prune} domains" if p.max_prune is not None else ""
    )
    prune = f"on (at most {most})" if p.prune else "off"
    parts = [
        f"prune {prune}",
        f"selfHeal {'on' if p.self_heal else 'off (drift reported only)'}",
        f"rollout {p.rollout.value}",
        f"instancetypeRevisions {target.config.instancetype_revisions}",
        f"owner {p.owner}",
    ]
    if p.restart_windows:
        parts.append(f"{len(p.restart_windows)} restart window(s)")
    if p.restart_now:
        parts.append("restart now")
    if p.roll_forward:
        parts.append("roll forward " + ", ".join(f"vm/{n}" for n in sorted(p.roll_forward)))
    return "policy: " + ", ".join(parts)
