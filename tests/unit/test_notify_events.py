"""Notification events and their destinations (reconciler/daemon/events.py).

Covers: each transition between two outcomes of a host becomes its event (applied,
failed, its recovery, drift left and healed and gone, prune refused and lifted, crash
loop and its end, host unreachable and back) and nothing else; the same cause is sent
once per dedupe window and again after it, a resolved condition re-arms it; at most N
events a minute per destination; a generic webhook's body is valid against the shipped
JSON Schema and HMAC-signed; Slack gets escaped text and no resolved events; Alertmanager
gets v2 alerts (labels, startsAt, endsAt: in the past for a resolution, after the dedupe
window for a firing alert); a repository URL loses its credentials; drift is healed only
by a change applied that names what it turned back.
"""

from __future__ import annotations

import json
from importlib import resources

import jsonschema

from reconciler.config.notify import Sink
from reconciler.daemon import events
from reconciler.daemon.events import Event, HostOutcome, Limiter, detect
from reconciler.daemon.http import signature_ok
from reconciler.daemon.publish import healed_drift
from reconciler.model import LiveDomain, PowerState, VMKey
from reconciler.model.changes import Action, Change, ChangeClass, FieldChange, Plan
from reconciler.model.refusal import Guard, PruneRefusal
from reconciler.model.results import ApplyResult
from tests.helpers.plans import because

NOW = 1_714_564_800.0
SHA, OLD = "b" * 40, "a" * 40
SCHEMA = json.loads(resources.files("reconciler").joinpath("data/notify/event.schema.json").read_text())


def kinds(evs: list[Event]) -> list[tuple[str, str, bool]]:
    return [(e.kind, e.subject or e.reason, e.resolved) for e in evs]


def test_each_transition_is_its_event() -> None:
    ok = HostOutcome("h1", OLD, OLD, "Succeeded")
    assert detect(ok, ok, NOW) == []
    applied = HostOutcome("h1", SHA, SHA, "Succeeded")
    assert kinds(detect(ok, applied, NOW)) == [("applied", "", False)]
    failed = HostOutcome("h1", SHA, OLD, "BuildFailed", first_error="vms/x.yaml:3:1: bad; said as committed")
    (e,) = detect(ok, failed, NOW)  # the first error is a field: a "; " in it is not a second error
    assert (e.kind, e.severity, e.message) == (
        "failed",
        "error",
        "h1: BuildFailed: vms/x.yaml:3:1: bad; said as committed",
    )
    assert kinds(detect(failed, HostOutcome("h1", SHA, OLD, "Succeeded"), NOW)) == [
        ("failed", "BuildFailed", True)
    ]
    drifting = HostOutcome("h1", SHA, SHA, "Succeeded", drift_left={"vm/web": ("memory",)},
                           crash_loop=frozenset({"vm/db"}), prune_refused=PruneRefusal(Guard.MAX_PRUNE_PERCENT, SHA, 30, 3, 4))  # fmt: skip
    assert kinds(detect(applied, drifting, NOW)) == [
        ("drift", "vm/web", False),
        ("prune-refused", "", False),
        ("crash-loop", "vm/db", False),
    ]
    healed = HostOutcome("h1", SHA, SHA, "Succeeded", drift_healed={"vm/web": ("memory",)})
    assert kinds(detect(drifting, healed, NOW)) == [
        ("drift", "vm/web", True),
        ("drift", "vm/web", False),
        ("prune-refused", "", True),
        ("crash-loop", "vm/db", True),
    ]
    down = HostOutcome("h1", SHA, SHA, "ApplyFailed", "cannot connect", unreachable="cannot connect")
    assert kinds(detect(applied, down, NOW)) == [("host-unreachable", "", False)]
    assert kinds(detect(down, applied, NOW)) == [
        ("host-reachable", "", False),
        ("failed", "ApplyFailed", True),
    ]


def test_once_per_cause_per_window_and_a_rate_per_destination() -> None:
    lim = Limiter(dedupe_s=600, per_minute=3)
    fail = Event("failed", "h1", SHA, "error", "x", NOW, reason="BuildFailed")
    assert lim.allow("d", fail, 0)
    assert not lim.allow("d", fail, 10)  # same cause
    assert lim.allow("other", fail, 10)  # another destination counts apart
    assert lim.allow("d", fail, 600)  # the window passed
    crash = Event("crash-loop", "h1", SHA, "error", "x", NOW, subject="vm/a")
    assert lim.allow("d", crash, 601)
    assert lim.allow(
        "d", Event("crash-loop", "h1", SHA, "info", "x", NOW, subject="vm/a", resolved=True), 602
    )
    assert not lim.allow("d", crash, 603)  # a fourth event within the minute
    assert lim.allow("d", crash, 661)  # re-armed by the resolution, and the minute passed


def test_destinations_get_their_formats() -> None:
    e = Event(
        "failed", "h1", SHA, "error", 'h1: BuildFailed: vms/<b>&"x".yaml:1:1: bad', NOW, reason="BuildFailed"
    )
    link = f"https://github.com/a/b/commit/{SHA}"
    hook = events.sink_request(
        Sink("webhook", "https://h/x", "webhook[0] h", b"s3cret"), e, "https://github.com/a/b", link, "", 3600
    )
    doc = json.loads(hook.body)
    jsonschema.validate(doc, SCHEMA)
    assert (doc["kind"], doc["at"], doc["link"]) == ("failed", "2024-05-01T12:00:00Z", link)
    assert signature_ok(b"s3cret", hook.body, hook.headers) == (True, "hmac-sha256")
    assert hook.headers["X-Reconciler-Event"] == "failed"

    slack = Sink("slack", "https://hooks.slack.example/T/B/secretpath", "slack[0] hooks.slack.example")
    text = json.loads(events.sink_request(slack, e, "", link, "", 3600).body)["text"]
    assert 'vms/&lt;b&gt;&amp;"x".yaml:1:1: bad' in text
    assert f"<{link}|{SHA[:12]}>" in text
    assert not events.wanted(slack, Event("crash-loop", "h1", SHA, "info", "x", NOW, resolved=True))
    assert "secretpath" not in repr(events.sink_request(slack, e, "", link, "", 3600))

    am = Sink("alertmanager", "http://am:9093", "alertmanager[0] am")
    req = events.sink_request(am, e, "", link, "http://127.0.0.1:9469/", 3600)
    assert req.url == "http://am:9093/api/v2/alerts"
    (alert,) = json.loads(req.body)
    assert alert["labels"] == {"alertname": "ReconcilerReconcileFailed", "severity": "error", "service": "reconciler",
                               "host": "h1", "reason": "BuildFailed"}  # fmt: skip
    assert (alert["startsAt"], alert["endsAt"]) == ("2024-05-01T12:00:00Z", "2024-05-01T13:05:00Z")
    assert alert["generatorURL"] == "http://127.0.0.1:9469/"
    # the next revision applies: ``applied`` (not Alertmanager's: it resolves nothing there)
    # and the failure's resolution, with the labels of the alert it ends
    failing = HostOutcome("h1", SHA, OLD, "BuildFailed", "vms/x.yaml:1:1: bad")
    applied, back = detect(failing, HostOutcome("h1", "c" * 40, "c" * 40, "Succeeded"), NOW + 60)
    assert (applied.kind, back.kind, back.resolved) == ("applied", "failed", True)
    assert not events.wanted(am, applied)
    assert events.wanted(am, back)
    (resolved,) = json.loads(events.sink_request(am, back, "", link, "", 3600).body)
    assert resolved["labels"] == alert["labels"]
    assert resolved["endsAt"] == "2024-05-01T12:01:00Z"
    hook_doc = json.loads(
        events.sink_request(Sink("webhook", "https://h", "w"), back, "", link, "", 3600).body
    )
    assert (hook_doc["kind"], hook_doc["resolved"], hook_doc["reason"]) == ("failed", True, "BuildFailed")
    down = HostOutcome("h1", SHA, SHA, "ApplyFailed", "x", unreachable="x")
    (lost,) = detect(HostOutcome("h1", SHA, SHA, "Succeeded"), down, NOW)
    (found, *_) = detect(down, HostOutcome("h1", SHA, SHA, "Succeeded"), NOW + 60)
    assert found.kind == "host-reachable"
    labels = [
        json.loads(events.sink_request(am, ev, "", "", "", 3600).body)[0]["labels"] for ev in (lost, found)
    ]
    assert labels[0] == labels[1]
    assert not events.wanted(
        am, Event("drift", "h1", SHA, "info", "x", NOW, subject="vm/a", outcome="healed")
    )
    assert not events.wanted(Sink("webhook", "https://h", "w", events=frozenset({"applied"})), e)


def test_sources_are_named_without_credentials() -> None:
    assert (
        events.safe_source("https://deploy:tok@git.example.com:8443/a/b.git")
        == "https://git.example.com:8443/a/b.git"
    )
    assert events.safe_source("git@github.com:a/b.git") == "git@github.com:a/b.git"


def test_drift_is_healed_only_by_a_change_applied_that_names_it() -> None:
    """No ``drift healed`` without a change: a start left waiting for the VM's restart in
    flight, or failed, heals nothing; a power drift turned back names the power state; a
    transient domain defined again names its definition."""

    def key(n: str) -> VMKey:
        return VMKey.from_domain(n)

    off = LiveDomain("a", "u", PowerState.SHUTOFF, "<domain/>", state_reason="destroyed")
    gone = LiveDomain("d", "u", PowerState.RUNNING, "<domain/>", persistent=False)
    changes = (
        Change(
            key("a"), Action.START, because(""), live=off, start=True, drift=True
        ),  # out of band: started again
        Change(
            key("b"), Action.START, because(""), live=off, start=True, drift=True
        ),  # its restart in flight
        Change(
            key("c"),
            Action.UPDATE,
            because(""),
            fields=(FieldChange("memory", "1", "2", ChangeClass.LIVE),),
            drift=True,
        ),
        Change(key("d"), Action.UPDATE, because(""), live=gone, drift=True, redefine=True),
        Change(key("e"), Action.START, because(""), live=off, start=True, drift=True),  # failed
    )
    results = (
        ApplyResult(key("a"), Action.START, True),
        ApplyResult(key("b"), Action.WAIT, True, pending=True),
        ApplyResult(key("c"), Action.UPDATE, True),
        ApplyResult(key("d"), Action.UPDATE, True),
        ApplyResult(key("e"), Action.START, False),
    )
    assert healed_drift(Plan(SHA, changes), results) == {
        "vm/a": ("power state",),
        "vm/c": ("memory",),
        "vm/d": ("persistent definition",),
    }
