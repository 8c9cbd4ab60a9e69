"""What the prober (``prober.py``) holds of one VM, and of one run of a probe under way.

Input: the VM as its host's last reconcile left it, its probes' states and answers (the
prober's, under its lock). Output: ``Entry`` (one per VM with probes, liveness restarts
or an address to keep; a VM with none of these, ``bare``, is kept as its readiness
alone) and ``Job`` (one run, or a guest's end). No I/O; it never decides anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.model.health import ProbeKind
from reconciler.records import dataclass

if TYPE_CHECKING:
    from reconciler.model.health import GuestAddress, Probe, Probes, ProbeState, Readiness
    from reconciler.model.keys import VMKey


@dataclass(eq=False)
class Job:
    key: VMKey
    kind: ProbeKind | None  # None: end the guest (a failed liveness probe)
    run: int  # the entry's run (a restart, a changed probe: answers of older runs are dropped)
    deadline: float
    running: bool = False
    abandoned: bool = False


@dataclass(slots=True)
class Entry:
    """What the prober holds of one VM (one of these per VM: slots, its ``Target``'s
    fields in its own, and no dictionary of runs under way until one is)."""

    key: VMKey
    host: str
    domain: str
    probes: Probes
    running: bool
    readiness: Readiness
    run: int = 0
    ready_state: ProbeState | None = None
    live_state: ProbeState | None = None
    address: GuestAddress | None = None
    restarts: int = 0
    ended: bool = False  # its liveness probe ends it: until the destroy returned, listings are older
    busy: dict[ProbeKind | None, Job] | None = None  # its runs under way, by kind (None: none)

    def job(self, kind: ProbeKind | None) -> Job | None:
        """Its run of ``kind`` under way, if any."""
        return self.busy.get(kind) if self.busy is not None else None

    def took(self, kind: ProbeKind | None, job: Job) -> None:
        if self.busy is None:
            self.busy = {}
        self.busy[kind] = job

    def done(self, kind: ProbeKind | None) -> None:
        """Its run of ``kind`` is no longer under way."""
        if self.busy is not None:
            del self.busy[kind]
            if not self.busy:
                self.busy = None

    def took_over(self, host: str, domain: str) -> None:
        """The same VM, its running and probes unchanged, as its host's last reconcile left it."""
        self.host, self.domain = host, domain

    def probe(self, kind: ProbeKind) -> Probe | None:
        return self.probes.readiness if kind == ProbeKind.READINESS else self.probes.liveness

    def state(self, kind: ProbeKind) -> ProbeState | None:
        return self.ready_state if kind == ProbeKind.READINESS else self.live_state

    def bare(self) -> bool:
        """Nothing to keep but its readiness: no probes, no restarts, no address, no run."""
        return (
            not self.probes
            and not self.restarts
            and self.address is None
            and not self.ended
            and not self.busy
        )
