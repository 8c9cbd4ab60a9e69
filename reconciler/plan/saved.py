"""A saved plan: planned revisions as a versioned JSON file (``plan --out FILE``).

Input: ``PlannedRevision`` values (``dump``), or the bytes of such a file (``load``).
Output: the file's text, or the planned revisions again, each with ``Change.live``
left empty (the caller fills it in from the host, read again, once the fingerprints
match) and every ``VolumeSpec.secrets`` empty, with the names of the Secrets each ISO
needs (``secret_refs``), and the entry as the file holds it (``Saved.doc``, which
``plan.verify`` compares with the plan made again). The file is read as untrusted:
its nesting bounded before it is parsed, no duplicate key, ``NaN`` or ``Infinity``,
checked against ``data/schemas/saved-plan.schema.json``, no negative number, no
control character in a string, no host or domain twice. Pure: no file is opened here.

What the file holds: per host, its URI and name, the host config and the plan policy
as resolved, the revision, entry and repository, the fingerprint of every live domain
a change touches, and the plan: each change with its rendered domain (the volumes it
provisions), its final definition (the XML apply defines: the rendered XML with the
device addresses of the live definition and the ownership mark) and its live
operations, its warnings as records. A record's own VM (a change's, a domain's
``key``) is written as its ``subject`` and ``name``, any other VM (a problem's) as its
domain name. What it never holds: a Secret's value (the ISOs' payloads name Secrets
and their digests only; ``SecretData`` is written as its names), nor a live domain's
XML (it may carry a console password; a definition takes only its devices' addresses
and the controllers and balloon libvirt added): each domain is read again when the
plan is applied.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import re
import types
import typing
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.errors import ReconcilerError
from reconciler.model import RenderedDomain, VMKey
from reconciler.model.changes import Change, Plan
from reconciler.model.secretdata import NO_SECRETS, SecretData
from reconciler.plan.planned import Fingerprint, PlannedRevision
from reconciler.records import dataclass
from reconciler.settings.host import HostConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.escape import printable

if TYPE_CHECKING:
    from collections.abc import Sequence

# 2: each change carries the final definition apply defines; 3: its reasons as records;
# 4: a reason's note and plan error as records of their own (``Note``, ``Problem``), no text;
# 5: the prune guard's refusal as a record (``PruneRefusal``: the plan's, a held domain's reason)
SCHEMA_VERSION = 5
KIND = "ReconcilerPlan"
SCHEMA_FILE = "data/schemas/saved-plan.schema.json"
MAX_DEPTH = 64  # nested lists and objects (a saved plan needs about 12)
# A JSON string (skipped whole) or a bracket: the nesting is counted without parsing.
_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')

# Left out of the file: the live domain (read again at apply, by fingerprint) and the
# plan's failed VMs (a plan with errors is not saved).
_LEFT_OUT: Mapping[type, frozenset[str]] = MappingProxyType(
    {Change: frozenset({"live"}), Plan: frozenset({"failed"})}
)
# The rendered domain's XML, held as text or packed (``RenderedDomain.xml_data``): the
# file holds it as text, under "xml".
_XML = (RenderedDomain, "xml_data")
# Names the dataclasses' annotations use that their modules import for type checking only.
_NAMES: Mapping[str, Any] = MappingProxyType(
    {
        "Mapping": Mapping,
        "HostConfig": HostConfig,
        "PlanPolicy": PlanPolicy,
        "Fingerprint": Fingerprint,
        "VMKey": VMKey,
    }
)


class SavedPlanError(ReconcilerError):
    """A file that is no saved plan of this version, or one that cannot be applied."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _encode(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, SecretData):
        return list(value.names())  # the names alone: values never leave the process
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        skip = _LEFT_OUT.get(type(value), frozenset())
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            if f.name in skip or not f.init:  # a field derived from the others is not written
                continue
            if isinstance(value, RenderedDomain) and f.name == _XML[1]:
                out["xml"] = value.xml
                continue
            field = getattr(value, f.name)
            if f.name == "key" and isinstance(field, VMKey):  # a record's own VM: its subject and name
                out.update({"subject": field.subject, "name": field.domain})
            else:
                out[_camel(f.name)] = _encode(field)
        return out
    if isinstance(value, VMKey):
        return value.domain
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in sorted(value.items())}
    if isinstance(value, (frozenset, set)):
        return sorted(_encode(v) for v in value)
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    raise TypeError(f"cannot save a {type(value).__name__}")


def encoded(value: Any) -> Any:
    """``value`` as a saved plan writes it, as JSON values (``json.loads`` of the text):
    what a file's content is compared with (``plan.verify``)."""
    return json.loads(json.dumps(_encode(value), ensure_ascii=False))


def _fail(where: str, what: str) -> SavedPlanError:
    return SavedPlanError(f"{where}: {what}")


class _Reader:
    """Reads the records of one file back, each checked against its type."""

    def __init__(self) -> None:
        self.hints: dict[type, dict[str, Any]] = {}  # per file: each record type's field types

    def value(self, tp: Any, data: Any, where: str) -> Any:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if tp is Any:
            return data
        if origin in (typing.Union, types.UnionType):
            if data is None and type(None) in args:
                return None
            (inner,) = [a for a in args if a is not type(None)]
            return self.value(inner, data, where)
        if tp is SecretData:
            return NO_SECRETS  # filled in from the revision where an ISO needs them (``Saved.secrets``)
        if tp is VMKey:  # a VM named by its domain name
            return VMKey.from_domain(self.value(str, data, where))

        if tp is bytes:
            if not isinstance(data, str):
                raise _fail(where, "expected base64 text")
            return base64.b64decode(data, validate=True)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            try:
                return tp(data)
            except ValueError:
                raise _fail(where, f"{data!r} is not one of {', '.join(str(m.value) for m in tp)}") from None
        if tp in (str, bool):
            if not isinstance(data, tp):
                raise _fail(where, f"expected a {tp.__name__}")
            return data
        if tp in (int, float):
            if (
                isinstance(data, bool)
                or not isinstance(data, (int, float))
                or (tp is int and isinstance(data, float))
            ):
                raise _fail(where, f"expected a number ({tp.__name__})")
            if data < 0:
                raise _fail(where, f"{data} is negative: no count, size or duration of a plan is")
            return tp(data)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self.record(tp, data, where)
        if origin in (tuple, frozenset) and not isinstance(data, list):
            raise _fail(where, "expected a list")
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(self.value(args[0], x, f"{where}[{i}]") for i, x in enumerate(data))
        if origin is tuple:
            if len(args) != len(data):
                raise _fail(where, f"expected {len(args)} items")
            return tuple(
                self.value(a, x, f"{where}[{i}]") for i, (a, x) in enumerate(zip(args, data, strict=True))
            )
        if origin is frozenset:
            return frozenset(self.value(args[0], x, f"{where}[{i}]") for i, x in enumerate(data))
        if origin in (Mapping, dict):
            if not isinstance(data, dict):
                raise _fail(where, "expected a mapping")
            return {k: self.value(args[1], v, f"{where}.{k}") for k, v in data.items()}
        raise _fail(where, f"cannot read a {tp!r}")  # a type this format does not carry

    def record(self, tp: type, data: Any, where: str) -> Any:
        if not isinstance(data, dict):
            raise _fail(where, "expected a mapping")
        hints = self.hints.get(tp)
        if hints is None:
            hints = self.hints[tp] = typing.get_type_hints(tp, localns=dict(_NAMES))
            if tp is _XML[0]:
                hints[_XML[1]] = str
        names = {_camel(f.name): f.name for f in dataclasses.fields(tp) if f.init and (tp, f.name) != _XML}
        if tp is _XML[0]:
            names["xml"] = _XML[1]
        data = dict(data)
        if hints.get("key") is VMKey:  # the record's VM: "subject" and "name" in the file
            name, subject = (
                self.value(str, data.pop("name", None), f"{where}.name"),
                data.pop("subject", None),
            )
            key = VMKey.from_domain(name)
            if subject != key.subject:
                raise _fail(f"{where}.subject", f"expected {key.subject!r}")
            data["key"] = name
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise _fail(where, f"unknown key {unknown[0]!r}")
        kw = {names[k]: self.value(hints[names[k]], v, f"{where}.{k}") for k, v in data.items()}
        try:
            return tp(**kw)
        except TypeError as err:
            raise _fail(where, str(err)) from None


@dataclass(frozen=True, slots=True)
class Saved:
    """One host's planned revision as read from a file."""

    planned: PlannedRevision  # ``Change.live`` empty: read the host again
    # (domain, volume path) -> the build's Secrets its ISO needs: their values are not
    # in the file; they come from the revision, built again, when the plan is applied.
    secrets: Mapping[tuple[str, str], tuple[str, ...]]
    doc: Mapping[str, Any] = dataclasses.field(
        default_factory=dict
    )  # the entry as the file holds it (``verify``)


def dump(planned: Sequence[PlannedRevision]) -> str:
    """The file's text: one entry per host, in the order planned."""
    plans = []
    for p in planned:
        entry = _encode(p)
        entry["plan"] = entry.pop("plan")  # what it was computed against first, then the plan
        plans.append(entry)
    doc = {"schemaVersion": SCHEMA_VERSION, "kind": KIND, "plans": plans}
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def load(data: bytes, name: str) -> tuple[Saved, ...]:
    """The planned revisions of a saved plan; ``SavedPlanError`` names what is wrong.

    The file is read as untrusted: nested at most ``MAX_DEPTH`` levels (checked before
    parsing, so no nesting is a RecursionError), no duplicate key, no ``NaN`` or
    ``Infinity``, checked against ``data/schemas/saved-plan.schema.json``, no negative
    number, and no host or domain listed twice."""
    doc = _parsed(data, name)
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise _fail(name, "not a saved plan (written by `reconciler plan --out FILE`)")
    version = doc.get("schemaVersion")
    if version != SCHEMA_VERSION:
        raise _fail(
            name,
            f"a saved plan of schema version {version!r}; this reconciler reads version "
            f"{SCHEMA_VERSION}: plan again with it",
        )
    plans = doc.get("plans")
    if not isinstance(plans, list):
        raise _fail(name, "plans: expected a list")
    _check_schema(doc, name)
    _check_printable(doc, name)
    reader = _Reader()
    out: list[Saved] = []
    for i, p in enumerate(plans):
        where = f"{name}: plans[{i}]"
        planned = reader.record(PlannedRevision, p, where)
        _check_unique(planned, out, where)
        out.append(Saved(planned, _secret_refs(planned, p), MappingProxyType(p)))
    return tuple(out)


def _parsed(data: bytes, name: str) -> Any:
    """The JSON document of ``data``, nested at most ``MAX_DEPTH`` levels, with no
    duplicate key and no ``NaN``/``Infinity``."""
    try:
        text = data.decode("utf-8")
    except UnicodeError as err:
        raise _fail(name, f"not a saved plan (not UTF-8: {err})") from None
    depth = 0
    for m in _NESTING.finditer(text):
        token = m.group()
        if token in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                raise _fail(name, f"not a saved plan (nested more than {MAX_DEPTH} levels deep)")
        elif token in ("]", "}"):
            depth -= 1
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise _fail(name, f"not a saved plan (not JSON: {err})") from None
    except ValueError as err:
        raise _fail(name, f"not a saved plan ({err})") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} given twice in one object")
        out[k] = v
    return out


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is no number of a saved plan")


def _check_schema(doc: Any, name: str) -> None:
    from reconciler.catalog.schema import first_problem

    found = first_problem(doc, SCHEMA_FILE)
    if found is not None:
        path, message = found
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
        where = printable(_short(at.lstrip(".") or "the document"))
        raise _fail(f"{name}: {where}", f"{printable(_short(message))} ({SCHEMA_FILE})")


def _check_printable(doc: Any, name: str) -> None:
    """No string of the file holds a control or format character (but the line breaks
    and tabs of XML): what ``show`` and ``apply`` print of it can move no cursor."""
    todo = [doc]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            todo.extend(node.keys())
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
        elif isinstance(node, str) and not node.isprintable():
            bad = next((ch for ch in node if not ch.isprintable() and ch not in "\n\t"), None)
            if bad is not None:
                raise _fail(
                    name, f"a string holds the control character {bad!r}: not a plan `plan --out` writes"
                )


def _short(text: str, most: int = 160) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _check_unique(planned: PlannedRevision, before: Sequence[Saved], where: str) -> None:
    if any(s.planned.uri == planned.uri for s in before):
        raise _fail(where, f"host {planned.uri} is planned twice")
    seen: set[str] = set()
    for c in planned.plan.changes:
        if c.name in seen:
            raise _fail(f"{where}.plan.changes", f"{c.subject} is listed twice")
        seen.add(c.name)


def _secret_refs(planned: PlannedRevision, doc: dict[str, Any]) -> dict[tuple[str, str], tuple[str, ...]]:
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for c, raw in zip(planned.plan.changes, doc["plan"]["changes"], strict=True):
        if c.desired is None:
            continue
        for v, rv in zip(c.desired.volumes, raw["desired"].get("volumes", ()), strict=True):
            if rv.get("secrets"):
                out[(c.name, v.path)] = tuple(str(n) for n in rv["secrets"])
    return out


def with_secrets(saved: Saved, rendered: Mapping[str, RenderedDomain]) -> PlannedRevision:
    """The saved plan with the build's Secret values its ISOs need, taken from the same
    revision rendered again (``rendered``, by domain name). Each ISO's payload (which
    names every Secret with its digest) must be the one planned, or ``SavedPlanError``."""
    planned = saved.planned
    changes = []
    for c in planned.plan.changes:
        if c.desired is not None and any((c.name, v.path) in saved.secrets for v in c.desired.volumes):
            again = {v.path: v for v in rendered[c.name].volumes} if c.name in rendered else {}
            volumes = []
            for v in c.desired.volumes:
                names = saved.secrets.get((c.name, v.path))
                if names is None:
                    volumes.append(v)
                    continue
                w = again.get(v.path)
                if w is None or w.content != v.content or w.secrets.names() != names:
                    raise SavedPlanError(
                        f"{c.subject}: volume {v.path} needs the values of Secret(s) {', '.join(names)}, "
                        f"and revision {planned.revision[:12]} no longer renders it as planned: plan again"
                    )
                volumes.append(dataclasses.replace(v, secrets=w.secrets))
            c = dataclasses.replace(c, desired=dataclasses.replace(c.desired, volumes=tuple(volumes)))
        changes.append(c)
    return dataclasses.replace(planned, plan=dataclasses.replace(planned.plan, changes=tuple(changes)))
