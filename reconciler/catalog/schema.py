"""KubeVirt objects checked against KubeVirt's published OpenAPI schema, strictly.

Input: a parsed object of a kind KubeVirt serves (VirtualMachine, the instancetype
and preference kinds, VirtualMachineInstancePreset, VirtualMachinePool). Output:
nothing, or the problems found, each with the field path it concerns: an unknown
field (with the closest known name), a value of the wrong type, and (marked as for
KubeVirt only, a warning here) a missing field KubeVirt requires. Strict as ``kubectl apply --validate=strict`` is on a cluster: the schema is
KubeVirt's own (``reconciler/data/kubevirt/swagger.json``, pinned with its license; the
definitions read are derived from it, ``schema_data.py``), read with every object closed
to fields it does not declare. A ``null`` value counts as an absent field, as the API server reads it. Pure.

The first pass that tells a clean object (nearly all of them) is compiled from the
schema when this module is imported; jsonschema's validator, which words the problems
of an object the first pass flags, is made on first need and kept by the caller
(``Validators``, part of the catalog's cache).
"""

from __future__ import annotations

import difflib
import itertools
import json
from collections.abc import Callable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.catalog import schema_data
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

DEFINITIONS = schema_data.DEFINITIONS  # kind -> the schema definition of its objects
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"


@dataclass(frozen=True, slots=True)
class Problem:
    path: tuple[str | int, ...]  # the field concerned (an unknown field: its own path)
    message: str
    # A field KubeVirt requires but a libvirt host does without (``domain.devices``): the
    # object runs here, and a warning says what KubeVirt would refuse.
    only_kubevirt: bool = False


def _read_definitions() -> dict[str, Any]:
    """KubeVirt's definitions as this project reads them, not yet closed (a fresh copy)."""
    defs = schema_data.read()  # those the kinds reach, from the pinned schema (schema_data.py)
    if _INT_OR_STRING in defs:
        defs[_INT_OR_STRING] = {"type": ["string", "integer"]}
    # The design notes' ``spec.restartPolicy`` (Always / OnFailure / Never), this project's
    # one addition to a VirtualMachine (docs/mapping.md): read, never refused.
    defs["v1.VirtualMachineSpec"]["properties"]["restartPolicy"] = {"type": "string"}
    return defs


def _closes(node: Mapping[str, Any]) -> bool:
    """An object schema that declares its properties and says nothing of others: closed."""
    return node.get("type") == "object" and "properties" in node and "additionalProperties" not in node


def _definitions() -> dict[str, Any]:
    """The definitions with every object closed to fields it does not declare (for
    jsonschema's validator; the first pass reads ``_closes`` as it compiles)."""
    closed = _read_definitions()
    for node in _nodes(closed):
        node.pop("description", None)
        if _closes(node):
            node["additionalProperties"] = False
    return closed


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


def _ignoring_null(keyword: str) -> Any:
    """Draft 4's ``keyword`` check, reading a ``null`` field as an absent one."""
    from jsonschema import Draft4Validator

    check = Draft4Validator.VALIDATORS[keyword]

    def checked(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if isinstance(instance, dict) and any(v is None for v in instance.values()):
            instance = {k: v for k, v in instance.items() if v is not None}
        yield from check(validator, value, instance, schema)

    return checked


def _inline(node: Any, defs: Mapping[str, Any], stack: tuple[str, ...] = ()) -> Any:
    """The schema with every ``$ref`` replaced by its definition (a recursive one left
    open): validation then follows no references, twice as fast."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            return {} if name in stack else _inline(defs[name], defs, (*stack, name))
        return {k: _inline(v, defs, stack) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs, stack) for v in node]
    return node


def _schema(kind: str, defs: Mapping[str, Any]) -> Any:
    return _inline({"$ref": f"#/definitions/{DEFINITIONS[kind]}"}, defs)


def _validator(kind: str, defs: Mapping[str, Any] | None = None) -> Any:
    """jsonschema's Draft 4 validator, with ``null`` read as absent (imported on first use:
    a repository whose objects are all clean never loads it)."""
    from jsonschema import Draft4Validator, validators

    keywords = {k: _ignoring_null(k) for k in ("properties", "additionalProperties", "required")}
    return validators.extend(Draft4Validator, keywords)(_schema(kind, defs or _definitions()))


class Validators:
    """jsonschema's validators by kind, made on first need (an object the first pass
    flags) and kept: the definitions they are made from are read once per keeper and
    not kept themselves (a daemon would hold them for good)."""

    __slots__ = ("_by_kind",)

    def __init__(self) -> None:
        self._by_kind: dict[str, Any] = {}

    def __call__(self, kind: str) -> Any:
        got = self._by_kind.get(kind)
        if got is None:
            got = self._by_kind[kind] = _validator(kind)
        return got


# A first pass that only answers "is this object clean?", made once per kind from the
# same schema: jsonschema's general machinery costs a third of a ``diff`` of a 1000-VM
# fleet, while nearly every object is clean. Only an object it flags is read again by
# jsonschema, whose errors are the ones reported (tests/unit/test_openapi.py holds the
# two to the same answer). The schema uses only the keywords handled here.
_JSON_TYPES: Mapping[str, tuple[type, ...]] = MappingProxyType(
    {
        "string": (str,),
        "integer": (int,),
        "number": (int, float),
        "boolean": (bool,),
        "object": (dict,),
        "array": (list,),
        "null": (type(None),),
    }
)
Check = Callable[[Any], bool]


def _anything(v: Any) -> bool:
    return True


def _clean_check(schema: Mapping[str, Any], defs: Mapping[str, Any], compiled: dict[str, Check]) -> Check:
    ref = schema.get("$ref")
    if isinstance(ref, str):  # one check per definition, shared by every place using it
        name = ref.rsplit("/", 1)[-1]
        got = compiled.get(name)
        if got is None:
            got = compiled[name] = _clean_check(defs[name], defs, compiled)
        return got
    checks: list[Check] = []
    typed = _typed(schema.get("type"))
    if "enum" in schema:
        choices = list(schema["enum"])
        checks.append(lambda v: v in choices)
    props = schema.get("properties")
    extra = False if _closes(schema) else schema.get("additionalProperties", True)
    required = tuple(schema.get("required") or ())
    if props is not None or extra is not True or required:
        fields = {k: _clean_check(v, defs, compiled) for k, v in (props or {}).items()}
        rest = _clean_check(extra, defs, compiled) if isinstance(extra, dict) else None
        mapping = _mapping(fields, rest, extra is False, required)
        if typed is not None and schema.get("type") == "object":  # one isinstance, not two
            typed = None
            checks.append(lambda v: isinstance(v, dict) and mapping(v))
        else:
            checks.append(lambda v: not isinstance(v, dict) or mapping(v))
    if isinstance(schema.get("items"), dict):
        array = typed is not None and schema.get("type") == "array"  # one isinstance, not two
        checks.append(_items(_clean_check(schema["items"], defs, compiled), array))
        typed = None if array else typed
    if typed is not None:
        checks.insert(0, typed)
    return _all(checks)


def _typed(kinds: Any) -> Check | None:
    """The check of a schema's ``type`` (a bool is no number, as in JSON)."""
    if kinds is None:
        return None
    names = kinds if isinstance(kinds, list) else [kinds]
    allowed = tuple(t for n in names for t in _JSON_TYPES[n])
    if any(n in ("integer", "number") for n in names) and "boolean" not in names:
        return lambda v: isinstance(v, allowed) and not isinstance(v, bool)
    return lambda v: isinstance(v, allowed)


def _mapping(
    fields: Mapping[str, Check], rest: Check | None, closed: bool, required: tuple[str, ...]
) -> Check:
    """The check of a mapping's fields (a ``null`` field is an absent one)."""

    def mapping(v: dict[str, Any]) -> bool:
        for key, value in v.items():
            if value is None:
                continue
            check = fields.get(key)
            if check is not None:
                if not check(value):
                    return False
            elif closed or (rest is not None and not rest(value)):
                return False
        for k in required:  # noqa: SIM110 (a loop: no generator made per mapping checked)
            if v.get(k) is None:
                return False
        return True

    return mapping


def _items(item: Check, typed: bool) -> Check:
    """The check of a list's items (``typed``: anything else than a list fails)."""

    def items(v: Any) -> bool:
        if not isinstance(v, list):
            return not typed
        for x in v:  # noqa: SIM110 (a loop: no generator made per list checked)
            if not item(x):
                return False
        return True

    return items


def _all(checks: list[Check]) -> Check:
    if not checks:
        return _anything
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)
    return lambda v: all(c(v) for c in checks)


def _compile_checks() -> Mapping[str, Check]:
    """The first pass of every kind, compiled together: a definition's check is made
    once and shared wherever it is used (the definitions are not recursive: a test holds
    it). The definitions themselves are not kept (a daemon would hold them for good)."""
    defs = _read_definitions()  # closed as they are compiled (``_closes``): no copy, no walk
    compiled: dict[str, Check] = {}
    return MappingProxyType(
        {
            kind: _clean_check({"$ref": f"#/definitions/{name}"}, defs, compiled)
            for kind, name in DEFINITIONS.items()
        }
    )


_CHECKS = _compile_checks()


def _clean(kind: str) -> Check:
    return _CHECKS[kind]


def problems(
    kind: str, obj: Mapping[str, Any], validators: Validators | None = None, limit: int = 1000
) -> list[Problem]:
    """What KubeVirt's schema refuses in ``obj`` (``[]`` for a kind it does not cover), at
    most ``limit`` + 1 of them. ``validators``: the caller's, kept between calls (else made
    for this call if needed)."""
    if kind not in DEFINITIONS:
        return []
    if _clean(kind)(obj):
        return []
    validator = (validators or Validators())(kind)
    # At most ``limit`` worded (and one more seen, to tell that there are more): 100k bad
    # disks cost what 20 do, not 100k close-match searches.
    found = [_problem(e) for e in itertools.islice(validator.iter_errors(obj), limit + 1)]
    found.sort(key=lambda p: [str(x) for x in p.path])
    return found


def problems_capped(
    kind: str, obj: Mapping[str, Any], validators: Validators | None = None, limit: int = 20
) -> tuple[list[Problem], bool]:
    """``problems``, at most ``limit`` of them, and whether there were more."""
    found = problems(kind, obj, validators, limit)
    return found[:limit], len(found) > limit


def _problem(err: Any) -> Problem:
    path = tuple(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = sorted((err.schema.get("properties") or {}).keys())
        unknown = sorted(k for k in err.instance if k not in known and err.instance[k] is not None)
        key = unknown[0] if unknown else ""
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"; did you mean {close[0]}?" if close else f" (known: {', '.join(known)})"
        return Problem((*path, key), f"unknown field {key!r}{hint}")
    if err.validator == "type":
        wanted = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
        words = " or ".join(_article(_YAML_TYPES.get(str(w), str(w))) for w in wanted)
        return Problem(path, f"expected {words}, got {_kind_of(err.instance)}")
    if err.validator == "required":
        missing = err.message.split(" is a required")[0].strip("'")
        return Problem(
            (*path, missing), "KubeVirt requires this field (the API server would refuse the object)", True
        )
    if err.validator == "enum":
        return Problem(path, f"{err.instance!r} is not one of {', '.join(map(str, err.validator_value))}")
    return Problem(path, err.message)


_YAML_TYPES = MappingProxyType(
    {"array": "list", "object": "mapping", "number": "number", "integer": "integer"}
)


def _article(kind: str) -> str:
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return "null"


def first_problem(doc: Any, schema_file: str) -> tuple[tuple[str | int, ...], str] | None:
    """The first place where ``doc`` breaks the JSON schema (draft 2020-12) of the
    package's ``schema_file`` (``data/schemas/...``), and what is wrong there; None when
    it conforms. Its nesting must be bounded by the caller (a saved plan's reader)."""
    from importlib import resources

    from jsonschema import Draft202012Validator

    schema = json.loads(resources.files("reconciler").joinpath(schema_file).read_bytes())
    error = next(iter(Draft202012Validator(schema).iter_errors(doc)), None)
    return None if error is None else (tuple(error.absolute_path), str(error.message))
