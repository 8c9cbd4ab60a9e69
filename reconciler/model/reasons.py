"""Why a plan decided what it did for one domain: one record per reason.

The plan makes these where it decides (plan/existing.py, power.py, intents.py, build.py,
moves.py, prune.py, pace.py, autoheal.py); ``Change.reasons`` carries them in order and
``reconciler.wording.reasons`` alone turns them into the line the plan, status and the
PR report show (the reasons joined by ``"; "``). No stage reads those words back: what a
caller needs (the action, the fields, the window) it takes from the change or the record.

The fields are named for what they hold; each kind uses the few it needs (see its
comment): ``text`` and ``other`` are names the words quote (an owner, a host, a run
strategy, a domain's state, a window), never sentences. What a decider below the plan
found travels as its own record: ``NOTE`` carries a comparison's ``Note`` (a kind and the
values it names), ``PROBLEM`` the plan error's ``Problem`` (the same record as in
``Plan.errors``), ``LEFT_GUARDED`` and ``MOVE_REFUSED`` the prune guard's ``PruneRefusal``
(the same as ``Plan.prune_refused``); ``wording.reasons`` says them.
"""

from __future__ import annotations

import enum

from reconciler.model.keys import VMKey  # noqa: TC001
from reconciler.model.problems import Problem  # noqa: TC001
from reconciler.model.refusal import PruneRefusal  # noqa: TC001
from reconciler.model.rollout import Halt  # noqa: TC001
from reconciler.records import dataclass


class Why(enum.StrEnum):
    # plan/build.py
    CREATE = "create"  # text: run strategy; flag: started too
    PROBLEM = "problem"  # problem: the plan error (adoption refused, a name taken, bad XML)
    NOT_STARTED = "not-started"  # of: the reasons of the move that holds the start
    # plan/existing.py
    ADOPT = "adopt"  # flag: the domain has a mark; text: its owner
    PORTS_RESERVED = "ports-reserved"  # count: hotplug root ports
    SPEC_CHANGED = "spec-changed"  # names: the fields (KubeVirt paths)
    DRIFT = "drift"  # names: the fields; flag: selfHeal
    OWNER_RENAMED = "owner-renamed"  # text: the new owner
    MARK_REFRESHED = "mark-refreshed"
    TRANSIENT = "transient"  # flag: selfHeal
    RESTART_IN_WINDOW = "restart-in-window"  # text: the window (as the gate says it)
    RESTART_REQUESTED = "restart-requested"
    RESTART_WINDOW_NOW = "restart-window-now"  # flag: restart now requested (else: inside the window)
    RESTART_DIFFERS = "restart-differs"  # names: the fields the running domain still differs in
    RESTART_NOW = "restart-now"
    RESTART_STAGED = "restart-staged"  # flag: rollout Stage (else: text, a run strategy never restarted)
    STAGED_DIFFERS = "staged-differs"  # names: as RESTART_DIFFERS, staged until the next cold boot
    LIVE = "live"  # names: the live operations, as their records print
    NOTE = "note"  # note: a comparison's note (a live change that waits, a spare slot)
    IN_SYNC = "in-sync"  # text: run strategy; other: the domain's state
    # plan/intents.py
    INTENT_GONE = "intent-gone"  # a restart decided earlier no longer applies
    INTENT_RESTART = "intent-restart"
    INTENT_START = "intent-start"
    INTENT_MADE = "intent-made"
    # plan/power.py: text: run strategy; other: the domain's state; detail: libvirt's state reason
    ONCE_START = "once-start"
    POWER_START = "power-start"
    POWERED_OFF = "powered-off"
    OUT_OF_BAND = "out-of-band"  # flag: selfHeal (started again; else reported only)
    HALTED_REPORT = "halted-report"
    HALTED_STOP = "halted-stop"
    CRASH_BACKOFF = "crash-backoff"  # count: the restart due; seconds: its wait
    CRASH_RESTART = "crash-restart"  # count: this restart; seconds: the back-off served
    # plan/moves.py, prune.py: text: a host; other: the other host
    MOVE_OUT = "move-out"
    MOVE_WAIT = "move-wait"  # flag: the old host is unreachable
    MOVE_REFUSED = "move-refused"  # refusal: the prune guard's
    LEFT_NO_OWNER = "left-no-owner"
    LEFT_KEPT = "left-kept"  # flag: pruning disabled (else the VM's prune: false)
    LEFT_GUARDED = "left-guarded"  # refusal: the prune guard's
    LEFT_DELETE = "left-delete"  # count: ephemeral artefacts removed; flag: prune confirmed
    RELEASED = "released"
    # plan/pace.py, autoheal.py
    PACE_STAGED = "pace-staged"  # text: the pool's updateStrategy
    PACE_HALTED = "pace-halted"  # halt
    PACE_WAITING = "pace-waiting"  # count: the batch; total: batches; keys: the VMs waited for
    AUTOHEALED = "autohealed"  # count: failed starts; total: the threshold; seconds, limit_s


class Noted(enum.StrEnum):
    """What a comparison of a running domain notes (compare/changes.py, compare/capacity.py,
    plan/running.py): where a live change goes, or why it waits for a restart."""

    PORTS_RESERVED = "ports-reserved"  # count: hotplug ports reserved at the next boot
    SPARE_SLOT = "spare-slot"  # target: the device hot-added; count: the spare slots left
    NO_SPARE_SLOT = "no-spare-slot"  # target: the device (restart-class)
    PORT_SEALED = "port-sealed"  # target: the device to unplug (restart-class)
    VCPUS_UNPLUG = "vcpus-unplug"  # count: vCPUs online; value: those asked; total: the guest can unplug
    NO_BALLOON = "no-balloon"  # (restart-class)
    OP_REFUSED = "op-refused"  # op, target, value: the live operation libvirt refused once


@dataclass(frozen=True, slots=True)
class Note:
    """One note of a comparison: its kind and the values its words name."""

    kind: Noted
    target: str = ""  # a device, as in the essence: ``disk[vdb]``
    value: str = ""
    op: str = ""  # a live operation's kind (``LiveOpKind``)
    count: int = 0
    total: int = 0


@dataclass(frozen=True, slots=True)
class ChangeReason:
    """One reason of a change: its kind and the values its words name."""

    kind: Why
    text: str = ""
    other: str = ""
    detail: str = ""
    names: tuple[str, ...] = ()
    count: int = 0
    total: int = 0
    seconds: float = 0.0
    limit_s: float = 0.0
    flag: bool = False
    keys: tuple[VMKey, ...] = ()
    halt: Halt | None = None
    of: tuple[ChangeReason, ...] = ()
    note: Note | None = None
    problem: Problem | None = None
    refusal: PruneRefusal | None = None
