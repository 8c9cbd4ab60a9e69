"""A PR diff as the reviewer reads it: text for a terminal, Markdown for a PR comment,
JSON for tools.

Input: a ``PRDiff`` (see ``prdiff.compare``). Output: text. Pure. Errors and warnings
are worded by ``wording.problems`` (warnings one line per cause); every name, path, ref
and message in the Markdown goes through ``wording.escape`` (``markdown`` for running
text, ``markdown_code`` for code spans), so a commit can add no heading, link, mention
or line of its own to the PR comment; every string of the JSON goes through
``escape.clean_json`` (printable, no credentials; a unified diff keeps its lines).
"""

from __future__ import annotations

import json
import re
import textwrap
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.compare import provenance
from reconciler.model.changes import ChangeClass
from reconciler.plan.output import field_change
from reconciler.prdiff.compare import (
    MARKDOWN_LIMIT,
    MARKDOWN_MAX_ERRORS,
    SCHEMA_VERSION,
    SHORT_SHA,
    TEXT_MAX_WARNINGS,
    PRDiff,
)
from reconciler.prdiff.entry import NO_DOMAIN_CHANGE, EntryKind, VMEntry
from reconciler.wording import escape, problems, rollout
from reconciler.wording import prdiff as words

if TYPE_CHECKING:
    from reconciler.prdiff.objects import RevisionChange, RevisionUse, SecretChange


def summary_line(d: PRDiff) -> str:
    by_class = [
        (_class_label(cls), d.count_class(cls))
        for cls in (ChangeClass.RESTART.value, ChangeClass.LIVE.value, NO_DOMAIN_CHANGE)
    ]
    return words.summary(
        d.count(EntryKind.CREATED),
        d.count(EntryKind.DELETED),
        d.count(EntryKind.CHANGED),
        by_class,
        d.unchanged,
        len(d.revisions),
        len(d.errors),
    )


def _ref(ref: str, commit: str) -> str:
    short = commit[:SHORT_SHA]
    return f"{ref} ({short})" if ref and ref != short and ref != commit else short


def _refs_line(d: PRDiff) -> str:
    where = f", entry {d.entry}" if d.entry else ""
    return f"base {_ref(d.base_ref, d.base_commit)} -> head {_ref(d.head_ref, d.head_commit)}{where}"


def policy_line(d: PRDiff) -> str:
    """The daemon's policy the diff assumed (``diff --config``), in one line; "" without."""
    p = d.policy
    if p is None:
        return ""
    prune = p.max_prune_percent if p.prune else None
    return words.policy_assumed(p.config, p.host, prune, d.rollout, d.follow, p.restart_windows)


def _value(v: str | None) -> str:
    return "(none)" if v is None else v


_SIGN = MappingProxyType({EntryKind.CREATED: "+", EntryKind.DELETED: "-", EntryKind.CHANGED: "~"})


def _class_label(change_class: str) -> str:
    return words.DEFINITION_UNCHANGED if change_class == NO_DOMAIN_CHANGE else change_class


def _title(e: VMEntry) -> str:
    cls = f", {_class_label(e.change_class)}" if e.change_class else ""
    where = f" on {e.host}" if e.host else ""
    return f"{_SIGN[e.kind]} {e.subject} ({e.kind}{cls}) [{e.run_strategy}]{where}"


def _revision_use(u: RevisionUse, r: RevisionChange) -> str:
    return words.revision_use(u.subject, u.pinned, r.base_hash[:SHORT_SHA])


class _Palette:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text


_KIND_COLOR = MappingProxyType({EntryKind.CREATED: "32", EntryKind.DELETED: "31", EntryKind.CHANGED: "33"})


def _diff_line_color(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "1"
    if line.startswith("@@"):
        return "36"
    if line.startswith("+"):
        return "32"
    if line.startswith("-"):
        return "31"
    return ""


def format_text(d: PRDiff, color: bool = False, verbose: bool = False) -> str:
    """Plain text for a terminal or a CI log; ``color`` adds ANSI colours, ``verbose`` the
    libvirt XML paths behind each field."""
    c = _Palette(color)
    out = [c("1", summary_line(d)), _refs_line(d)]
    if d.policy is not None:
        out.append(policy_line(d))
    if d.errors:
        out += [
            "",
            c("1;31", "errors in head (this revision would not be applied; hosts keep the last good state):"),
        ]
        out += [f"  {problems.words(e)}" for e in d.errors]
    if d.base_errors:
        out += ["", "errors in base (not fatal; VMs that failed at base are compared as new):"]
        out += [f"  {problems.words(e)}" for e in d.base_errors]
    for e in d.vms:
        out += ["", c(_KIND_COLOR[e.kind], _title(e)), f"    {e.consequence}"]
        out += [f"    + {a}" for a in e.attributes]
        out += [f"    note: {n}" for n in e.notes]
        for u in e.changes:
            out.append(f"    {u.change_class:<7}  {provenance.line(u, verbose)}")
        if not e.changes:
            for f in e.fields:
                out.append(f"    {f.change_class:<7}  {f.path}: {_value(f.old)} -> {_value(f.new)}")
        if e.spec_diff and e.kind == EntryKind.CHANGED:
            out += [f"    {c(_diff_line_color(line), line)}" for line in e.spec_diff.splitlines()]
    if d.batches:  # restarts paced: what a host would restart together, and what each batch waits for
        out += ["", rollout.batches(d.batches)]
    if d.revisions:
        out += ["", c("1", "instancetype / preference changes:")]
        out += textwrap.wrap(
            words.pinning_note(d.follow),
            100,
            initial_indent="  ",
            subsequent_indent="  ",
            break_on_hyphens=False,
        )
        for r in d.revisions:
            ns = f"{r.namespace}/" if r.namespace else ""
            out.append(f"  {r.kind} {ns}{r.name}: {r.base_hash[:SHORT_SHA]} -> {r.head_hash[:SHORT_SHA]}")
            out += [f"    {_revision_use(u, r)}" for u in r.vms]
            out += [f"    {c(_diff_line_color(line), line)}" for line in r.spec_diff.splitlines()]
    if d.secrets:
        out += ["", c("1", "Secrets (by name; their values are never shown):")]
        out += [f"  {_secret_line(x)}" for x in d.secrets]
    warnings = problems.group(d.warnings)
    if warnings:
        out += ["", "new warnings in head:"] + [f"  {w}" for w in warnings[:TEXT_MAX_WARNINGS]]
        if len(warnings) > TEXT_MAX_WARNINGS:
            out.append(f"  ... and {len(warnings) - TEXT_MAX_WARNINGS} more (--format json lists them all)")
    return "\n".join(out) + "\n"


def _secret_line(x: SecretChange) -> str:
    return words.secret(x.namespace, x.name, x.change, x.encrypted, x.vms)


_md_inline = escape.markdown_code
_md_text = escape.markdown


def _html_text(text: str) -> str:
    """Plain text inside an HTML block (``<summary>``): GitHub and GitLab read no Markdown
    there, so HTML's escapes alone (a backslash would show as it is: ``vm/prod\\_web``)."""
    import html  # markdown reports only

    return html.escape(text.replace("\n", " "), quote=True)


def _md_fence(body: str, lang: str) -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{body.rstrip(chr(10))}\n{fence}"


def _md_entry(e: VMEntry) -> str:
    cls = f" ({_class_label(e.change_class)})" if e.change_class else ""
    where = f" on {_html_text(e.host)}" if e.host else ""
    summary = (
        f"<summary><code>{_SIGN[e.kind]}</code> <b>{_html_text(e.subject)}</b>: "
        f"{e.kind}{cls}, {_html_text(e.run_strategy)}{where}</summary>"
    )
    parts = ["<details>", summary, "", _md_text(e.consequence)]
    parts += [f"\n_Note: {_md_text(n)}_" for n in e.notes]
    if e.changes:
        parts += ["", "| class | field | base | head | from |", "|---|---|---|---|---|"]
        parts += [
            f"| {u.change_class} | {_md_inline(u.field)} | {_md_inline(_value(u.old))} | "
            f"{_md_inline(_value(u.new)) if not provenance.content_only(u) else 'content changed'} | "
            f"{_md_text(u.origin)} |"
            for u in e.changes
        ]
    elif e.fields:
        parts += ["", "| class | field | base | head |", "|---|---|---|---|"]
        parts += [
            f"| {f.change_class} | {_md_inline(f.path)} | {_md_inline(_value(f.old))} | {_md_inline(_value(f.new))} |"
            for f in e.fields
        ]
    if e.spec_diff and e.kind != EntryKind.DELETED:
        label = "Expanded spec" if e.kind == EntryKind.CREATED else "Expanded spec, base vs head"
        parts += ["", f"{label}:", "", _md_fence(e.spec_diff, "diff")]
    parts += ["", "</details>", ""]
    return "\n".join(parts)


def _md_revision(r: RevisionChange) -> str:
    ns = f"{r.namespace}/" if r.namespace else ""
    summary = (
        f"<summary><code>~</code> <b>{_html_text(r.kind)} {_html_text(ns + r.name)}</b>: "
        f"<code>{r.base_hash[:SHORT_SHA]}</code> → <code>{r.head_hash[:SHORT_SHA]}</code>, "
        f"{words.reaches(len(r.vms))}</summary>"
    )
    parts = ["<details>", summary, ""]
    parts += [f"- {_md_text(_revision_use(u, r))}" for u in r.vms] or [f"- {words.REACHES_NO_VM_AT_HEAD}"]
    if r.spec_diff:
        parts += ["", _md_fence(r.spec_diff, "diff")]
    parts += ["", "</details>", ""]
    return "\n".join(parts)


def _md_refs(d: PRDiff) -> str:
    def ref(name: str, commit: str) -> str:
        short = commit[:SHORT_SHA]
        return (
            f"{_md_inline(name)} ({_md_inline(short)})"
            if name and name not in (short, commit)
            else _md_inline(short)
        )

    where = f", entry {_md_inline(d.entry)}" if d.entry else ""
    return f"base {ref(d.base_ref, d.base_commit)} → head {ref(d.head_ref, d.head_commit)}{where}"


def format_markdown(d: PRDiff, max_chars: int = MARKDOWN_LIMIT) -> str:
    """A pull-request comment: summary first, one collapsible block per VM, capped in size."""
    head = [f"**reconciler diff**: {summary_line(d)}", "", _md_refs(d), ""]
    if d.policy is not None:
        head += [_md_text(policy_line(d)), ""]
    if d.errors:
        head += [
            "**Errors in head**: this revision would not be applied; hosts keep the last good state.",
            "",
        ]
        head += [f"- {_md_inline(problems.words(e))}" for e in d.errors[:MARKDOWN_MAX_ERRORS]]
        if len(d.errors) > MARKDOWN_MAX_ERRORS:
            head.append(f"- … and {len(d.errors) - MARKDOWN_MAX_ERRORS} more (see `reconciler validate`)")
        head.append("")
    if d.base_errors:
        head += ["Errors in base (not fatal; VMs that failed at base are compared as new):", ""]
        head += [f"- {_md_inline(problems.words(e))}" for e in d.base_errors[:MARKDOWN_MAX_ERRORS]]
        if len(d.base_errors) > MARKDOWN_MAX_ERRORS:
            head.append(f"- … and {len(d.base_errors) - MARKDOWN_MAX_ERRORS} more")
        head.append("")
    if not d.vms and not d.revisions and not d.errors:
        head += ["No VM changes.", ""]
    if d.batches:
        head += [_md_text(rollout.batches(d.batches)), ""]
    return _md_capped("\n".join(head), _md_blocks(d), max_chars)


def _md_blocks(d: PRDiff) -> list[str]:
    """The comment's sections after its head: each VM's, the revisions', the Secrets', the warnings'."""
    blocks = [_md_entry(e) for e in d.vms]
    if d.revisions:
        blocks.append(
            f"#### Instancetype and preference changes\n\n{_md_text(words.pinning_note(d.follow))}\n"
        )
        blocks += [_md_revision(r) for r in d.revisions]
    if d.secrets:
        blocks.append(
            "#### Secrets\n\nBy name; their values are never shown.\n\n"
            + "\n".join(f"- {_md_text(_secret_line(x))}" for x in d.secrets)
            + "\n"
        )
    warnings = problems.group(d.warnings)
    if warnings:
        blocks.append(
            "<details><summary>New warnings in head</summary>\n\n"
            + "\n".join(f"- {_md_text(w)}" for w in warnings[:MARKDOWN_MAX_ERRORS])
            + (
                f"\n- … and {len(warnings) - MARKDOWN_MAX_ERRORS} more"
                if len(warnings) > MARKDOWN_MAX_ERRORS
                else ""
            )
            + "\n\n</details>\n"
        )
    return blocks


def _md_capped(text: str, blocks: list[str], max_chars: int) -> str:
    """``text`` and as many ``blocks`` as fit in ``max_chars``, with a note of those cut."""
    note_room = 300
    shown = 0
    for block in blocks:
        if len(text) + len(block) + 1 > max_chars - note_room:
            break
        text += "\n" + block
        shown += 1
    if shown < len(blocks):
        text += (
            f"\n_Output cut at {max_chars} characters: {len(blocks) - shown} of {len(blocks)} sections "
            "not shown. Run `reconciler diff` locally or read the full report in the CI job's artifacts._\n"
        )
    return text


JSON_LINES = frozenset({"specDiff"})  # multi-line values: cleaned line by line


def to_json_obj(d: PRDiff) -> dict[str, Any]:
    """The documented JSON form (``docs/diff-json.md``); keys are stable. Every string
    (names, paths, refs, messages, diffs of a commit) goes through ``escape.clean_json``:
    printable, no credentials; a ``specDiff`` keeps its lines."""
    doc: dict[str, Any] = escape.clean_json(_json_obj(d), JSON_LINES)
    return doc


def _json_obj(d: PRDiff) -> dict[str, Any]:
    return {
        "schemaVersion": SCHEMA_VERSION,
        "base": {"ref": d.base_ref, "commit": d.base_commit},
        "head": {"ref": d.head_ref, "commit": d.head_commit},
        "entry": d.entry,
        "exitCode": d.exit_code,
        "summary": {
            "created": d.count(EntryKind.CREATED),
            "deleted": d.count(EntryKind.DELETED),
            "changed": d.count(EntryKind.CHANGED),
            "changedByClass": {
                "restart": d.count_class(ChangeClass.RESTART.value),
                "live": d.count_class(ChangeClass.LIVE.value),
                "none": d.count_class(NO_DOMAIN_CHANGE),
            },
            "unchanged": d.unchanged,
            "revisionChanges": len(d.revisions),
            "errors": len(d.errors),
        },
        "settings": _settings_json(d),
        "vms": [_vm_json(e) for e in d.vms],
        "revisionChanges": [_revision_json(r) for r in d.revisions],
        "errors": [problems.error_json(e) for e in d.errors],
        "baseErrors": [problems.error_json(e) for e in d.base_errors],
        "warnings": list(problems.group(d.warnings)),
    } | (
        {  # only when the merge changes a Secret (older reports stay as they were)
            "secrets": [
                {
                    "namespace": x.namespace or "default",
                    "name": x.name,
                    "change": x.change,
                    "encrypted": x.encrypted,
                    "vms": list(x.vms),
                }
                for x in d.secrets
            ]
        }
        if d.secrets
        else {}
    )


def _settings_json(d: PRDiff) -> dict[str, Any]:
    out: dict[str, Any] = {"instancetypeRevisions": "follow" if d.follow else "pin", "rollout": d.rollout}
    if d.policy is not None:  # diff --config: the daemon's policy assumed
        p = d.policy
        out |= {
            "config": p.config,
            "host": p.host,
            "prune": p.prune,
            "maxPrunePercent": p.max_prune_percent,
            "restartWindows": list(p.restart_windows),
        }
    return out


def _vm_json(e: VMEntry) -> dict[str, Any]:
    return {
        "subject": e.subject,
        "name": e.name,
        "change": e.kind.value,
        "changeClass": e.change_class or None,
        "runStrategy": e.run_strategy,
        "host": e.host or None,
        "sourcePath": e.source_path,
        "consequence": e.consequence,
        "plan": {"action": e.action, "reason": e.reason},
        "changes": [field_change(u) for u in e.changes],
        "fields": [
            {"path": f.path, "class": f.change_class.value, "before": f.old, "after": f.new} for f in e.fields
        ],
        "attributes": list(e.attributes),
        "specDiff": e.spec_diff,
        "notes": list(e.notes),
    }


def _revision_json(r: RevisionChange) -> dict[str, Any]:
    return {
        "role": r.role,
        "kind": r.kind,
        "namespace": r.namespace or None,
        "name": r.name,
        "baseHash": r.base_hash,
        "headHash": r.head_hash,
        "vms": [{"subject": u.subject, "pinned": u.pinned} for u in r.vms],
        "specDiff": r.spec_diff,
    }


def format_json(d: PRDiff) -> str:
    return json.dumps(to_json_obj(d), indent=2, ensure_ascii=False) + "\n"
