"""Owner identity and the prune guard: whose domains a daemon may change, prune or count.

Input: ownership marks, the planned revision, the guard's inputs (limit, the managed
domains of the last applied revision, a recorded refusal, a confirmation). Output:
ownership decisions and a ``PruneVerdict``. Pure.

Owner identity. Every mark carries the owner that wrote it: by default the repository
and the entry path, ``github.com/acme/vms#overlays/prod``. The repository is named the
same from every clone of it: the normalized URL of its remote, else its root commit
(``git:<sha>``), as the caller read them from git (``source.repository_identity``);
``policy.owner`` (or ``--owner``) names another. Older versions named the checkout
instead (a URL without credentials, a local path made absolute: ``legacy_owner``): a
mark of that owner is this owner's too, and is re-marked at the next reconcile. A daemon
never changes, prunes or counts a domain whose mark names another owner: such a
domain is treated like an unmanaged one, and taking it over is an explicit adoption
(``reconciler.kubevirt.io/adopt: "true"``).

Adoption is a one-time act: a domain adopted from another owner (or unmanaged) says so
in its mark (``adoptedFrom``), and no other owner's adopt annotation takes it back
until its owner releases it (its VM leaves that owner's git and the domain is kept:
the mark then says ``released``); meanwhile both sides see the conflict.

Marks written before owners existed carry none ("legacy"). Such a domain is claimed
only by an owner whose git has a VM of that name: it is then planned as usual and
re-marked with that owner. A legacy domain that no VM in git names is never pruned nor
counted by anyone: with two daemons upgraded on one host, neither can tell whether it
is its own orphan or the other's VM, and deleting it is the one thing that cannot be
undone. It is listed as ``Orphaned`` until someone removes it or a VM adopts it.

The prune guard. Prunes never take more than ``maxPrunePercent`` of the owner's
managed domains, nor more than ``maxPrune`` of them (a count, when set). The daemon
counts over a window (``pruneWindow``): the prunes of the window, made and planned,
against the domains managed at its start, so additions of the window do not dilute the
count (20 VMs added in one commit, the 5 real ones deleted in the next: 5 of 5). The
one-shot CLI counts against the domains the planned revision itself did not define.
The daemon records a refusal per revision; it holds until a new commit, a higher
limit, or a confirmation naming the revision (``reconciler apply --confirm-prune REV``
or ``policy.confirmPrune: REV``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.model.identifiers import is_remote_url, normalized_remote
from reconciler.model.plan_errors import PlanError, Unplanned
from reconciler.model.refusal import Guard, PruneRefusal
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from reconciler.model import LiveDomain, OwnershipMark

MIN_CONFIRM_CHARS = 7  # a confirmation names the revision by at least a short sha


def default_owner(repository: str, path: str) -> str:
    """``<repository>#<entry path>``; ``repository`` names the repository whichever clone
    reads it (``source.repository_identity``: a normalized remote URL, ``git:<root
    commit>``), or is a remote URL, normalized here."""
    where = normalized_remote(repository) if is_remote_url(repository) else repository
    return f"{where}#{path.strip('/') or '.'}"


def legacy_owner(repo: str, path: str) -> str:
    """The owner older versions derived from the checkout: ``<repository>#<entry path>``,
    a URL without its credentials, a local path made absolute. Their marks are recognised
    as this owner's (see the module doc)."""
    if is_remote_url(repo):
        repo = repo.split("?", 1)[0]  # a query (``?private_token=...``) is no part of the name
        scheme, sep, rest = repo.partition("://")
        if sep:
            host_part, slash, tail = rest.partition("/")
            host_part = host_part.rsplit("@", 1)[-1]  # user:token@host -> host
            where = f"{scheme}://{host_part}{slash}{tail}"
        else:
            where = repo.split("@", 1)[1]  # git@host:path -> host:path
        where = where.removesuffix("/").removesuffix(".git")
    else:
        where = str(Path(repo).resolve())
    return f"{where}#{path.strip('/') or '.'}"


def owned_by(mark: OwnershipMark | None, owner: str) -> bool:
    """The mark is this owner's (a legacy mark without owner is nobody's yet)."""
    return mark is not None and mark.owner == owner and bool(owner or not mark.owner)


def claimable(mark: OwnershipMark | None, owner: str) -> bool:
    """A domain of a VM in this owner's git that the plan may manage without adoption."""
    return mark is not None and (mark.owner == owner or not mark.owner)


def foreign(mark: OwnershipMark | None, owner: str) -> bool:
    """Marked by another owner."""
    return mark is not None and bool(mark.owner) and mark.owner != owner


def adoption_refused(mark: OwnershipMark | None, owner: str) -> PlanError | None:
    """Why ``owner`` may not adopt a domain marked ``mark`` (None when it may): one its
    owner adopted itself and has not released."""
    if mark is None or not foreign(mark, owner) or not mark.adopted_from or mark.released:
        return None
    return PlanError(Unplanned.ADOPTION_REFUSED, owner=mark.owner, came=mark.adopted_from)


@dataclass(frozen=True, slots=True)
class GuardPolicy:
    limit: int = 30  # maxPrunePercent
    base: frozenset[str] | None = None  # managed domains at the window's start (None: unknown)
    held: tuple[str, int] | None = None  # (revision, limit) of a refusal recorded earlier
    confirm: str = ""  # a revision whose prunes the operator confirmed
    count: int | None = None  # maxPrune: at most this many deletions (None: no count)
    gone: int = 0  # domains of ``base`` already pruned (or gone) within the window


@dataclass(frozen=True, slots=True)
class PruneVerdict:
    refused: PruneRefusal | None = None  # None: allowed; else which guard refused, and the counts
    confirmed: bool = False
    prunable: int = 0
    managed: int = 0


def confirms(confirm: str, revision: str) -> bool:
    return len(confirm) >= MIN_CONFIRM_CHARS and revision.startswith(confirm.lower())


def managed_count(live: Sequence[LiveDomain], owner: str, revision: str, base: Collection[str] | None) -> int:
    """The owner's managed domains the guard counts against.

    With the recorded set (daemon: the domains managed at the window's start), all of
    it, those pruned since included (they count as deletions, ``gone_count``); without
    it (one-shot CLI), the owner's domains except those defined by ``revision`` itself,
    which is being planned and so was not applied yet.
    """
    if base is not None:
        return len(base)
    mine = [d for d in live if owned_by(d.mark, owner) or (d.mark is not None and not d.mark.owner)]
    return sum(1 for d in mine if d.mark is not None and d.mark.commit != revision)


def gone_count(live: Sequence[LiveDomain], owner: str, base: Collection[str] | None) -> int:
    """Domains of the window's base no longer this owner's on the host (pruned, moved
    or removed within the window): deletions the guard has already seen."""
    if base is None:
        return 0
    mine = {d.name for d in live if owned_by(d.mark, owner) or (d.mark is not None and not d.mark.owner)}
    return sum(1 for name in base if name not in mine)


def judge(prunable: int, managed: int, revision: str, guard: GuardPolicy) -> PruneVerdict:
    """Whether ``prunable`` deletions out of ``managed`` domains may go ahead at ``revision``
    (with ``guard.gone`` deletions of the window already made)."""
    if prunable == 0:
        return PruneVerdict(prunable=0, managed=managed)
    if confirms(guard.confirm, revision):
        return PruneVerdict(confirmed=True, prunable=prunable, managed=managed)
    total = prunable + guard.gone
    refusal = None
    if guard.count is not None and total > guard.count:
        refusal = PruneRefusal(Guard.MAX_PRUNE, revision, guard.count, prunable, gone=guard.gone)
    elif managed == 0 or total * 100 > guard.limit * managed:
        refusal = PruneRefusal(Guard.MAX_PRUNE_PERCENT, revision, guard.limit, prunable, managed, guard.gone)
    elif guard.held is not None and guard.held[0] == revision and guard.limit <= guard.held[1]:
        refusal = PruneRefusal(Guard.HELD, revision, guard.held[1])
    return PruneVerdict(refusal, prunable=prunable, managed=managed)
