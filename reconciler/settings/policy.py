"""The plan's policy as a record: what one host's plan may do and how.

``PlanPolicy`` (prune guard, self-heal, rollout, crash-loop back-off, owner, restart
windows, pacing) is built by ``config.targets`` from the configuration and the command's
flags, and read by every stage of ``plan/``; ``Elsewhere`` is what the daemon knows of
the owner's domains on its other hosts (host moves, ``plan/moves.py``). Pure records.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

from reconciler.model import RestartWindow, Rollout
from reconciler.model.rollout import Pacing
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True, slots=True)
class Elsewhere:
    """Copies of this owner's domains on the other hosts."""

    copies: Mapping[str, str] = field(default_factory=dict)  # domain name -> host holding it
    unreachable: frozenset[str] = frozenset()  # hosts whose copies are last known, not read now
    hosts: frozenset[str] = frozenset()  # the other hosts this daemon drives

    def known(self, host: str) -> bool:
        """A move to one of the daemon's own hosts is a move; to any other host it is
        counted by the prune guard like a deletion (a mistyped host name must not stop a fleet)."""
        return host in self.hosts

    def holder(self, name: str) -> str:
        return self.copies.get(name, "")


@dataclass(frozen=True, slots=True)
class PlanPolicy:
    host: str = ""  # this host's name (kubernetes.io/hostname)
    claim_unselected: bool = True
    prune: bool = False
    max_prune_percent: int = 30
    max_prune: int | None = None  # at most this many deletions (None: no count)
    self_heal: bool = True
    rollout: Rollout = Rollout.STAGE
    crash_backoff_s: float = 10.0  # first crash-loop delay (doubles up to the maximum)
    crash_backoff_max_s: float = 300.0
    crash_reset_s: float = 600.0  # a domain that ran this long before crashing starts counting again
    owner: str = ""  # owner identity written into marks; other owners' domains are left alone
    # Owners older versions derived for the same repository and entry (the checkout's path):
    # their marks are this owner's, and are written again with ``owner``.
    former_owners: tuple[str, ...] = ()
    prune_base: frozenset[str] | None = None  # managed domains at the prune window's start
    prune_held: tuple[str, int] | None = None  # (revision, limit) of a recorded prune refusal
    confirm_prune: str = ""  # a revision whose prunes the operator confirmed
    elsewhere: Elsewhere | None = None  # copies on the other hosts (host moves; None: one host)
    restart_windows: tuple[RestartWindow, ...] = ()  # host-wide restart windows (see settings/windows.py)
    restart_now: bool = (
        False  # restart at once what differs, whatever the rollout and windows (--restart-now)
    )
    # Under rollout Restart, a difference staged earlier (RestartRequired) restarts too, not
    # only a new one (``--rollout Restart`` on the command line; the daemon never: a running
    # domain that kept differing after its restart would restart on every reconcile).
    restart_staged: bool = False
    # VMs (domain names) that take the repository's instancetype and preference revisions
    # this once instead of the ones their domains captured (``--roll-forward``)
    roll_forward: frozenset[str] = frozenset()
    # Restarts paced in batches (plan/pace.py): policy.maxUnavailable, progressDeadline, onFailure
    pacing: Pacing = field(default_factory=Pacing)
