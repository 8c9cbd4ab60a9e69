"""Host moves: a VM whose ``kubernetes.io/hostname`` selector changed never runs twice.

Input: the VM's rendered domain, this host's name, and where else copies of the
owner's domains are (``Elsewhere``: per other host, the managed domain names it holds,
or the last known ones when it cannot be reached). Output: the move-out change on the
old host and the hold on the new one. Pure.

Order (DESIGN: one VM on shared storage must never run twice):
1. the old host stops its copy gracefully (forced after the grace period) and
   undefines it, disks kept (``move host2 → host1``);
2. only when no other host holds a copy does the new host define and start it.
While the old host cannot be reached its copy may still run: the new copy is not
created, and the VM's status says why. The daemon reconciles the hosts one after the
other and plans again a few seconds after a hold, so a move completes in one or two
reconciles. Moves to a host the daemon does not drive count in the prune guard.

``unplaced``: the VMs no configured host runs (a selector naming no host of the
configuration, or none while no host claims such VMs), as warnings for ``validate
--config`` and ``plan --config``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.model import LiveDomain, Problem, RenderedDomain, Severity
from reconciler.model.changes import Action, Change
from reconciler.model.plan_errors import PlanError, Unplanned
from reconciler.model.reasons import ChangeReason, Why
from reconciler.wording import plan_errors

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from reconciler.settings.policy import Elsewhere

RECHECK_S = 5.0  # a held create is planned again after this long


def move_out(d: RenderedDomain, live: LiveDomain, here: str) -> Change:
    """The old host's half: stop gracefully and undefine (disks kept)."""
    return Change(
        key=d.key,
        action=Action.DELETE,
        reasons=(ChangeReason(Why.MOVE_OUT, here, d.hostname),),
        desired=d,
        live=live,
    )


def hold(d: RenderedDomain, here: str, elsewhere: Elsewhere) -> Change | None:
    """The new host's half: nothing while another host still holds a copy."""
    old = elsewhere.holder(d.name)
    if not old:
        return None
    why = ChangeReason(Why.MOVE_WAIT, old, here, flag=old in elsewhere.unreachable)
    return Change(d.key, Action.WAIT, (why,), desired=d, requeue_after_s=RECHECK_S)


def unplaced(
    domains: Iterable[RenderedDomain], hosts: Mapping[str, bool], config: str
) -> tuple[Problem, ...]:
    """A warning per VM no host of ``hosts`` (name -> claims VMs that select none) runs."""
    names = tuple(sorted(hosts))
    out: list[Problem] = []
    for d in domains:
        if d.hostname and d.hostname not in hosts:
            error = PlanError(Unplanned.HOST_UNKNOWN, owner=d.hostname, path=config, names=names)
        elif not d.hostname and not any(hosts.values()):
            error = PlanError(Unplanned.NO_HOST_CLAIMS, path=config)
        else:
            continue
        out.append(
            Problem(
                plan_errors.said(error),
                vm=d.key,
                path=d.source_path,
                field="spec.template.spec.nodeSelector",
                severity=Severity.WARNING,
            )
        )
    return tuple(out)
