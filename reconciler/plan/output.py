"""A plan as data, for ``plan -o json|yaml`` and ``apply -o json|yaml``.

Input: a ``Plan``, its target and (after apply) the results. Output: a plain mapping
with camelCase keys (this module is their reference; the PR diff's JSON is documented
in docs/diff-json.md): the target, the policy, one entry per domain with its KubeVirt
fields in the user's units (and the libvirt paths) and, when apply defines it, the
sha256 of the very definition apply defines (``definitionSha256``), warnings (one line
per cause, as the text shows them), errors and the summary counts. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.compare import provenance
from reconciler.model.changes import Action, Change, Plan
from reconciler.wording import problems

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.config.targets import HostTarget
    from reconciler.model.results import ApplyResult

SCHEMA_VERSION = 1


def _kept(c: Change) -> tuple[str, ...]:
    return c.desired.passthrough if c.desired is not None else ()


def plan_document(
    plan: Plan, target: HostTarget, host: str, results: Sequence[ApplyResult] | None = None
) -> dict[str, Any]:
    by_key = {r.key: r for r in results or ()}
    p = target.policy
    changes = []
    counts: dict[str, int] = {}
    for c in plan.changes:
        counts[str(c.action)] = counts.get(str(c.action), 0) + 1
        entry: dict[str, Any] = {
            "subject": c.subject,
            "name": c.name,
            "action": str(c.action),
            "reason": c.reason,
            "restartRequired": c.restart_required,
            "drift": c.drift,
            "fields": [
                {
                    "field": u.field,
                    "old": u.old,
                    "new": u.new,
                    "class": str(u.change_class),
                    "libvirt": list(u.libvirt),
                }
                for u in provenance.explain(c.fields, passthrough=_kept(c))
            ],
        }
        if c.desired is not None and (c.desired.passthrough or c.desired.passthrough_omitted):
            entry["passthrough"] = {
                "kept": list(c.desired.passthrough),
                "omitted": list(c.desired.passthrough_omitted),
            }
        if c.definition is not None:
            entry["definitionSha256"] = c.definition.sha256
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
        "policy": {
            "prune": p.prune,
            "maxPrunePercent": p.max_prune_percent,
            "selfHeal": p.self_heal,
            "rollout": p.rollout.value,
            "instancetypeRevisions": target.config.instancetype_revisions,
            "owner": p.owner,
        },
        "changes": changes,
        "summary": {a.value: counts.get(a.value, 0) for a in Action},
        "warnings": list(problems.group(plan.warnings)),
        "errors": [problems.words(e) for e in plan.errors],
    }
    if plan.prune_refused:
        doc["pruneRefused"] = plan.prune_refused
    return doc
