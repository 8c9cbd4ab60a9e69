"""Per-VM and per-commit state: build it (pure), print it, write it out (I/O).

Input: a Plan, apply results and live domains. Output: ``VMStatus`` rows, a text
table, and ``state.json`` written atomically (temp file + fsync + rename), every string
in it through ``wording.escape.clean_json`` (printable, no credentials in URLs).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.model import LiveDomain, PowerState, VMKey
from reconciler.model.changes import Action, Plan
from reconciler.model.results import ApplyResult, ReconcileStatus, Sync, VMStatus
from reconciler.status import refused
from reconciler.status.health import recorded_health
from reconciler.status.sync import planned_sync, worth_reading
from reconciler.status.table import age
from reconciler.wording import status_lines as lines_words
from reconciler.wording.escape import clean_json

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

STATE_FILE = "state.json"
HISTORY = 20


def vm_statuses(
    plan: Plan,
    results: Sequence[ApplyResult],
    live_after: Sequence[LiveDomain],
    host: str,
    applied: Mapping[str, float] | None = None,
    now: float | None = None,
) -> tuple[VMStatus, ...]:
    """One row per planned domain, with its state after apply.

    ``applied``: each VM's previous ``applied_at`` (by name), kept unless this apply
    changed the VM, which stamps it ``now``.
    """
    rows = _vm_statuses(plan, results, live_after, host)
    by_key = {r.key: r for r in results}
    stamp = time.time() if now is None else now
    prev = applied or {}

    def applied_at(row: VMStatus) -> float:
        r = by_key.get(row.key)
        if r is not None and r.ok and r.action not in (Action.UNCHANGED, Action.SKIPPED, Action.WAIT):
            return stamp
        return prev.get(row.name, 0.0)

    return tuple(replace(row, applied_at=applied_at(row)) for row in rows)


def _vm_statuses(
    plan: Plan,
    results: Sequence[ApplyResult],
    live_after: Sequence[LiveDomain],
    host: str,
) -> tuple[VMStatus, ...]:
    by_key = {r.key: r for r in results}
    live_by_key = {d.key: d for d in live_after}
    noted: dict[VMKey, list[tuple[str, str]]] = {}
    for w in plan.warnings:
        if w.notice is not None and w.vm is not None:
            noted.setdefault(w.vm, []).append((str(w.notice), w.message))
    rows = []
    for c in plan.changes:
        live = live_by_key.get(c.key)
        result = by_key.get(c.key)
        sync, message = planned_sync(plan, c, result)
        if c.action == Action.DELETE and result is not None and result.ok:
            state = "deleted"
        else:
            state = str(live.state) if live is not None else "absent"
        strategy = (
            str(c.desired.run_strategy)
            if c.desired
            else (live.mark.run_strategy if live and live.mark else "")
        )
        rows.append(
            VMStatus(
                key=c.key,
                host=host,
                run_strategy=sys.intern(strategy),  # words every VM repeats: one copy (the daemon keeps rows)
                state=sys.intern(state),
                sync=sync,
                revision=_short(live.mark.commit if live is not None and live.mark else plan.revision),
                restart_required=c.restart_required,
                message=message,
                notes=tuple(noted.get(c.key, ())),
                images=c.desired.images if c.desired else (),
            )
        )
    return (*rows, *_unapplied_rows(plan, live_after, host))


def _unapplied_rows(plan: Plan, live_after: Sequence[LiveDomain], host: str) -> list[VMStatus]:
    """The rows of a revision with errors: with no change planned, each marked domain's
    (nothing of it applied); and each VM of it that did not build."""
    rows: list[VMStatus] = []
    if plan.errors and not plan.changes:  # a revision with errors: nothing of it applied
        rows.extend(
            VMStatus(
                key=d.key,
                host=host,
                run_strategy=d.mark.run_strategy,
                state=str(d.state),
                sync=Sync.OUT_OF_SYNC,
                revision=d.mark.commit[:12],
                message=f"revision {plan.revision[:12]} not applied: it has errors",
            )
            for d in sorted(live_after, key=lambda d: d.name)
            if d.mark is not None and d.key not in {k for k, _ in plan.failed}
        )
    for key, live in plan.failed:  # in git, but it did not build: listed all the same
        rows.append(
            VMStatus(
                key=key,
                host=host,
                run_strategy=live.mark.run_strategy if live is not None and live.mark else "",
                state=str(live.state) if live is not None else "absent",
                sync=Sync.FAILED,
                revision=(live.mark.commit if live is not None and live.mark else "")[:12],
                message="this revision of the VM does not build (see the reconcile message)",
            )
        )
    return rows


def _short(commit: str) -> str:
    """A commit's first 12 characters, one copy for every row naming it."""
    return sys.intern(commit[:12])


_RESULT_FIELDS = ("subject", "ok", "message", "transient")
# A row in state.json: its subject and domain name for the key, then its other fields.
_VM_FIELDS = ("subject", "name", *(f.name for f in fields(VMStatus) if f.name != "key"))


def row_document(v: VMStatus) -> dict[str, Any]:
    """A status row as data (``state.json``, ``status -o json``): ``subject`` and ``name``
    for its key, then the other fields in their order (``notes`` as ``{notice, message}``)."""
    doc = {k: getattr(v, k) for k in _VM_FIELDS}
    doc["notes"] = [{"notice": k, "message": m} for k, m in v.notes]
    doc["images"] = [{"image": i, "digest": d} for i, d in v.images]
    return doc


STATUS_SCHEMA_VERSION = 1  # `status -o json` (reconciler/data/schemas/status.schema.json)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _camel_keys(value: Any) -> Any:
    """A record of ``state.json`` (snake_case keys) as every ``-o json`` names keys."""
    if isinstance(value, dict):
        return {camel(str(k)): _camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel_keys(v) for v in value]
    return value


def status_document(
    state: Mapping[str, Any], rows: Sequence[VMStatus], unreachable: Sequence[str]
) -> dict[str, Any]:
    """``status -o json|yaml``: the daemon's last reconcile (from ``state.json``), each
    host's outcome (by host name), the VM rows (libvirt's view now, merged with the
    daemon's), the hosts that did not answer and the history; camelCase keys, as every
    JSON of the CLI."""
    return {
        "schemaVersion": STATUS_SCHEMA_VERSION,
        "attemptedRevision": str(state.get("attempted_revision", "")),
        "appliedRevision": str(state.get("applied_revision", "")),
        "reason": str(state.get("reason", "")),
        "message": str(state.get("message", "")),
        "failedCommit": str(state.get("failed_commit", "")),
        "hosts": {str(name): _camel_keys(refused.shown(h)) for name, h in (state.get("hosts") or {}).items()},
        "unreachable": list(unreachable),
        "vms": [_camel_keys(row_document(r)) for r in rows],
        "history": _camel_keys(list(state.get("history", []))),
    }


def _notes(recorded: object) -> tuple[tuple[str, str], ...]:
    """``notes`` of a recorded row, as ``row_document`` wrote them (anything else: none)."""
    if not isinstance(recorded, list):
        return ()
    return tuple(
        (str(n["notice"]), str(n["message"]))
        for n in recorded
        if isinstance(n, dict) and isinstance(n.get("notice"), str) and isinstance(n.get("message"), str)
    )


def _images(recorded: object) -> tuple[tuple[str, str], ...]:
    """``images`` of a recorded row, as ``row_document`` wrote them (anything else: none)."""
    if not isinstance(recorded, list):
        return ()
    return tuple(
        (str(n["image"]), str(n["digest"]))
        for n in recorded
        if isinstance(n, dict) and isinstance(n.get("image"), str) and isinstance(n.get("digest"), str)
    )


def status_to_json(status: ReconcileStatus) -> dict[str, Any]:
    """The reconcile itself: reason, revisions, timing and the results worth reading
    (changes made and failures; per-VM state is in the ``vms`` rows)."""
    return {
        "reason": str(status.reason),
        "attempted_revision": status.attempted_revision,
        "applied_revision": status.applied_revision,
        "started_at": status.started_at,
        "duration_ms": status.duration_ms,
        "message": status.message,
        "results": [
            {"action": str(r.action), **{k: getattr(r, k) for k in _RESULT_FIELDS}}
            for r in status.results
            if worth_reading(r)
        ],
    }


def state_document(status: ReconcileStatus, previous: Mapping[str, Any]) -> dict[str, Any]:
    """The content of state.json after ``status``, given the previous content. Pure."""
    entry = status_to_json(status)
    state: dict[str, Any] = {
        "version": 1,
        "attempted_revision": status.attempted_revision,
        "applied_revision": status.applied_revision or previous.get("applied_revision", ""),
        # when the applied revision was applied: a resync of the same revision keeps it
        "applied_at": (
            status.started_at
            if status.applied_revision
            and (
                status.applied_revision != previous.get("applied_revision") or not previous.get("applied_at")
            )
            else previous.get("applied_at", 0)
        ),
        "reason": entry["reason"],
        "message": status.message,
        "last": entry,
        "vms": [row_document(v) for v in status.vms],
        "history": history(status, entry["reason"], previous.get("history", [])),
    }
    for key, value in (
        ("hosts", status.hosts),
        ("failed_commit", status.failed_commit),
        ("rollback", status.rollback),
    ):
        if value:
            state[key] = value
    return state


def history(status: ReconcileStatus, result: str, before: Sequence[Any]) -> list[Any]:
    """The last ``HISTORY`` outcomes, newest first. An outcome equal to the newest one
    (same revision, result, message) is folded into it (``count``, ``first_at``): a resync
    every 30 s that changes nothing must not push the last real change out in ten minutes."""
    entry: dict[str, Any] = {
        "revision": status.attempted_revision,
        "result": result,
        "duration_ms": status.duration_ms,
        "started_at": status.started_at,
        "applied": bool(status.applied_revision),
        **({"message": status.message[:500]} if status.message else {}),
    }
    top = before[0] if before else None
    same = ("revision", "result", "applied", "message")
    if top is not None and all(top.get(k) == entry.get(k) for k in same):
        entry["count"] = int(top.get("count", 1)) + 1
        entry["first_at"] = top.get("first_at", top.get("started_at", status.started_at))
        return [entry, *before[1:HISTORY]]
    return [entry, *before[: HISTORY - 1]]


def write_state(
    state_dir: str | os.PathLike[str], status: ReconcileStatus, previous: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Record a reconcile (last attempted and last applied revision kept apart, plus history)
    atomically. ``previous`` is the last document written, read from disk when not given."""
    state = state_document(status, read_state(state_dir) if previous is None else previous)
    write_state_document(state_dir, state)
    return state


def write_state_document(
    state_dir: str | os.PathLike[str],
    state: Mapping[str, Any],
    rows: Iterable[Mapping[str, Any]] | None = None,
) -> None:
    """Write a state document as it is, atomically (a retry after a failed write).
    ``rows``: its ``vms`` rows when ``state`` does not hold them, each made as it is
    written."""
    atomic_write(Path(state_dir) / STATE_FILE, state_text(state, rows).encode())


def state_text(state: Mapping[str, Any], rows: Iterable[Mapping[str, Any]] | None = None) -> str:
    """``state.json``'s text: ``json.dumps`` of the cleaned document, keys sorted. Its
    ``vms`` rows are cleaned and encoded one at a time, so a fleet's rows are never held
    twice more (a cleaned copy, then the text of all): the transient objects of a write
    would otherwise leave that much free room in a long-lived process's allocator."""
    # Compact, so json's C encoder writes it: indented output goes through the pure-Python
    # encoder, ~35 ms per reconcile with 1000 VMs (`jq . state.json` pretty-prints it).
    if rows is None and "vms" not in state:
        return _json(clean_json(state))
    vms = state["vms"] if rows is None else rows
    before = {k: v for k, v in state.items() if k < "vms"}
    after = {k: v for k, v in state.items() if k > "vms"}
    parts = [_json(clean_json(before))[1:-1], '"vms":[' + ",".join(_json(clean_json(r)) for r in vms) + "]"]
    parts.append(_json(clean_json(after))[1:-1])
    return "{" + ",".join(p for p in parts if p) + "}"


def _json(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def read_state(state_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The state document, or {} when it is missing, unreadable or wrong-shaped (read-only:
    the daemon sets a bad file aside, see ``state_store``)."""
    from reconciler.status.state import read_checked

    return read_checked(state_dir)[0]


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).replace(path)
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def live_rows(
    recorded: Sequence[Mapping[str, Any]],
    live: Sequence[LiveDomain] | None,
    host: str,
    include_unmanaged: bool = False,
    owner: str = "",
) -> tuple[VMStatus, ...]:
    """``reconciler status`` rows for one host: libvirt's view now, merged with the state file.

    ``recorded`` are the state file's VM rows (any host); ``live`` is None when the host
    could not be reached, then the recorded rows are shown with state ``unknown``.
    ``owner``: the daemon's (as its state file records it): another owner's domains are
    shown only with ``include_unmanaged`` (``--all``), like unmanaged ones.
    """
    mine = {str(v.get("name")): v for v in recorded if v.get("host") in (host, "", None)}
    if live is None:
        return tuple(
            VMStatus(
                key=VMKey.from_domain(name),
                host=host,
                run_strategy=str(v.get("run_strategy", "")),
                state="unknown",
                sync=Sync.UNKNOWN,
                revision=str(v.get("revision", "")),
                restart_required=bool(v.get("restart_required")),
                message="host unreachable",
            )
            for name, v in sorted(mine.items())
        )
    rows = []
    for d in sorted(live, key=lambda d: d.name):
        prev = mine.get(d.name, {})
        theirs = d.mark is None or (bool(owner) and bool(d.mark.owner) and d.mark.owner != owner)
        if theirs and not prev and not include_unmanaged:
            continue
        rows.append(_live_row(d, prev, host))
    seen = {d.name for d in live}
    for name, v in sorted(mine.items()):
        if name not in seen and v.get("state") != "deleted":  # never defined: still a VM in git
            rows.append(_absent_row(name, v, host))
    return tuple(rows)


def _live_row(d: LiveDomain, prev: Mapping[str, Any], host: str) -> VMStatus:
    """A live domain's row, with the daemon's last row of it (``prev``; {}: none)."""
    message = str(prev.get("message", ""))
    if d.mark is None:
        sync = Sync.recorded(prev.get("sync"), Sync.UNMANAGED)
    elif prev and str(prev.get("revision", "")) not in ("", d.mark.commit[:12]):
        # Changed since the daemon's last row: that row's verdict no longer holds.
        sync, message = Sync.UNKNOWN, f"now at {d.mark.commit[:12]}, not yet reconciled by the daemon"
    else:
        sync = Sync.recorded(prev.get("sync"), Sync.UNKNOWN)
    return VMStatus(
        key=d.key,
        host=host,
        run_strategy=d.mark.run_strategy if d.mark else str(prev.get("run_strategy", "")),
        state=str(d.state),
        sync=sync,
        revision=d.mark.commit[:12] if d.mark else str(prev.get("revision", "")),
        restart_required=bool(prev.get("restart_required")) and sync != Sync.UNKNOWN,
        message=message,
        applied_at=_float(prev.get("applied_at")),
        notes=_notes(prev.get("notes")) if sync != Sync.UNKNOWN else (),
        images=_images(prev.get("images")),
        **recorded_health(prev, running=d.state == PowerState.RUNNING),
    )


def _absent_row(name: str, v: Mapping[str, Any], host: str) -> VMStatus:
    """The row of a VM the daemon recorded (``v``) whose domain is not on the host."""
    return VMStatus(
        key=VMKey.from_domain(name),
        host=host,
        run_strategy=str(v.get("run_strategy", "")),
        state="absent",
        # never "Synced": a VM in git is meant to have a domain here
        sync=Sync.FAILED if v.get("sync") == Sync.FAILED else Sync.OUT_OF_SYNC,
        revision=str(v.get("revision", "")),
        restart_required=bool(v.get("restart_required")),
        message=str(v.get("message", ""))
        if v.get("sync") == Sync.FAILED or v.get("state") == "absent"
        else "not defined on this host (removed since the daemon's last reconcile?)",
        applied_at=_float(v.get("applied_at")),
    )


def _float(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def summary_lines(state: Mapping[str, Any]) -> list[str]:
    """The revision lines printed under the status table."""
    if not state:
        return []
    when = _float(state.get("applied_at"))
    at = lines_words.applied_at(
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)), age(time.time() - when)
    )
    attempted, applied = str(state.get("attempted_revision", "")), str(state.get("applied_revision", ""))
    lines = [lines_words.revisions(attempted, str(state.get("reason", "")), applied, at if when else "")]
    if state.get("message"):
        lines.append(lines_words.message(str(state["message"])))
    rollback = state.get("rollback") or {}
    if rollback.get("to_revision"):
        back = (
            str(rollback.get("from_revision", "")),
            str(rollback["to_revision"]),
            str(rollback.get("why", "")),
        )
        lines.append(lines_words.rollback(*back))
    for name, h in sorted((state.get("hosts") or {}).items()):
        lines += _host_lines(str(name), h)
    return lines


def _host_lines(name: str, h: Any) -> list[str]:
    """What ``summary_lines`` says of one host: held, failing, its rollout, VMs elsewhere."""
    lines = []
    held = h.get("held") if isinstance(h.get("held"), dict) else None
    if held:
        enforced, blocked = str(held.get("enforced", "")), str(held.get("blocked", ""))
        reason, message = str(held.get("reason", "")), str(held.get("message", ""))
        lines.append(lines_words.held(name, enforced, blocked, reason, message))
    elif h.get("reason") and h.get("reason") != "Succeeded":
        lines.append(
            lines_words.failing(name, str(h.get("uri", "")), str(h.get("reason")), str(h.get("message", "")))
        )
    rollout = h.get("rollout") if isinstance(h.get("rollout"), dict) else {}
    if rollout.get("health") not in (None, "Healthy"):  # paced restarts (daemon/rollouts.py)
        lines.append(
            lines_words.rollout(name, str(rollout.get("revision", "")), str(rollout.get("message", "")))
        )
    elsewhere = [e for e in h.get("other_hosts") or () if isinstance(e, dict)]
    if elsewhere:
        others = [(str(e.get("subject", "")), str(e.get("host") or "")) for e in elsewhere]
        lines.append(lines_words.other_hosts(name, others))
    return lines
