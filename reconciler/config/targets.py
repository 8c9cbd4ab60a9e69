"""The one place a host's plan policy is resolved from configuration.

Input: a ``DaemonConfig`` (read from the daemon's file, or built from the CLI's
flags) and one of its host entries. Output: the ``HostTarget`` the daemon's runner,
``plan`` and ``apply`` all use, so an operator plans exactly what the daemon does:
the host config's rollout unless the daemon-wide policy overrides it, the owner
derived from the repository and entry path, the prune guard, restart windows.
Pure: reads no files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reconciler import ownership
from reconciler.config.daemon import DaemonConfig, HostEntry, resolved_policy
from reconciler.model import Rollout
from reconciler.plan.build import PlanPolicy

if TYPE_CHECKING:
    from reconciler.config.host import HostConfig


@dataclass(frozen=True, slots=True)
class HostTarget:
    """One libvirt host this process drives: its URI, host config and plan policy."""

    uri: str
    config: HostConfig
    policy: PlanPolicy = field(default_factory=PlanPolicy)


TEST_DRIVER_NOTE = "libvirt's in-memory test driver: nothing persists after this process"


def host_target(config: DaemonConfig, entry: HostEntry, *, restart_now: bool = False) -> HostTarget:
    """The target (URI, host config with the policy applied, plan policy) of one host."""
    host = resolved_policy(config, entry.config)
    p = config.policy
    policy = PlanPolicy(
        host=host.name,
        claim_unselected=host.claim_unselected,
        prune=p.prune,
        max_prune_percent=p.max_prune_percent,
        self_heal=p.self_heal,
        rollout=Rollout(host.rollout),
        owner=p.owner or ownership.default_owner(config.source.repo, config.source.path),
        confirm_prune=p.confirm_prune,
        restart_windows=p.restart_windows,
        restart_now=restart_now,
    )
    return HostTarget(uri=entry.uri, config=host, policy=policy)


def in_memory(uri: str) -> bool:
    """``test:///…``: a driver inside this process (``test+unix://`` is libvirtd's, it persists there)."""
    return uri.startswith("test:///")


def describe(target: HostTarget) -> str:
    """The policy a plan applies, in one line (``plan`` and ``apply`` print it)."""
    p = target.policy
    prune = f"on (at most {p.max_prune_percent}% of managed domains)" if p.prune else "off"
    parts = [
        f"prune {prune}",
        f"selfHeal {'on' if p.self_heal else 'off (drift reported only)'}",
        f"rollout {p.rollout.value}",
        f"instancetypeRevisions {target.config.instancetype_revisions}",
        f"owner {p.owner}",
    ]
    if p.restart_windows:
        parts.append(
            f"{len(p.restart_windows)} restart window(s)" + (", restart now" if p.restart_now else "")
        )
    return "policy: " + ", ".join(parts)
