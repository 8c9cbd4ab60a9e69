"""Notifications: what changed between two reconciles of a host, and how each destination
takes it.

Input: each host's outcome before and after a reconcile (``HostOutcome``), the clock's
wall time, the notification settings. Output: ``Event`` values, the decision to send one
(deduplicated per cause, rate-limited per destination: ``Limiter``) and its request for a
generic webhook (JSON, ``reconciler/data/notify/event.schema.json``, HMAC-signed like the
webhooks the daemon accepts), a Slack-compatible incoming webhook (``{"text": ...}``) or
Alertmanager's v2 API (``POST /api/v2/alerts``). Pure.

Kinds: ``applied``, ``failed``, ``drift`` (``outcome`` healed or left), ``prune-refused``,
``rollback``, ``crash-loop``, ``crash-restart``, ``host-unreachable``, ``host-reachable``,
``rollout-halted`` (paced restarts halted: ``daemon/rollouts.py``), ``autohealed`` (a
pool's replica reprovisioned: ``plan/autoheal.py``); from the prober
(``daemon/probing.py``) ``not-ready`` (``resolved`` when Ready again) and
``liveness-failed``. A condition that clears (a crash loop over, drift gone, a refusal
lifted, a failure followed by a success or by another failure) is the same kind with
``resolved: true`` and the same reason: Alertmanager gets its ``endsAt`` with the labels
of the alert it ends (``ALERT_SEVERITY``), a generic webhook the event, Slack nothing more
(``applied`` and ``host-reachable`` already say it).
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import json
from dataclasses import field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.daemon.outbox import Request
from reconciler.model.units import utc_iso as _iso
from reconciler.records import dataclass
from reconciler.wording import events as words
from reconciler.wording.escape import clean_json, printable, slack, url

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from reconciler.config.notify import Sink
    from reconciler.model.refusal import PruneRefusal

SCHEMA_VERSION = 1
ALERT_NAMES = MappingProxyType(
    {
        "failed": "ReconcilerReconcileFailed",
        "drift": "ReconcilerDrift",
        "prune-refused": "ReconcilerPruneRefused",
        "rollback": "ReconcilerRollback",
        "crash-loop": "ReconcilerCrashLoop",
        "host-unreachable": "ReconcilerHostUnreachable",
        "rollout-halted": "ReconcilerRolloutHalted",
        "applied": "ReconcilerReconcileFailed",  # resolves it
        "host-reachable": "ReconcilerHostUnreachable",  # resolves it
        "crash-restart": "ReconcilerCrashRestart",
        "autohealed": "ReconcilerAutohealed",
        "not-ready": "ReconcilerVMNotReady",
        "liveness-failed": "ReconcilerVMLivenessFailed",
    }
)
# The severity label of the alerts that resolve: a resolution carries the same labels as
# the alert it ends (Alertmanager matches them), whatever the resolving event's severity.
ALERT_SEVERITY = MappingProxyType(
    {
        "failed": "error",
        "drift": "warning",
        "prune-refused": "error",
        "crash-loop": "error",
        "host-unreachable": "error",
        "host-reachable": "error",
        "not-ready": "warning",
    }
)


@dataclass(frozen=True, slots=True)
class HostOutcome:
    """What a reconcile left on one host, as far as notifications care."""

    host: str
    revision: str = ""  # attempted
    applied: str = ""
    reason: str = ""  # "" before the first reconcile
    first_error: str = ""  # ``ReconcileStatus.first_error``: the failure's first error, one line
    unreachable: str = ""
    crash_loop: frozenset[str] = frozenset()  # subjects
    drift_left: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # subject -> fields
    drift_healed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    prune_refused: PruneRefusal | None = None
    crash_restarts: Mapping[str, int] = field(default_factory=dict)  # subject -> restart count, this apply
    halted: str = ""  # paced restarts halted: where and why, in words (wording/rollout.py)
    autohealed: Mapping[str, str] = field(default_factory=dict)  # subject -> why, reprovisioned this apply


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    host: str
    revision: str
    severity: str  # info | warning | error
    message: str
    at: float
    subject: str = ""
    reason: str = ""
    outcome: str = ""  # drift: healed | left
    fields: tuple[str, ...] = ()
    resolved: bool = False

    @property
    def cause(self) -> str:
        """What makes two events the same one (sent once per dedupe window)."""
        rev = (
            self.revision
            if self.kind in ("applied", "failed", "prune-refused", "rollback", "rollout-halted")
            else ""
        )
        return "|".join((self.kind, self.host, self.subject, self.reason, self.outcome, rev, ",".join(self.fields),
                         "resolved" if self.resolved else ""))  # fmt: skip


def detect(prev: HostOutcome, cur: HostOutcome, now: float) -> list[Event]:
    """The events between two outcomes of one host (pure; ``now`` is wall time)."""
    h, rev, out = cur.host, cur.revision, []

    def ev(kind: str, severity: str, message: str, **kw: Any) -> None:
        out.append(Event(kind, h, kw.pop("revision", rev), severity, message, now, **kw))

    if cur.unreachable and not prev.unreachable:
        ev("host-unreachable", "error", words.unreachable(h, cur.unreachable))
    elif prev.unreachable and not cur.unreachable and cur.reason:
        ev("host-reachable", "info", words.reachable(h))
    failing = cur.reason not in ("", "Succeeded")
    if failing and not cur.unreachable:
        ev("failed", "error", words.failed(h, cur.reason, cur.first_error), reason=cur.reason)
    if cur.reason == "Succeeded" and cur.applied and cur.applied != prev.applied:
        ev("applied", "info", words.applied(h, cur.applied))
    # the failure cleared (or became another one): its resolution, with its own reason
    if (
        prev.reason not in ("", "Succeeded")
        and cur.reason
        and cur.reason != prev.reason
        and not cur.unreachable
    ):
        over = words.failure_over(h, prev.reason, cur.reason)
        ev("failed", "info", over, reason=prev.reason, resolved=True, revision=prev.revision)
    for subject, paths in sorted(cur.drift_left.items()):
        if prev.drift_left.get(subject) != paths:
            ev("drift", "warning", words.drift_left(subject, h, paths),
               subject=subject, outcome="left", fields=paths)  # fmt: skip
    for subject in sorted(set(prev.drift_left) - set(cur.drift_left)):
        ev("drift", "info", words.drift_gone(subject, h), subject=subject, outcome="left", resolved=True,
           fields=prev.drift_left[subject])  # fmt: skip
    for subject, paths in sorted(cur.drift_healed.items()):
        ev("drift", "info", words.drift_healed(subject, h, paths), subject=subject,
           outcome="healed", fields=paths)  # fmt: skip
    refused = cur.prune_refused
    if refused is not None and (refused, cur.revision) != (prev.prune_refused, prev.revision):
        ev("prune-refused", "error", words.prune_refused(h, refused))
    elif prev.prune_refused is not None and cur.prune_refused is None and cur.reason:
        ev("prune-refused", "info", words.prune_allowed(h), resolved=True, revision=prev.revision)
    if cur.halted and (cur.halted, cur.revision) != (prev.halted, prev.revision):
        ev("rollout-halted", "error", words.rollout_halted(h, rev, cur.halted))
    elif prev.halted and not cur.halted and cur.reason:
        ev("rollout-halted", "info", words.rollout_resumed(h), resolved=True, revision=prev.revision)
    _crashes(prev, cur, ev)
    return out


def _crashes(prev: HostOutcome, cur: HostOutcome, ev: Callable[..., None]) -> None:
    """``detect``'s events of crashing guests: crash loops begun and over, crash restarts,
    replicas autohealed."""
    h = cur.host
    for subject in sorted(cur.crash_loop - prev.crash_loop):
        ev("crash-loop", "error", words.crash_loop(subject, h), subject=subject)
    for subject in sorted(prev.crash_loop - cur.crash_loop):
        ev("crash-loop", "info", words.crash_loop_over(subject, h), subject=subject, resolved=True)
    for subject, n in sorted(cur.crash_restarts.items()):
        ev("crash-restart", "warning", words.crash_restart(subject, h, n), subject=subject)
    for subject, why in sorted(cur.autohealed.items()):
        ev("autohealed", "warning", words.autohealed(subject, h, why), subject=subject)


def rollback_event(decision: str, from_rev: str, to_rev: str, why: str, now: float) -> Event:
    refused = decision != "applied"
    message = words.rollback(not refused, from_rev, to_rev, why)
    return Event("rollback", "", to_rev, "error" if refused else "warning", message, now, reason=decision)


class Limiter:
    """Once per cause per window, at most ``per_minute`` events per destination."""

    def __init__(self, dedupe_s: float, per_minute: int) -> None:
        self.dedupe_s = dedupe_s
        self.per_minute = per_minute
        self._sent: dict[tuple[str, str], float] = {}
        self._recent: dict[str, collections.deque[float]] = {}

    def allow(self, sink: str, event: Event, now: float) -> bool:
        """``now``: monotonic seconds. Counts the event as sent when it allows it."""
        key = (sink, event.cause)
        last = self._sent.get(key)
        if last is not None and now - last < self.dedupe_s:
            return False
        recent = self._recent.setdefault(sink, collections.deque())
        while recent and now - recent[0] >= 60.0:
            recent.popleft()
        if len(recent) >= self.per_minute:
            return False
        recent.append(now)
        self._sent[key] = now
        if event.resolved:  # the condition cleared: the next time it fires is news again
            firing = Event(event.kind, event.host, event.revision, "", "", 0.0, event.subject, event.reason,
                           event.outcome, event.fields).cause  # fmt: skip
            self._sent.pop((sink, firing), None)
        for k in [k for k, t in self._sent.items() if now - t >= self.dedupe_s]:
            del self._sent[k]
        return True

    def seen(self, sink: str, event: Event, now: float) -> None:
        """Count ``event`` as sent at ``now`` without sending it (a condition the daemon's
        previous process announced: its window starts again, its rate is not counted)."""
        self._sent[(sink, event.cause)] = now


def event_document(e: Event, source: str, link: str) -> dict[str, Any]:
    """The generic webhook's body (schema ``event.schema.json``, ``schemaVersion`` 1);
    its strings through ``wording.escape.clean_json``."""
    doc: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "kind": e.kind,
        "severity": e.severity,
        "resolved": e.resolved,
        "at": _iso(e.at),
        "host": e.host,
        "revision": e.revision,
        "subject": e.subject,
        "reason": e.reason,
        "outcome": e.outcome,
        "fields": list(e.fields),
        "message": e.message,
        "cause": e.cause,
        "source": source,
        "link": link,
    }
    return dict(clean_json(doc))


def _slack_text(e: Event, link: str) -> str:
    mark = {"error": ":red_circle:", "warning": ":warning:"}.get(e.severity, ":white_check_mark:")
    text = slack(e.message)
    return f"{mark} reconciler: {text}" + (f" (<{link}|{e.revision[:12]}>)" if link else "")


def _alert(e: Event, link: str, page: str, dedupe_s: float) -> dict[str, Any]:
    severity = ALERT_SEVERITY.get(e.kind) or (e.severity if e.severity != "info" else "warning")
    labels = {"alertname": ALERT_NAMES[e.kind], "severity": severity, "service": "reconciler"}
    for key, value in (("host", e.host), ("subject", e.subject), ("reason", e.reason)):
        if value:
            labels[key] = value
    resolved = e.resolved or e.kind == "host-reachable"
    alert: dict[str, Any] = {
        "labels": labels,
        "annotations": {
            "summary": printable(e.message),
            "revision": e.revision,
            **({"commit": link} if link else {}),
        },
        "startsAt": _iso(e.at),
        # a firing alert is sent again once per dedupe window: it lasts until then, and a bit
        "endsAt": _iso(e.at if resolved else e.at + dedupe_s + 300),
    }
    if page:
        alert["generatorURL"] = page
    return alert


def wanted(sink: Sink, e: Event) -> bool:
    if sink.events and e.kind not in sink.events:
        return False
    if sink.kind == "slack":
        return not e.resolved
    if sink.kind == "alertmanager":
        # ``applied`` resolves nothing there: a failure's own resolution does, with its labels
        return e.kind in ALERT_NAMES and (e.severity != "info" or e.resolved or e.kind == "host-reachable")
    return True


def sink_request(sink: Sink, e: Event, source: str, link: str, page: str, dedupe_s: float) -> Request:
    """The request that tells ``sink`` about ``e``."""
    headers = {"Content-Type": "application/json", "User-Agent": "reconciler"}
    url = sink.url
    if sink.kind == "slack":
        body = json.dumps({"text": _slack_text(e, link)}).encode()
    elif sink.kind == "alertmanager":
        url = f"{sink.url}/api/v2/alerts"
        body = json.dumps([_alert(e, link, page, dedupe_s)], sort_keys=True).encode()
    else:
        body = json.dumps(event_document(e, source, link), sort_keys=True).encode()
        headers["X-Reconciler-Event"] = e.kind
        if sink.secret:
            digest = hmac.new(sink.secret, body, hashlib.sha256).hexdigest()
            headers["X-Hub-Signature-256"] = f"sha256={digest}"
    return Request(
        "POST", url, body, headers, label=sink.label, what=f"{e.kind} {e.host or '-'} {e.subject}".strip()
    )


def safe_source(repo: str) -> str:
    """The repository named without credentials (``https://user:token@host/...``)."""
    return url(repo)


def all_events(pairs: Iterable[tuple[HostOutcome, HostOutcome]], now: float) -> list[Event]:
    return [e for prev, cur in pairs for e in detect(prev, cur, now)]
