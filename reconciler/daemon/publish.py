"""Results where the team looks: commit statuses on the forge, notifications, and the
document behind the status page and ``/api/status``.

Input: the daemon's host runners when a reconcile starts and after each one is recorded
(statuses, rows, plans while they are still held), the daemon's overall outcome and its
state document (history), the notification settings and the clock. Output: requests
queued on the ``outbox`` (never sent from the loop: a reconcile never waits for a
forge), metrics, and ``document``: a versioned JSON-able snapshot (``schemaVersion`` 1)
the HTTP thread reads. Never plans or applies; reads nothing from libvirt or git.

Commit statuses: ``pending`` when a host starts on a revision it has not reported yet
(a resync of the same revision says nothing new), then ``success`` or ``failure`` with
the reason and the first error; a status is sent again only when what it says changes.
"""

from __future__ import annotations

import threading
from dataclasses import field
from typing import TYPE_CHECKING, Any

import structlog

from reconciler.config.notify import commit_url
from reconciler.daemon import events, forge, rollouts
from reconciler.daemon.outbox import Outbox
from reconciler.model.changes import Action
from reconciler.model.results import Reason, Sync
from reconciler.model.units import utc_iso as _iso
from reconciler.records import dataclass
from reconciler.status import refused as kept_refusal
from reconciler.wording import problems
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from reconciler.config.daemon import DaemonConfig
    from reconciler.context import Clock
    from reconciler.daemon.metrics import Metrics
    from reconciler.daemon.outbox import Request
    from reconciler.daemon.rollback import Rollback
    from reconciler.daemon.runner import HostRunner
    from reconciler.model.changes import Change, Plan
    from reconciler.model.results import ApplyResult, ReconcileStatus, VMStatus

log = structlog.get_logger("reconciler.daemon")

SCHEMA_VERSION = 1
MAX_FIELDS = 50
MAX_VALUE = 200
MAX_ERRORS = 50


@dataclass
class _HostDetail:
    """What the page shows of a host's last plan, kept after the plan itself is dropped."""

    fields: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # VM name -> out-of-sync fields
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    outcome: events.HostOutcome | None = None
    seen: object = None  # the host status the events were last taken from


def _clip(text: str | None) -> str:
    s = "" if text is None else str(text)
    return s if len(s) <= MAX_VALUE else s[: MAX_VALUE - 1] + "…"


def _fields(plan: Plan) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for c in plan.changes:
        if c.fields and (c.drift or c.restart_required or c.action in (Action.WAIT, Action.UNCHANGED)):
            out[c.name] = [
                {"path": f.path, "old": _clip(f.old), "new": _clip(f.new), "class": str(f.change_class)}
                for f in c.fields[:MAX_FIELDS]
            ]
    return out


def healed_drift(plan: Plan, results: Sequence[ApplyResult]) -> dict[str, tuple[str, ...]]:
    """The drift this apply reverted, by what it changed: the fields, the definition of a
    domain left transient, the power state. A change left waiting for the VM's work in
    flight, a failed one, or one with nothing to name (a restart the reconciler planned)
    healed nothing."""
    done = {r.key for r in results if r.ok and r.action != Action.WAIT}
    healed: dict[str, tuple[str, ...]] = {}
    for c in plan.changes:
        if not c.drift or c.is_noop or c.key not in done:
            continue
        what = [f.path for f in c.fields]
        if c.live is not None and not c.live.persistent and c.defines:
            what.append("persistent definition")
        if not what and (c.start or c.stop):  # started or stopped out of band, turned back
            what.append("power state")
        if what:
            healed[c.subject] = tuple(what)
    return healed


def crashed_again(plan: Plan, results: Sequence[ApplyResult]) -> list[Change]:
    """The changes of this apply that started a VM again after a crash."""
    done = {r.key for r in results if r.ok and r.action != Action.WAIT}
    return [c for c in plan.changes if c.start and c.restarts and c.key in done]


def _moving(plan: Plan, results: Sequence[ApplyResult]) -> bool:
    """Whether a host move is half done here: the new copy waits for the old one, or the
    old copy's graceful stop runs on in flight (``plans.moves``)."""
    pending = {r.key for r in results if r.pending}
    return any(
        c.action == Action.WAIT or (c.action == Action.DELETE and c.desired is not None and c.key in pending)
        for c in plan.changes
    )


@dataclass(frozen=True, slots=True)
class _Rows:
    """A host's rows in the kept document: its records, made into the page's dictionaries
    only when the document is read (a dictionary per VM is not held between reconciles)."""

    rows: tuple[VMStatus, ...]
    fields: dict[str, list[dict[str, str]]]  # the plan's out-of-sync fields by VM name

    def documents(self) -> list[dict[str, Any]]:
        return [
            {
                "name": r.name,
                "subject": r.subject,
                "runStrategy": r.run_strategy,
                "state": r.state,
                "sync": r.sync,
                "revision": r.revision,
                "restartRequired": r.restart_required,
                "message": r.message,
                "appliedAt": _iso(r.applied_at),
                "outOfSync": self.fields.get(r.name, []),
                "notes": [{"notice": k, "message": m} for k, m in r.notes],
                **ready_fields(r),
            }
            for r in self.rows
        ]


def ready_fields(r: VMStatus) -> dict[str, Any]:
    """A row's health in ``/api/status`` (``ready`` null where nothing probed it)."""
    return {
        "ready": r.ready, "readyReason": r.ready_reason, "readySince": _iso(r.ready_since), "probe": r.probe,
        "address": r.address, "addressSource": r.address_source, "livenessRestarts": r.liveness_restarts,
    }  # fmt: skip


def outcome_of(h: HostRunner, plan: Plan | None, previous: events.HostOutcome | None) -> events.HostOutcome:
    st = h.status
    if plan is not None:
        left = {
            c.subject: tuple(f.path for f in c.fields)
            for c in plan.changes
            if c.drift and c.action == Action.UNCHANGED
        }
        healed = healed_drift(plan, st.results if st is not None else ())
        restarted = {c.subject: c.restarts for c in crashed_again(plan, st.results if st is not None else ())}
        done = {r.key for r in (st.results if st is not None else ()) if r.ok}
        autohealed = {c.subject: said(c) for c in plan.changes if c.reprovision and c.key in done}
        refused = plan.prune_refused
    else:  # no plan this time (the host was down, the source failed): what was known stands
        left = dict(previous.drift_left) if previous else {}
        healed, refused = {}, previous.prune_refused if previous else None
        restarted, autohealed = {}, {}
    # ``applied`` is announced when the revision's work is done on the host: not while a
    # host move waits for another host, nor while a graceful stop runs on in flight
    busy = plan is not None and _moving(plan, st.results if st is not None else ())
    return events.HostOutcome(
        host=h.name,
        revision=st.attempted_revision if st else "",
        applied=(previous.applied if previous else "") if busy else h.applied,
        reason=str(st.reason) if st else "",
        first_error=st.first_error if st else "",
        unreachable=h.unreachable,
        crash_loop=frozenset(r.subject for r in h.rows if r.sync == Sync.CRASH_LOOP),
        drift_left=left,
        drift_healed=healed,
        prune_refused=refused,
        crash_restarts=restarted,
        halted=rollouts.halted(h.paced),
        autohealed=autohealed,
    )


class Publisher:
    def __init__(
        self,
        config: DaemonConfig,
        clock: Clock,
        metrics: Metrics,
        send: Callable[[Request], int] | None = None,
    ) -> None:
        self.clock = clock
        self.metrics = metrics
        kw: dict[str, Any] = {} if send is None else {"send": send}
        self.outbox = Outbox(clock, on_result=self._result, on_lane=self._lane, **kw)
        self._lock = threading.Lock()
        self._details: dict[str, _HostDetail] = {}
        self._reported: dict[str, tuple[str, str, str]] = {}  # host -> (sha, state, description)
        self._rollback: tuple[str, str] | None = None
        self._reconciling = ""
        self.reload(config)
        none = {"revision": "", "link": ""}
        self._kept: dict[str, Any] = {  # the document, each host's rows as records (``_Rows``)
            "schemaVersion": SCHEMA_VERSION, "generatedAt": "", "reason": "", "message": "", "reconciling": "",
            "source": {"repo": self.source, "branch": config.source.branch, "path": config.source.path},
            "attempted": none, "applied": {**none, "at": ""}, "rollback": None, "hosts": [], "history": [],
        }  # fmt: skip

    def reload(self, config: DaemonConfig) -> None:
        self.config = config
        self.notify = config.notify
        self.limiter = events.Limiter(self.notify.dedupe_s, self.notify.rate_per_minute)
        self.commit_link = commit_url(config.source.repo, self.notify.commit_status)
        self.source = events.safe_source(config.source.repo)
        page = self.notify.commit_status.target_url if self.notify.commit_status else ""
        self.page = page or (f"http://{config.listen}/" if config.listen else "")

    def _result(self, label: str, result: str) -> None:
        self.metrics.notifications.labels(label, result).inc()
        if result in ("retry", "unanswered", "gave-up"):
            self.metrics.outbox_failures.labels(label).inc()

    def _lane(self, label: str) -> None:
        """A destination's queue is new: its depth and oldest age read from it when scraped."""
        box = self.outbox
        self.metrics.outbox_depth.labels(label).set_function(lambda: box.depth(label))
        self.metrics.outbox_oldest.labels(label).set_function(lambda: box.oldest_s(label))

    def start(self) -> None:
        if self.notify.active:
            self.outbox.start()

    def close(self) -> None:
        self.outbox.close()

    def link(self, sha: str) -> str:
        return self.commit_link.replace("{sha}", sha) if sha and self.commit_link else ""

    def restore(self, state: dict[str, Any]) -> dict[str, Any]:
        """Each host's last outcome as ``state.json`` kept it (``hosts``), read at start: a
        condition the previous process announced (a failing source, a failed apply) is
        neither announced again nor resolved by the first reconcile of this one, and its
        clearing later is still announced. Its dedupe window starts again now. Returns
        ``state`` (the caller reads the rest of it)."""
        now = self.clock.monotonic()
        kept = state.get("hosts")
        for name, h in kept.items() if isinstance(kept, dict) else ():
            if not isinstance(h, dict) or not str(h.get("reason", "")):
                continue
            outcome = events.HostOutcome(
                str(name), revision=str(h.get("attempted_revision", "")), applied=str(h.get("applied_revision", "")),
                reason=str(h["reason"]),  # the cause of its events: the words are not kept
            )  # fmt: skip
            self._details.setdefault(str(name), _HostDetail()).outcome = outcome
            for e in events.detect(events.HostOutcome(str(name)), outcome, self.clock.time()):
                for sink in self.notify.sinks:
                    self.limiter.seen(sink.label, e, now)
        return state

    # -- hooks called by the daemon's loop ------------------------------------------------

    def started(self, head: str, hosts: Sequence[HostRunner]) -> None:
        """A reconcile of ``head`` begins: pending for hosts that have not reported it."""
        self._reconciling = head
        cs = self.notify.commit_status
        for h in hosts:
            detail = self._details.setdefault(h.name, _HostDetail())
            if detail.outcome is None:  # what the host held before this daemon's first reconcile
                detail.outcome = events.HostOutcome(h.name, revision=h.applied, applied=h.applied)
            if cs is not None and self._reported.get(h.name, ("",))[0] != head:
                self._status(h.name, head, forge.PENDING, forge.description(h.name, "", ""))
        self._kept = {**self._kept, "reconciling": head}

    def recorded(
        self,
        hosts: Sequence[HostRunner],
        status: ReconcileStatus,
        state: Mapping[str, Any],
        rollback: Rollback | None,
    ) -> None:
        """A reconcile's outcome was recorded: statuses, notifications, the page's document."""
        self._reconciling = ""
        now = self.clock.time()
        found: list[events.Event] = []
        for h in hosts:
            detail = self._details.setdefault(h.name, _HostDetail())
            prev = detail.outcome or events.HostOutcome(h.name, applied=h.applied)
            if h.plan is not None:
                detail.fields, detail.warnings = _fields(h.plan), list(problems.group(h.plan.warnings))
                detail.errors = [problems.words(e) for e in h.plan.errors[:MAX_ERRORS]]
            cur = outcome_of(h, h.plan, detail.outcome)
            detail.outcome = cur
            if h.status is not None and h.status is not detail.seen:  # this reconcile reached the host
                found += events.detect(prev, cur, now)
                for c in crashed_again(h.plan, h.status.results) if h.plan is not None else ():
                    self.metrics.crash_restarted(h.name, c.name)
                detail.seen = h.status
            self.metrics.revision_applied.labels(h.name).set(
                int(bool(cur.revision) and cur.applied == cur.revision)
            )
            self.metrics.prune_refused.labels(h.name).set(int(cur.prune_refused is not None))
        if rollback is not None and self._rollback != (rollback.to_revision, rollback.decision):
            self._rollback = (rollback.to_revision, rollback.decision)
            found.append(events.rollback_event(rollback.decision, rollback.from_revision, rollback.to_revision,
                                               rollback.why, now))  # fmt: skip
        self._commit_statuses(hosts, status)
        for e in found:
            self._announce(e)
        self._kept = self._document(hosts, status, state, rollback)

    @property
    def document(self) -> dict[str, Any]:
        """The document behind the status page and ``/api/status``, as last recorded."""
        kept = self._kept
        return {**kept, "hosts": [{**h, "vms": h["vms"].documents()} for h in kept["hosts"]]}

    # -- commit statuses and notifications ------------------------------------------------

    def _status(self, host: str, sha: str, state: str, text: str) -> None:
        cs = self.notify.commit_status
        if cs is None or not sha or self._reported.get(host) == (sha, state, text):
            return
        self._reported[host] = (sha, state, text)
        self.outbox.put(forge.status_request(cs, sha, host, state, text))

    def _commit_statuses(self, hosts: Sequence[HostRunner], status: ReconcileStatus) -> None:
        # the whole revision refused (an unverified commit, a refused rollback): every host
        # says so; a fetch that failed names no commit, and the hosts' statuses stand
        whole = status.reason == Reason.ROLLBACK_REFUSED or bool(status.failed_commit)
        for h in hosts:
            st = status if whole else h.status
            if st is None or not st.attempted_revision or st.attempted_revision != status.attempted_revision:
                continue
            state = forge.SUCCESS if st.reason == Reason.SUCCEEDED else forge.FAILURE
            text = forge.description(h.name, str(st.reason), st.first_error)
            health = rollouts.commit_state(h.paced, st.attempted_revision) if state == forge.SUCCESS else None
            if health is not None:  # applied, not healthy yet (or halted): pending, or failure
                state, text = health[0], forge.description(h.name, health[1], health[2])
            self._status(h.name, st.attempted_revision, state, text)

    def health_changed(self, found: Sequence[events.Event]) -> None:
        """From the prober's thread: a VM's Ready changed, a liveness probe ended a guest."""
        with self._lock:
            for e in found:
                self._announce(e)

    def _announce(self, e: events.Event) -> None:
        log.info("event", kind=e.kind, host=e.host, subject=e.subject, resolved=e.resolved, message=e.message)
        now = self.clock.monotonic()
        for sink in self.notify.sinks:
            if events.wanted(sink, e) and self.limiter.allow(sink.label, e, now):
                self.outbox.put(events.sink_request(sink, e, self.source, self.link(e.revision), self.page,
                                                    self.notify.dedupe_s))  # fmt: skip
            elif events.wanted(sink, e):
                self.metrics.notifications.labels(sink.label, "suppressed").inc()

    # -- the status document --------------------------------------------------------------

    def _document(
        self,
        hosts: Sequence[HostRunner],
        status: ReconcileStatus,
        state: Mapping[str, Any],
        rollback: Rollback | None,
    ) -> dict[str, Any]:
        attempted = str(state.get("attempted_revision", ""))
        applied = str(state.get("applied_revision", ""))
        src = self.config.source
        return {
            "schemaVersion": SCHEMA_VERSION,
            "generatedAt": _iso(self.clock.time()),
            "source": {"repo": self.source, "branch": src.branch, "path": src.path},
            "attempted": {"revision": attempted, "link": self.link(attempted)},
            "applied": {
                "revision": applied,
                "link": self.link(applied),
                "at": _iso(float(state.get("applied_at") or 0)),
            },
            "reason": str(state.get("reason", "")),
            "message": str(state.get("message", "")),
            "reconciling": self._reconciling,
            "rollback": rollback.to_json() if rollback is not None else None,
            "hosts": [self._host(h) for h in hosts],
            "history": [
                {
                    "revision": str(e.get("revision", "")),
                    "link": self.link(str(e.get("revision", ""))),
                    "result": str(e.get("result", "")),
                    "applied": bool(e.get("applied")),
                    "startedAt": _iso(float(e.get("started_at") or 0)),
                    "durationMs": int(e.get("duration_ms") or 0),
                    "message": str(e.get("message", "")),
                    "count": int(e.get("count") or 1),
                }
                for e in state.get("history", [])
                if isinstance(e, dict)
            ],
        }

    def _host(self, h: HostRunner) -> dict[str, Any]:
        st, detail = h.status, self._details.get(h.name, _HostDetail())
        reported = self._reported.get(h.name)
        return {
            "name": h.name,
            "uri": h.entry.uri,
            "reachable": not h.unreachable,
            "error": h.unreachable,
            "reason": str(st.reason) if st else "",
            "message": st.message if st else "",
            "attempted": {"revision": st.attempted_revision if st else "", "link": self.link(st.attempted_revision if st else "")},
            "applied": {"revision": h.applied, "link": self.link(h.applied)},
            "durationMs": st.duration_ms if st else 0,
            "errors": detail.errors,
            "warnings": detail.warnings,
            "pruneRefused": kept_refusal.message(h.prune_refused),
            "health": rollouts.page(h.paced),
            "held": {"enforced": h.applied, "blocked": h.blocked.revision, "reason": str(h.blocked.reason)}
            if h.blocked is not None and h.applied else None,
            "commitStatus": {"state": reported[1], "revision": reported[0], "context": self.notify.commit_status.context_for(h.name)}
            if reported and self.notify.commit_status else None,
            "vms": _Rows(h.rows, detail.fields),  # made into dictionaries when read (``document``)
        }  # fmt: skip
