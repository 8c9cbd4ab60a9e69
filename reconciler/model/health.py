"""A VM's health as KubeVirt defines it: its probes, their answers, Ready and liveness.

Input: nothing (records), a probe's answers and the monotonic time. Output: ``Probe``
and ``Probes`` (a VM's ``readinessProbe`` and ``livenessProbe`` as ``render/probes.py``
reads them, KubeVirt's defaults applied), ``Answer`` (what one probe run found, as a
record: an outcome from a closed list, an exit or HTTP status), ``ProbeState`` and
``step`` (the thresholds: consecutive successes and failures, KubeVirt's and the
kubelet's rules), ``readiness_of`` (Ready from the domain's power state and its
readiness probe), ``Readiness`` (ready, why as a record, since when) and ``VMHealth``
(all of it for one VM, what status, the page and the metrics show). Pure: no clock is
read here, every time is passed in; words are made in ``wording/health.py``.
"""

from __future__ import annotations

import enum
from dataclasses import replace

from reconciler.records import dataclass

# KubeVirt's (the kubelet's) defaults for a probe's timing (v1.Probe).
PERIOD_S = 10
TIMEOUT_S = 1
FAILURE_THRESHOLD = 3
SUCCESS_THRESHOLD = 1
# The state reason of a domain a failing liveness probe ended (libvirt says "destroyed"):
# a failure, restarted by the run strategy under the crash-loop back-off.
LIVENESS_FAILED = "liveness-failed"


class ProbeAction(enum.StrEnum):
    """The one action a probe runs (KubeVirt's v1.Probe handler)."""

    GUEST_AGENT_PING = "guestAgentPing"
    EXEC = "exec"
    TCP_SOCKET = "tcpSocket"
    HTTP_GET = "httpGet"

    @property
    def networked(self) -> bool:
        """Whether it reaches the guest over the network (it needs the guest's address)."""
        return self in (ProbeAction.TCP_SOCKET, ProbeAction.HTTP_GET)


class ProbeKind(enum.StrEnum):
    READINESS = "readiness"
    LIVENESS = "liveness"


@dataclass(frozen=True, slots=True)
class Probe:
    """One probe of a VM, KubeVirt's defaults applied (a 0 in the spec is the default)."""

    action: ProbeAction
    command: tuple[str, ...] = ()  # exec
    host: str = ""  # tcpSocket/httpGet: "" = the guest's address
    port: int = 0
    path: str = "/"  # httpGet
    scheme: str = "HTTP"
    headers: tuple[tuple[str, str], ...] = ()
    initial_delay_s: int = 0
    period_s: int = PERIOD_S
    timeout_s: int = TIMEOUT_S
    failure_threshold: int = FAILURE_THRESHOLD
    success_threshold: int = SUCCESS_THRESHOLD


@dataclass(frozen=True, slots=True)
class Probes:
    """A VM's probes (``None``: not set)."""

    readiness: Probe | None = None
    liveness: Probe | None = None

    def __bool__(self) -> bool:
        return self.readiness is not None or self.liveness is not None


NO_PROBES = Probes()


class Outcome(enum.StrEnum):
    """What one run of a probe found (a closed list)."""

    PASSED = "Passed"
    FAILED = "Failed"  # exec: a non-zero exit status; httpGet: a status outside 200-399
    NO_AGENT = "NoAgent"  # the guest agent did not answer (not running, not connected)
    TIMEOUT = "Timeout"  # no answer within timeoutSeconds
    REFUSED = "Refused"  # tcpSocket/httpGet: the connection was refused or reset
    NO_ADDRESS = "NoAddress"  # tcpSocket/httpGet: the guest has no address known yet
    ERROR = "Error"  # the host could not run it (the connection to libvirt, the domain gone): not counted


class AddressSource(enum.StrEnum):
    """Where the address a network probe used came from."""

    AGENT = "agent"  # the guest agent's interfaces (VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT)
    LEASE = "lease"  # the libvirt network's DHCP leases (VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE)
    SPEC = "spec"  # the probe's own ``host``


@dataclass(frozen=True, slots=True)
class GuestAddress:
    address: str
    source: AddressSource


@dataclass(frozen=True, slots=True)
class Answer:
    """One run of a probe: its outcome, the exit or HTTP status, when it ended (monotonic)."""

    outcome: Outcome
    at: float = 0.0
    code: int | None = None
    address: GuestAddress | None = None  # network probes: where it went

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.PASSED


@dataclass(frozen=True, slots=True)
class ProbeState:
    """Where one probe of one run of the guest stands. ``passing`` starts as the kubelet
    starts it: a readiness probe failing (not Ready until it passes), a liveness probe
    passing (the guest lives until it fails ``failureThreshold`` times in a row)."""

    started: float  # monotonic: the guest's run began (initialDelaySeconds counts from it)
    next_at: float  # monotonic: the next run is due
    passing: bool
    successes: int = 0
    failures: int = 0
    runs: int = 0
    last: Answer | None = None


def first_state(kind: ProbeKind, probe: Probe, started: float) -> ProbeState:
    """A probe of a guest that started (or was first seen running) at ``started``."""
    return ProbeState(started, started + probe.initial_delay_s, passing=kind == ProbeKind.LIVENESS)


def step(probe: Probe, state: ProbeState, answer: Answer, now: float) -> ProbeState:
    """The state after ``answer`` (at ``now``): the thresholds count consecutive answers;
    the next run is due a period after this one was (as the kubelet's ticker), at once
    when a slow answer passed that."""
    if answer.outcome == Outcome.ERROR:  # the host could not ask: counted neither way (the kubelet's rule)
        successes, failures, passing = state.successes, state.failures, state.passing
    elif answer.ok:
        successes, failures = state.successes + 1, 0
        passing = True if successes >= probe.success_threshold else state.passing
    else:
        successes, failures = 0, state.failures + 1
        passing = False if failures >= probe.failure_threshold else state.passing
    return replace(
        state,
        next_at=max(state.next_at + probe.period_s, now),
        passing=passing,
        successes=successes,
        failures=failures,
        runs=state.runs + 1,
        last=answer,
    )


class ReadyKind(enum.StrEnum):
    """Why a VM is Ready or not (a closed list)."""

    RUNNING = "Running"  # no readiness probe: Ready while the domain runs (KubeVirt)
    PROBE_PASSED = "ProbePassed"
    NOT_RUNNING = "NotRunning"
    PROBE_PENDING = "ProbePending"  # the probe has not passed yet (initial delay, first runs)
    PROBE_FAILED = "ProbeFailed"


@dataclass(frozen=True, slots=True)
class ReadyReason:
    kind: ReadyKind
    action: ProbeAction | None = None  # the readiness probe's, when it decides
    answer: Answer | None = None  # its last answer


@dataclass(frozen=True, slots=True)
class Readiness:
    """Whether a VM is Ready, why, and since when (wall-clock seconds)."""

    ready: bool
    reason: ReadyReason
    since: float


def readiness_of(running: bool, probe: Probe | None, state: ProbeState | None) -> tuple[bool, ReadyReason]:
    """Ready as KubeVirt says it: a VM that does not run is not Ready; without a readiness
    probe a running VM is; with one, once the probe passes."""
    if not running:
        return False, ReadyReason(ReadyKind.NOT_RUNNING)
    if probe is None:
        return True, ReadyReason(ReadyKind.RUNNING)
    last = state.last if state is not None else None
    if state is not None and state.passing:
        return True, ReadyReason(ReadyKind.PROBE_PASSED, probe.action, last)
    kind = ReadyKind.PROBE_FAILED if state is not None and state.runs else ReadyKind.PROBE_PENDING
    return False, ReadyReason(kind, probe.action, last)


@dataclass(frozen=True, slots=True)
class VMHealth:
    """A VM's health on its host: Ready, its probes' states, the address network probes
    used, how often its liveness probe ended the guest."""

    readiness: Readiness
    probes: Probes = NO_PROBES
    ready_state: ProbeState | None = None
    live_state: ProbeState | None = None
    address: GuestAddress | None = None
    liveness_restarts: int = 0
