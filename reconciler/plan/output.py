"""A plan as data, for ``plan -o json|yaml`` and ``apply -o json|yaml``.

Input: a ``Plan``, its target and (after apply) the results. Output: a plain mapping
with camelCase keys, checked by ``reconciler/data/schemas/plan.schema.json`` (this
module is their reference; the PR diff's JSON, docs/diff-json.md, names a field change
the same way): the target, the policy, one entry per domain with its KubeVirt fields in
the user's units (and the libvirt paths), a create's attributes and, when apply defines
it, the sha256 of the very definition apply defines (``definitionSha256``), the VMs on
other hosts, warnings (one line per cause, as the text shows them), errors (objects, as
in the PR diff) and the summary counts. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.compare import provenance
from reconciler.model.changes import Action, Change, Plan
from reconciler.wording import problems, refusal, rollout
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model.results import ApplyResult
    from reconciler.settings.targets import HostTarget

# 2: each change's fields as the PR diff names them ({field, class, before, after, origin,
#    libvirtPaths} under "changes"), a create's "attributes", errors as objects, "otherHosts",
#    a live operation's value in its unit ("liveOps"), and the wrapper carries it too.
SCHEMA_VERSION = 2


def plans_document(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What ``plan -o json`` and ``apply -o json`` print: one document per host."""
    return {"schemaVersion": SCHEMA_VERSION, "plans": list(docs)}


def field_change(u: provenance.UserChange) -> dict[str, Any]:
    """One field change, as ``plan``, ``apply`` and the PR diff print it (JSON)."""
    return {
        "field": u.field,
        "class": str(u.change_class),
        "before": u.old,
        "after": u.new,
        "origin": u.origin,
        "libvirtPaths": list(u.libvirt),
    }


def _kept(c: Change) -> tuple[str, ...]:
    return c.desired.passthrough if c.desired is not None else ()


def plan_document(
    plan: Plan, target: HostTarget, host: str, results: Sequence[ApplyResult] | None = None
) -> dict[str, Any]:
    by_key = {r.key: r for r in results or ()}
    changes = []
    counts: dict[str, int] = {}
    for c in plan.changes:
        counts[str(c.action)] = counts.get(str(c.action), 0) + 1
        entry = _change_entry(c)
        r = by_key.get(c.key)
        if results is not None and r is not None:
            entry["result"] = {"ok": r.ok, "message": r.message}
        changes.append(entry)
    doc: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "host": host,
        "uri": target.uri,
        "revision": plan.revision,
        "applied": results is not None,
        "policy": _policy(target),
        "changes": changes,
        "summary": {a.value: counts.get(a.value, 0) for a in Action},
        "otherHosts": [
            {"subject": k.subject, "name": k.domain, "host": h or None} for k, h in plan.other_hosts
        ],
        "warnings": list(problems.group(plan.warnings)),
        "errors": [problems.error_json(e) for e in plan.errors],
    }
    if plan.prune_refused is not None:
        doc["pruneRefused"] = refusal.said(plan.prune_refused)
    if plan.pacing is not None and (plan.pacing.batches or plan.pacing.halted):  # paced restarts
        doc["rollout"] = {
            "health": str(plan.pacing.health),
            "batches": [
                {"vms": [k.subject for k in b.keys], "waitsFor": b.waits_for} for b in plan.pacing.batches
            ],
            "halted": rollout.halt(plan.pacing.halted) if plan.pacing.halted else None,
        }
    return doc


def _change_entry(c: Change) -> dict[str, Any]:
    """One domain's change: its action and why, its fields in the user's terms, live
    operations, a create's attributes, passthrough, images and the definition's sha256."""
    typed = c.desired is not None and c.desired.sized_by_instancetype
    entry: dict[str, Any] = {
        "subject": c.subject,
        "name": c.name,
        "action": str(c.action),
        "reason": said(c),
        "restartRequired": c.restart_required,
        "drift": c.drift,
        "changes": [
            field_change(u) for u in provenance.explain(c.fields, passthrough=_kept(c), instancetype=typed)
        ],
        "liveOps": [str(op) for op in c.live_ops],
    }
    if c.action == Action.CREATE and c.desired is not None:
        entry["attributes"] = provenance.create_attributes(c.desired)
    if c.desired is not None and (c.desired.passthrough or c.desired.passthrough_omitted):
        entry["passthrough"] = {
            "kept": list(c.desired.passthrough),
            "omitted": list(c.desired.passthrough_omitted),
        }
    if c.desired is not None and any(v.image for v in c.desired.volumes):
        entry["images"] = [{"image": v.image, "digest": v.digest} for v in c.desired.volumes if v.image]
    if c.definition is not None:
        entry["definitionSha256"] = c.definition.sha256
    return entry


def _policy(target: HostTarget) -> dict[str, Any]:
    """The policy the plan was made with."""
    p = target.policy
    return {
        "prune": p.prune,
        "maxPrunePercent": p.max_prune_percent,
        "selfHeal": p.self_heal,
        "rollout": p.rollout.value,
        "instancetypeRevisions": target.config.instancetype_revisions,
        "owner": p.owner,
        "restartNow": p.restart_now,
        "rollForward": sorted(f"vm/{n}" for n in p.roll_forward),
    }
