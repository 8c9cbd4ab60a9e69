"""Paced restarts: the records of a rollout on one host.

Input: nothing. Output: types: ``Pacing`` (the host's ``policy.maxUnavailable``,
``progressDeadline`` and ``onFailure``), ``PaceGroup`` (what a VM is paced with: its
pool's ``maxUnavailable``, ``updateStrategy`` and place in its ``selectionPolicy`` order,
or the host-wide group), ``Batch`` (VMs restarted together), ``Halt`` (a batch not Ready
within the deadline), ``RolloutProgress`` (what a host keeps of its rollout between
reconciles: the batch in flight, a halt), ``Health`` (a revision's on a host) and
``Paced`` (what pacing made of a plan), ``Autohealing`` (a pool's). Pure: frozen
records, no I/O.
"""

from __future__ import annotations

import enum
from dataclasses import field
from typing import TYPE_CHECKING

from reconciler.model.keys import VMKey  # noqa: TC001
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Callable

DEFAULT_MAX_UNAVAILABLE = "25%"  # a Deployment's rolling update
POOL_MAX_UNAVAILABLE = "100%"  # KubeVirt's default for a VirtualMachinePool
DEFAULT_PROGRESS_DEADLINE_S = 600.0
HOST_GROUP = ""  # the group of the VMs no pool paces
STARTUP_FAILURE_THRESHOLD = 3  # KubeVirt's pool controller: consecutive failed starts
MIN_FAILING_TO_START_S = 300.0  # ... or this long failing (CrashLoopBackOff) before a replacement


class OnFailure(enum.StrEnum):
    HALT = "halt"  # the halted VMs keep what they run, the others their running definition
    REVERT = "revert"  # the halted VMs go back to the last revision healthy on this host


class UpdateStrategy(enum.StrEnum):
    PROACTIVE = "proactive"  # restart the replicas, maxUnavailable at a time (KubeVirt's default)
    OPPORTUNISTIC = "opportunistic"  # the definition only: the guest takes it when it restarts itself
    UNMANAGED = "unmanaged"  # the pool's replicas are not updated by a restart at all (staged)


class Health(enum.StrEnum):
    PROGRESSING = "Progressing"  # batches run (or wait for Ready)
    HEALTHY = "Healthy"  # every VM of the revision on the host is Ready
    DEGRADED = "Degraded"  # no batch runs, and a VM of the revision is not Ready
    HALTED = "Halted"  # a batch was not Ready within the progress deadline


def scaled_limit(max_unavailable: str, size: int) -> int:
    """A count or a percentage of ``size``, rounded down, at least 1 (KubeVirt's
    ``calculateMaxUnavailableInt``; a Deployment without surge)."""
    text = max_unavailable.strip()
    if text.endswith("%"):
        value = size * int(text[:-1]) // 100
    else:
        value = int(text)
    return max(value, 1)


def valid_limit(text: str) -> bool:
    """Whether ``text`` is a count (``2``) or a percentage (``25%``, 0-100)."""
    body = text[:-1] if text.endswith("%") else text
    if not body.isdigit():
        return False
    return not text.endswith("%") or int(body) <= 100


def _no_cause(_key: VMKey) -> str:
    return ""


def _running(_key: VMKey) -> str:
    return "running"


def _always(_key: VMKey) -> float:
    return float("inf")


@dataclass(frozen=True, slots=True)
class ReadySource:
    """A readiness source, as a prober answers: ``ready`` (True Ready, False not, None not
    known yet: not Ready), ``cause`` (its last answer in words, which a halt quotes:
    "guestAgentPing: no answer"), ``waits_for`` (what Ready means for the VM: its
    readiness probe's kind, "running" without one) and ``since`` (when its Ready last
    changed: a probed VM's Ready counts only when it came after the guest's last start,
    never an answer of the run a restart ended). Without a source a VM is Ready when
    it runs, as KubeVirt's VMI without a readiness probe."""

    ready: Callable[[VMKey], bool | None]
    cause: Callable[[VMKey], str] = _no_cause
    waits_for: Callable[[VMKey], str] = _running
    since: Callable[[VMKey], float] = _always  # when its Ready last changed (epoch s; inf: not known)


@dataclass(frozen=True, slots=True)
class Pacing:
    """The host's pacing policy (``policy.*`` of the daemon config)."""

    max_unavailable: str = DEFAULT_MAX_UNAVAILABLE  # a count ("2") or a percentage ("25%")
    progress_deadline_s: float = DEFAULT_PROGRESS_DEADLINE_S
    on_failure: OnFailure = OnFailure.HALT


@dataclass(frozen=True, slots=True)
class Autohealing:
    """A pool's ``autohealing`` (KubeVirt's defaults): a replica whose start failed
    ``threshold`` times in a row, or that has failed to start for ``min_failing_s``, is
    reprovisioned from the pool's template (``plan/autoheal.py``)."""

    threshold: int = STARTUP_FAILURE_THRESHOLD
    min_failing_s: float = MIN_FAILING_TO_START_S


@dataclass(frozen=True, slots=True)
class PaceGroup:
    """What one VM is paced with. A pool's replica: its pool (``group`` "pool/<ns>/<name>"),
    the pool's ``maxUnavailable`` of its ``size`` replicas, ``updateStrategy`` and the
    replica's place in the ``selectionPolicy`` order (``order``, lower first). A VM with
    the annotation ``reconciler.kubevirt.io/max-unavailable``: the host group of that
    limit (``group`` "" and ``max_unavailable`` set)."""

    group: str = HOST_GROUP
    max_unavailable: str = ""  # "": the host's policy.maxUnavailable
    size: int = 0  # a pool's replicas (0: count the group's VMs on the host)
    strategy: UpdateStrategy = UpdateStrategy.PROACTIVE
    order: int = 0
    autohealing: Autohealing | None = None  # the pool's autohealing (None: not set, never reprovisioned)


@dataclass(frozen=True, slots=True)
class Batch:
    """VMs restarted together; the next batch starts when all of them are Ready."""

    keys: tuple[VMKey, ...]
    waits_for: str = "running"  # what Ready means for them: their readiness probe's kind, or running


@dataclass(frozen=True, slots=True)
class Halt:
    """A batch not Ready within the progress deadline: the first VM of it not Ready."""

    key: VMKey
    after_s: float  # how long the batch had been waiting
    cause: str = ""  # the readiness source's last answer for it ("" none known)
    at: float = 0.0  # epoch seconds


@dataclass(frozen=True, slots=True)
class RolloutProgress:
    """What a host keeps of its rollout between reconciles (state.json: daemon/rollouts.py)."""

    revision: str = ""
    batch: tuple[VMKey, ...] = ()  # the batch in flight: restarted, not all Ready yet
    started_at: float = 0.0  # when its restarts were planned (epoch seconds)
    halt: Halt | None = None
    reverted: tuple[VMKey, ...] = ()  # onFailure revert: the halted VMs sent back to ``healthy``
    healthy: str = ""  # the last revision healthy on this host (what onFailure revert returns to)


@dataclass(frozen=True, slots=True)
class Paced:
    """What pacing made of a plan: the batches (the first restarts now, unless waiting),
    the VMs whose restart waits, the progress to keep, and the revision's health."""

    batches: tuple[Batch, ...] = ()
    waiting: tuple[VMKey, ...] = ()  # restarts held for a later batch (or by a halt)
    staged: tuple[VMKey, ...] = ()  # opportunistic / unmanaged pools: staged, never restarted by us
    progress: RolloutProgress = field(default_factory=RolloutProgress)
    health: Health = Health.HEALTHY
    not_ready: tuple[VMKey, ...] = ()  # VMs of the revision on the host not Ready now

    @property
    def halted(self) -> Halt | None:
        return self.progress.halt
