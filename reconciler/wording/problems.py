"""Problems in words: the one place a ``Problem`` record becomes text.

Input: ``Problem`` records (``model.problems``) and failed ``ApplyResult``s. Output:
the lines the CLI, the PR report (text, Markdown, JSON), status, the daemon's log and
``state.json`` print. Pure. No stage reads these words back: what a caller needs to
know (the file, the VM, the cause) it takes from the record.

- ``words``: one problem as a line, ``path:line:col: vm/web: field: message``, each
  part only when the record has it; text from the commit made printable, every overlong
  word (a committed value quoted whole) cut by ``escape.shortened``;
- ``located_message`` / ``error_json``: the same without its location, and the JSON
  object of ``docs/diff-json.md`` (path, line, column, message, text);
- ``group``: warnings once, one line per distinct cause: a VM's warning without a
  location groups with the same cause of other VMs as
  ``<cause> (1000 VMs: vm/a, vm/b, vm/c, ...)``; one VM's warning stays as it was;
- ``headline``, ``first_cause``, ``joined``: an outcome's first error on one line (what
  notifications and commit statuses show, taken where the error is made, never cut out of
  a message again) and its one-line message;
- ``anonymous`` and ``summarize``: failures of an apply grouped by cause, one line per
  cause with a count (``<cause> (116 VMs: vm/a, vm/b, vm/c and 113 more)``), for a
  reconcile's one-line message. When a host goes away in the middle of an apply every
  remaining change fails the same way; listing each of them made a 10 KB line nobody
  reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.wording.escape import printable, shortened

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from reconciler.model import Problem, VMKey
    from reconciler.model.results import ApplyResult

FIRST_NAMES = 3  # VMs named in a grouped warning
MAX_CAUSES = 5  # causes named in a failure summary
MAX_NAMES = 3  # VMs named per cause of a failure summary
MAX_CAUSE_CHARS = 300
THIS_VM = "<vm>"  # where a failure's own VM stood, in its cause


def location(p: Problem) -> str:
    """``path:line:col``, ``path:line`` or ``path``; ``""`` when the record has no file."""
    if not p.path:
        return ""
    path = printable(shortened(p.path))
    if p.line and p.column:
        return f"{path}:{p.line}:{p.column}"
    if p.line:
        return f"{path}:{p.line}"
    return path


def located_message(p: Problem) -> str:
    """The line without its location: ``vm/web: field: message``."""
    return printable(shortened(": ".join(part for part in (p.who, p.field, p.message) if part)))


def words(p: Problem) -> str:
    """The whole line as printed: ``path:line:col: vm/web: field: message``."""
    where = location(p)
    rest = located_message(p)
    return f"{where}: {rest}" if where else rest


def error_json(p: Problem) -> dict[str, Any]:
    """An error as ``docs/diff-json.md`` documents it (``errors[]``, ``baseErrors[]``)."""
    return {
        "path": p.path or None,
        "line": p.line or None,
        "column": p.column or None,
        "message": located_message(p),
        "text": words(p),
    }


def group(problems: Iterable[Problem], first: int = FIRST_NAMES) -> tuple[str, ...]:
    """Warnings once, one line per distinct cause, in order of first appearance."""
    causes: dict[str, list[str]] = {}  # cause (or a whole line without a VM) -> subjects
    for p in problems:
        if p.vm is None or p.path:
            causes.setdefault(words(p), [])
            continue
        cause = printable(shortened(": ".join(part for part in (p.field, p.message) if part)))
        subjects = causes.setdefault(cause, [])
        if p.vm.subject not in subjects[-1:]:
            subjects.append(p.vm.subject)
    out: list[str] = []
    for cause, subjects in causes.items():
        names = list(dict.fromkeys(subjects))
        if not names:
            out.append(cause)
        elif len(names) == 1:
            out.append(f"{names[0]}: {cause}")
        else:
            shown = ", ".join(names[:first]) + (", ..." if len(names) > first else "")
            out.append(f"{cause} ({len(names)} VMs: {shown})")
    return tuple(out)


def anonymous(p: Problem, vm: VMKey) -> str:
    """``p`` in words with ``vm``'s own subject and name taken out (``<vm>``): the same
    text for every VM that failed alike. The subject is a part of the record; the name
    inside the message (libvirt's ``domain 'web-1' is not running``, an OS error) is
    replaced where it stands as a word of its own."""
    who = THIS_VM if p.vm == vm else p.who
    message = _without(_without(p.message, vm.subject), vm.domain)
    return ": ".join(part for part in (location(p), who, p.field, message) if part)


def _without(text: str, name: str) -> str:
    """``text`` with every whole-word ``name`` (not inside a longer name: no letter,
    digit, ``_``, ``.`` or ``-`` either side) replaced by ``<vm>``."""
    if not name or name not in text:
        return text
    out: list[str] = []
    start = 0  # text[start:] is still to copy
    at = text.find(name)
    while at >= 0:
        end = at + len(name)
        if _in_name(text, at - 1) or _in_name(text, end):
            at = text.find(name, at + 1)
            continue
        out += [text[start:at], THIS_VM]
        start = end
        at = text.find(name, end)
    out.append(text[start:])
    return "".join(out)


def _in_name(text: str, i: int) -> bool:
    if i < 0 or i >= len(text):
        return False
    ch = text[i]
    return ch.isalnum() or ch in "_.-"


def summarize(failed: Sequence[ApplyResult]) -> str:
    """``"<cause> (1 VM: vm/a)"``, or ``"<cause> (116 VMs: vm/a, vm/b, vm/c and 113 more)"``, per
    cause; the failures' own words when each has a cause of its own and they are few."""
    return "; ".join(_causes(failed))


def first_cause(failed: Sequence[ApplyResult]) -> str:
    """The first cause ``summarize`` names, on one line (``""``: nothing failed)."""
    causes = _causes(failed)
    return headline(causes[0]) if causes else ""


def headline(text: str) -> str:
    """The first line of a message (an error's whole text may run over several)."""
    return text.split("\n", 1)[0].strip()


def joined(messages: Iterable[str]) -> str:
    """Messages of one outcome as its one line: ``first; second``, the empty ones left out."""
    return "; ".join(m for m in messages if m)


def _causes(failed: Sequence[ApplyResult]) -> list[str]:
    if not failed:
        return []
    groups: dict[str, list[str]] = {}
    for r in failed:
        cause = r.problem.message if r.problem is not None else r.message
        groups.setdefault(cause[:MAX_CAUSE_CHARS], []).append(r.subject)
    if len(groups) == len(failed) and len(failed) <= MAX_CAUSES:
        return [r.message[:MAX_CAUSE_CHARS] for r in failed]
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    parts = []
    for cause, subjects in ordered[:MAX_CAUSES]:
        shown = ", ".join(subjects[:MAX_NAMES])
        more = f" and {len(subjects) - MAX_NAMES} more" if len(subjects) > MAX_NAMES else ""
        noun = "VM" if len(subjects) == 1 else "VMs"
        parts.append(f"{cause} ({len(subjects)} {noun}: {shown}{more})")
    rest = ordered[MAX_CAUSES:]
    if rest:
        parts.append(f"{sum(len(s) for _, s in rest)} more VMs failed for {len(rest)} other causes")
    return parts
