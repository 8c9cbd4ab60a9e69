"""The plan's records: what is to change on one domain, and the plan of a revision.

Input: nothing. Output: types: ``Action`` (the headline of a change, closed), the
``FieldChange`` and its ``ChangeClass`` (live or restart), the ``LiveOp`` made to a
running domain, the final ``Definition`` apply hands to libvirt, the ``Change`` of one
domain (paired by its ``VMKey``) and the ``Plan``. Pure: frozen records, no I/O.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import field
from typing import TYPE_CHECKING

# Imported at run time (not for type checking only): a saved plan (plan/saved.py) reads
# these records back through their annotations.
from reconciler.model import LiveDomain, OwnershipMark, RenderedDomain  # noqa: TC001
from reconciler.model.keys import VMKey  # noqa: TC001
from reconciler.model.problems import Problem  # noqa: TC001
from reconciler.model.reasons import ChangeReason  # noqa: TC001
from reconciler.model.refusal import PruneRefusal  # noqa: TC001
from reconciler.model.rollout import Paced  # noqa: TC001
from reconciler.model.units import format_bytes
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Iterator


class ChangeClass(enum.StrEnum):
    LIVE = "live"
    RESTART = "restart"


@dataclass(frozen=True, slots=True)
class FieldChange:
    path: str  # e.g. "devices.disk[vdb]" or "memory"
    old: str | None
    new: str | None
    change_class: ChangeClass


class Action(enum.StrEnum):
    CREATE = "create"
    UPDATE = "update"
    RESTART = "restart"
    START = "start"
    STOP = "stop"
    DELETE = "delete"
    ADOPT = "adopt"
    UNCHANGED = "unchanged"
    SKIPPED = "skipped"
    WAIT = "wait"  # held: another host still holds a copy of this VM (a host move)

    @property
    def past(self) -> str:
        return {
            "create": "created",
            "update": "updated",
            "restart": "restarted",
            "start": "started",
            "stop": "stopped",
            "delete": "deleted",
            "adopt": "adopted",
            "unchanged": "unchanged",
            "skipped": "skipped",
            "wait": "waiting",
        }[self.value]

    @property
    def defines(self) -> bool:
        """Whether apply defines the domain (the change carries its ``Definition``)."""
        return self in _DEFINING


_DEFINING = frozenset({Action.CREATE, Action.UPDATE, Action.ADOPT, Action.RESTART})


class LiveOpKind(enum.StrEnum):
    SET_MEMORY = "set-memory"  # balloon target in KiB (value)
    SET_VCPUS = "set-vcpus"  # online vCPUs (value)
    ATTACH = "attach"  # hotplug the device ``target`` of the new definition
    DETACH = "detach"  # unplug the device ``target`` of the running domain
    UPDATE = "update"  # change removable media / link state of device ``target``
    SET_METADATA = "set-metadata"  # title / description / metadata element


@dataclass(frozen=True, slots=True)
class LiveOp:
    """One change made to a running domain without a restart (after the redefinition)."""

    kind: LiveOpKind
    target: str = ""  # device identity as in the essence, e.g. "disk[vdb]"
    value: str = ""

    def __str__(self) -> str:
        """``set-memory 3Gi``, ``set-vcpus 4 vCPUs``, ``attach disk[vdb]``: values in the units
        every report uses."""
        return f"{self.kind} {self.target or self.words}".strip()

    @property
    def key(self) -> str:
        """``set-vcpus 2``, ``attach disk[vdb]``: the operation as the ownership mark records
        one libvirt refused (``refused``); stable, never reworded."""
        return f"{self.kind} {self.target or self.value}".strip()

    @property
    def words(self) -> str:
        """The value in its unit (a balloon target in KiB as a size; a count of vCPUs)."""
        if self.kind == LiveOpKind.SET_MEMORY and self.value.isdigit():
            return format_bytes(int(self.value) * 1024)
        if self.kind == LiveOpKind.SET_VCPUS and self.value:
            return f"{self.value} vCPUs"
        return self.value


@dataclass(frozen=True, slots=True)
class Definition:
    """A domain's final definition, computed once, in the plan: the rendered XML with the
    device addresses the live definition already has carried over and the ownership mark
    in ``<metadata>``. Apply hands ``xml`` to libvirt as it is (and, with
    ``seal_after_define``, seals the root ports of the devices libvirt placed)."""

    xml: str
    mark: OwnershipMark  # the mark ``xml`` carries (apply's run bookkeeping after a start builds on it)
    # libvirt places devices whose root ports KubeVirt seals (``render.ports``): apply reads
    # the definition back once after defining it and seals the ports they took, as
    # KubeVirt does; ``held_ports``: those the definition's devices hold already (untouched)
    seal_after_define: bool = False
    held_ports: frozenset[int] = frozenset()

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.xml.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Change:
    """The plan for one domain. ``action`` is the headline; the flags say the rest."""

    key: VMKey
    action: Action
    reasons: tuple[ChangeReason, ...]  # why, in the order the plan decided (``wording.reasons`` says it)
    fields: tuple[FieldChange, ...] = ()
    desired: RenderedDomain | None = None
    live: LiveDomain | None = None
    start: bool = False  # start the domain after (re)defining it
    stop: bool = False  # stop it (graceful, then forced after the grace period)
    restart_required: bool = False  # restart-class change staged on a running domain
    live_ops: tuple[LiveOp, ...] = ()  # applied to the running domain after the definition
    drift: bool = False  # the host differs from what the reconciler last applied
    restarts: int = 0  # crash-restart count recorded with a start (crash-loop back-off)
    requeue_after_s: float = 0.0  # > 0: plan again after this long (back-off waiting)
    definition: Definition | None = None  # what apply defines (``defines``)
    restart_window: str = ""  # restart_required: the restart waits for this window (when it opens)
    redefine: bool = False  # a start / stop that defines the domain again first (``defines``)
    reprovision: bool = False  # a pool's autohealing: its disks recreated from their sources first
    name: str = field(init=False, repr=False, compare=False)  # the libvirt domain name, from ``key``

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.key.domain)

    @property
    def is_noop(self) -> bool:
        return self.action in (Action.UNCHANGED, Action.SKIPPED, Action.WAIT)

    @property
    def defines(self) -> bool:
        """Whether apply defines the domain: the action always does, or a ``start`` /
        ``stop`` defines a new definition on the way (``redefine``: a spec or run strategy
        change with it)."""
        return self.action.defines or self.redefine or self.definition is not None

    @property
    def subject(self) -> str:
        return self.key.subject


@dataclass(frozen=True, slots=True)
class Plan:
    revision: str
    changes: tuple[Change, ...]
    errors: tuple[Problem, ...] = ()  # per-VM build/expand/render errors (nothing applied for them)
    # The revision's warnings (catalog, expansion, rendering: what ``validate`` shows) and
    # the plan's own (prune guard, newer revisions, host notes); worded by wording.problems.
    warnings: tuple[Problem, ...] = ()
    owner: str = ""  # the owner apply writes into every mark (see ownership/guard.py)
    prune_refused: PruneRefusal | None = None  # the prune guard tripped (the reconcile is PruneFailed)
    # VMs in git that did not expand or render (no change is planned for them), with the
    # domain of that name on this host if there is one: status still lists them.
    failed: tuple[tuple[VMKey, LiveDomain | None], ...] = ()
    # VMs in git that run elsewhere: (VM, the host their kubernetes.io/hostname selector
    # names; "" for a VM that selects none on a host that does not claim those)
    other_hosts: tuple[tuple[VMKey, str], ...] = ()
    pacing: Paced | None = None  # the restarts paced in batches (plan/pace.py); None: not paced

    def __iter__(self) -> Iterator[Change]:
        return iter(self.changes)

    @property
    def has_changes(self) -> bool:
        return any(not c.is_noop for c in self.changes)
