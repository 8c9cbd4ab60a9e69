"""KubeVirt objects checked against KubeVirt's published OpenAPI schema, strictly.

Input: a parsed object of a kind KubeVirt serves (VirtualMachine, the instancetype
and preference kinds, VirtualMachineInstancePreset, VirtualMachinePool). Output:
nothing, or the problems found, each with the field path it concerns: an unknown
field (with the closest known name), a value of the wrong type, and (marked as for
KubeVirt only, a warning here) a missing field KubeVirt requires. Strict as ``kubectl apply --validate=strict`` is on a cluster: the schema is
KubeVirt's own (``reconciler/data/kubevirt/swagger.json``, pinned with its license),
read with every object closed to fields it does not declare. A ``null`` value counts
as an absent field, as the API server reads it. Pure.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

# kind -> the schema definition of its objects (apiVersion checked by the catalog)
DEFINITIONS = {
    "VirtualMachine": "v1.VirtualMachine",
    "VirtualMachineInstancetype": "v1beta1.VirtualMachineInstancetype",
    "VirtualMachineClusterInstancetype": "v1beta1.VirtualMachineClusterInstancetype",
    "VirtualMachinePreference": "v1beta1.VirtualMachinePreference",
    "VirtualMachineClusterPreference": "v1beta1.VirtualMachineClusterPreference",
    "VirtualMachineInstancePreset": "v1.VirtualMachineInstancePreset",
    "VirtualMachinePool": "v1beta1.VirtualMachinePool",
}
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"


@dataclass(frozen=True, slots=True)
class Problem:
    path: tuple[str | int, ...]  # the field concerned (an unknown field: its own path)
    message: str
    # A field KubeVirt requires but a libvirt host does without (``domain.devices``): the
    # object runs here, and a warning says what KubeVirt would refuse.
    only_kubevirt: bool = False


def _definitions() -> dict[str, Any]:
    data = resources.files("reconciler").joinpath("data/kubevirt/swagger.json").read_bytes()
    defs: dict[str, Any] = json.loads(data)["definitions"]
    closed = copy.deepcopy(defs)
    for node in _nodes(closed):
        node.pop("description", None)
        if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
    if _INT_OR_STRING in closed:
        closed[_INT_OR_STRING] = {"type": ["string", "integer"]}
    # The design notes' ``spec.restartPolicy`` (Always / OnFailure / Never), this project's
    # one addition to a VirtualMachine (docs/mapping.md): read, never refused.
    closed["v1.VirtualMachineSpec"]["properties"]["restartPolicy"] = {"type": "string"}
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


@functools.cache
def _schema(kind: str) -> Any:
    return _inline({"$ref": f"#/definitions/{DEFINITIONS[kind]}"}, _definitions())


@functools.cache
def _validator(kind: str) -> Any:
    """jsonschema's Draft 4 validator, with ``null`` read as absent (imported on first use:
    a repository whose objects are all clean never loads it)."""
    from jsonschema import Draft4Validator, validators

    keywords = {k: _ignoring_null(k) for k in ("properties", "additionalProperties", "required")}
    return validators.extend(Draft4Validator, keywords)(_schema(kind))


# A first pass that only answers "is this object clean?", made once per kind from the
# same schema: jsonschema's general machinery costs a third of a ``diff`` of a 1000-VM
# fleet, while nearly every object is clean. Only an object it flags is read again by
# jsonschema, whose errors are the ones reported (tests/unit/test_openapi.py holds the
# two to the same answer). The schema uses only the keywords handled here.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}
Check = Callable[[Any], bool]


def _clean_check(schema: Mapping[str, Any], defs: Mapping[str, Any], compiled: dict[str, Check]) -> Check:
    ref = schema.get("$ref")
    if isinstance(ref, str):  # one check per definition, shared by every place using it
        name = ref.rsplit("/", 1)[-1]
        got = compiled.get(name)
        if got is None:
            got = compiled[name] = _clean_check(defs[name], defs, compiled)
        return got
    checks: list[Check] = []
    kinds = schema.get("type")
    if kinds is not None:
        names = kinds if isinstance(kinds, list) else [kinds]
        allowed = tuple(t for n in names for t in _JSON_TYPES[n])
        numeric = any(n in ("integer", "number") for n in names)
        boolean = "boolean" in names

        def typed(v: Any) -> bool:  # a bool is no number, as in JSON
            return isinstance(v, allowed) and (boolean or not isinstance(v, bool) or not numeric)

        checks.append(typed)
    if "enum" in schema:
        choices = list(schema["enum"])
        checks.append(lambda v: v in choices)
    props = schema.get("properties")
    extra = schema.get("additionalProperties", True)
    required = tuple(schema.get("required") or ())
    if props is not None or extra is not True or required:
        fields = {k: _clean_check(v, defs, compiled) for k, v in (props or {}).items()}
        rest = _clean_check(extra, defs, compiled) if isinstance(extra, dict) else None
        closed = extra is False

        def mapping(v: Any) -> bool:
            if not isinstance(v, dict):
                return True
            for key, value in v.items():
                if value is None:
                    continue
                check = fields.get(key)
                if check is not None:
                    if not check(value):
                        return False
                elif closed or (rest is not None and not rest(value)):
                    return False
            return all(v.get(k) is not None for k in required)

        checks.append(mapping)
    if isinstance(schema.get("items"), dict):
        item = _clean_check(schema["items"], defs, compiled)
        checks.append(lambda v: not isinstance(v, list) or all(item(x) for x in v))
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(c(v) for c in checks)


@functools.cache
def _checks() -> dict[str, Check]:
    """The first pass of every kind, compiled together: a definition's check is made
    once and shared wherever it is used (the definitions are not recursive: a test holds
    it). The definitions themselves are not kept (a daemon would hold them for good)."""
    defs = _definitions()
    compiled: dict[str, Check] = {}
    return {
        kind: _clean_check({"$ref": f"#/definitions/{name}"}, defs, compiled)
        for kind, name in DEFINITIONS.items()
    }


def _clean(kind: str) -> Check:
    return _checks()[kind]


# Results by object identity: the overlay build hands out the same (never mutated)
# object for an unchanged file, so a daemon's resync or a diff's second revision checks
# only what changed. The object is held so its id cannot be reused meanwhile; only the
# objects of the last two rounds (``new_round``: one per catalog built) are kept, so a
# long-running daemon does not keep the documents of revisions long gone.
_SEEN: dict[int, tuple[Mapping[str, Any], str, tuple[Problem, ...]]] = {}
_OLD: dict[int, tuple[Mapping[str, Any], str, tuple[Problem, ...]]] = {}


def new_round() -> None:
    """Start a new round of checks: results older than the previous round are forgotten."""
    global _SEEN, _OLD
    _OLD, _SEEN = _SEEN, {}


def problems(kind: str, obj: Mapping[str, Any]) -> list[Problem]:
    """What KubeVirt's schema refuses in ``obj`` (``[]`` for a kind it does not cover)."""
    if kind not in DEFINITIONS:
        return []
    key = id(obj)
    seen = _SEEN.get(key) or _OLD.get(key)
    if seen is not None and seen[0] is obj and seen[1] == kind:
        _SEEN[key] = seen
        return list(seen[2])
    out: list[Problem] = []
    if not _clean(kind)(obj):
        out = sorted(
            (_problem(e) for e in _validator(kind).iter_errors(obj)), key=lambda p: [str(x) for x in p.path]
        )
    _SEEN[key] = (obj, kind, tuple(out))
    return out


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


_YAML_TYPES = {"array": "list", "object": "mapping", "number": "number", "integer": "integer"}


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
