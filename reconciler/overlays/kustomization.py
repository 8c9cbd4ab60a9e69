"""The kustomization file: what it may hold, read strictly as kustomize reads it.

Input: a parsed kustomization document and its bytes. Output: a ``Kust`` (the
document, its path, the positions of its fields for errors) or an ``OverlayError`` at
file:line for an unknown or unsupported field, a wrong shape, or a YAML 1.1 boolean or
number where kustomize wants a string. The fields a transformer reads are declared by
the transformer (``transformers.FIELDS``); the rest are listed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.errors import OverlayError
from reconciler.manifests.positions import Positions
from reconciler.overlays.config import TransformerConfig
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Iterable

    from reconciler.overlays.resource import Res

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")

PATCH_TEXT_FIELDS = ("annotations", "labels")


def frozen_spec(value: Any) -> Any:
    """A shape or type table, immutable all the way down: its mappings, key sets and
    ``["[]", item]`` lists become ``MappingProxyType``, ``frozenset`` and tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: frozen_spec(v) for k, v in value.items()})
    if isinstance(value, set | frozenset):
        return frozenset(value)
    if isinstance(value, list | tuple):
        return tuple(frozen_spec(v) for v in value)
    return value


_KNOWN_FIELDS = frozenset(
    {
        "apiVersion",
        "kind",
        "metadata",
        "resources",
        "bases",
        "components",
        "configMapGenerator",
        "secretGenerator",
        "generatorOptions",
        "configurations",
        "openapi",
        "sortOptions",
        "buildMetadata",
        "generators",
        "transformers",
        "vars",
    }
)

_UNSUPPORTED_FIELDS = MappingProxyType(
    {
        "validators": "validator plugins are not supported (no plugins, no exec)",
        "helmCharts": "helm charts are not supported",
        "helmGlobals": "helm charts are not supported",
        "helmChartInflationGenerator": "helm charts are not supported",
        "crds": "crds are not supported (use configurations or openapi)",
        "replicas": "replicas are not supported",
    }
)


def field_names(doc: Any, fields: Iterable[str]) -> Any:
    """A kustomization's top-level keys named as kustomize knows them (its own and the
    transformers' ``fields``): Go's JSON decoder matches a field name regardless of case
    (``nameprefix`` is ``namePrefix``)."""
    if not isinstance(doc, dict):
        return doc
    names = (*_KNOWN_FIELDS, *_UNSUPPORTED_FIELDS, *fields)
    known = {k.lower(): k for k in names}
    if all(not isinstance(k, str) or k in names for k in doc):
        return doc
    return {
        (known.get(k.lower(), k) if isinstance(k, str) and k not in names else k): v for k, v in doc.items()
    }


SELECTOR = frozenset({"group", "version", "kind", "name", "namespace", "labelSelector", "annotationSelector"})

_GEN_OPTIONS = frozen_spec(
    {"labels": None, "annotations": None, "disableNameSuffixHash": None, "immutable": None}
)

_GENERATOR = frozen_spec(
    {
        "name": None,
        "namespace": None,
        "behavior": None,
        "literals": None,
        "files": None,
        "envs": None,
        "env": None,
        "options": _GEN_OPTIONS,
    }
)

_SHAPES: Mapping[str, Any] = frozen_spec(
    {
        "configMapGenerator": ["[]", _GENERATOR],
        "secretGenerator": ["[]", {**_GENERATOR, "type": None}],
        "generatorOptions": _GEN_OPTIONS,
        "openapi": {"path", "version"},
        "sortOptions": {"order": None, "legacySortOptions": {"orderFirst", "orderLast"}},
    }
)


def _check_shape(kust: Kust, value: Any, shape: Any, where: tuple[str | int, ...]) -> None:
    if shape is None or value is None:
        return
    if isinstance(shape, tuple):  # ("[]", item shape)
        if isinstance(value, list):
            for i, item in enumerate(value):
                _check_shape(kust, item, shape[1], (*where, i))
        return
    if not isinstance(value, dict):
        return
    allowed = shape if isinstance(shape, Mapping) else dict.fromkeys(shape)
    for key, item in value.items():
        if key not in allowed:
            raise kust.error(
                f"invalid kustomization: unknown field {key!r} in {'.'.join(map(str, where))}", *where, key
            )
        _check_shape(kust, item, allowed[key], (*where, key))


STR = "string"
STR_LIST = "[]string"
STR_MAP = "map[string]string"

_GEN_TYPES: Mapping[str, Any] = frozen_spec(
    {
        "name": STR,
        "namespace": STR,
        "behavior": STR,
        "type": STR,
        "literals": STR_LIST,
        "files": STR_LIST,
        "envs": STR_LIST,
        "env": STR,
        "options": {"labels": STR_MAP, "annotations": STR_MAP},
    }
)

_TYPES: Mapping[str, Any] = frozen_spec(
    {
        "buildMetadata": STR_LIST,
        "resources": STR_LIST,
        "bases": STR_LIST,
        "components": STR_LIST,
        "configurations": STR_LIST,
        "generators": STR_LIST,
        "transformers": STR_LIST,
        "generatorOptions": {"labels": STR_MAP, "annotations": STR_MAP},
        "configMapGenerator": ["[]", _GEN_TYPES],
        "secretGenerator": ["[]", _GEN_TYPES],
    }
)


def _type_error(kust: Kust, value: Any, field: str, where: tuple[str | int, ...]) -> OverlayError:
    kind = "bool" if isinstance(value, bool) else "number" if isinstance(value, (int, float)) else "object"
    return kust.error(
        f"invalid Kustomization: cannot unmarshal {kind} into field {field} of type string", *where
    )


def _check_types(kust: Kust, doc: Any, spec: Any = None, where: tuple[str | int, ...] = ()) -> None:
    spec = _TYPES if spec is None else spec
    for key, kind in spec.items():
        if not isinstance(doc, dict) or doc.get(key) is None:
            continue
        value, at = doc[key], (*where, key)
        name = ".".join(str(p) for p in at if not isinstance(p, int))
        if kind == STR:
            if not isinstance(value, str):
                raise _type_error(kust, value, name, at)
        elif kind == STR_LIST or isinstance(kind, tuple):  # a list: of strings, or ("[]", item types)
            if not isinstance(value, list):  # as Go's decoder: never read as something else later
                raise kust.error(f"{name} must be a list", *at)
            for i, item in enumerate(value):
                if isinstance(kind, tuple):
                    _check_types(kust, item, kind[1], (*at, i))
                elif item is not None and not isinstance(item, str):
                    raise _type_error(kust, item, name, (*at, i))
        elif kind == STR_MAP:
            if not isinstance(value, dict):
                raise kust.error(f"{name} must be a mapping", *at)
            for k, item in value.items():
                if item is not None and not isinstance(item, str):
                    raise _type_error(kust, item, name, (*at, k))
        elif isinstance(kind, Mapping):
            if not isinstance(value, dict):
                raise kust.error(f"{name} must be a mapping", *at)
            _check_types(kust, value, kind, at)


@dataclass
class Kust:
    dir: str
    path: str
    data: bytes
    doc: dict[str, Any]
    blob: str | None
    reads: list[tuple[str, str | None]] = field(default_factory=list)
    plugin: str = ""  # the builtin plugin config's metadata.name, when this stands for one (``plugins``)
    # (how many ``reads``, their digest; None: a file without a content id): ``fingerprint``'s
    reads_digest: tuple[int, str | None] | None = field(default=None, repr=False, compare=False)
    # Where its fields were written: shared by every load of one content (its document
    # composed once, at the first position asked).
    positions: Positions | None = field(default=None, repr=False, compare=False)

    def pos(self, *field_path: str | int) -> tuple[int, int]:
        """Where a field of the kustomization was written (its document composed once)."""
        if self.positions is None:
            self.positions = Positions(self.data)
        return self.positions.of(field_path)

    def error(self, message: str, *field_path: str | int) -> OverlayError:
        line, col = self.pos(*field_path) if field_path else (0, 0)
        return OverlayError(message, self.path, line, col)

    def list_field(self, name: str) -> list[Any]:
        value = self.doc.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(f"{name} must be a list", name)
        return value

    def map_field(self, name: str) -> dict[str, Any]:
        value = self.doc.get(name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(f"{name} must be a mapping", name)
        return value

    def str_field(self, name: str) -> str:
        value = self.doc.get(name)
        if value is None:
            return ""
        if isinstance(value, (dict, list)):
            raise self.error(f"{name} must be a string", name)
        return str(value)


@dataclass(frozen=True, slots=True)
class Var:
    """A kustomize var (``vars``): the field of one object its ``$(NAME)`` stands for."""

    name: str
    group: str
    version: str
    kind: str
    obj_name: str
    namespace: str
    field_path: str


@dataclass
class Acc:
    """Resources accumulated so far at one level, and the merged transformer config."""

    res: list[Res] = field(default_factory=list)
    config: TransformerConfig = field(default_factory=TransformerConfig)
    vars: dict[str, Var] = field(default_factory=dict)  # kustomize's vars, by name (``vars``)


def check_fields(
    kust: Kust, fields: Iterable[str], shapes: Mapping[str, Any], types: Mapping[str, Any]
) -> None:
    """Every field of ``kust`` is known (here or to a transformer: ``fields``, with their
    ``shapes`` and ``types``), supported and well-formed."""
    known = _KNOWN_FIELDS | set(fields)
    all_shapes = {**_SHAPES, **shapes}
    doc = kust.doc
    for key in doc:
        if key in _UNSUPPORTED_FIELDS:
            raise kust.error(f"{key}: {_UNSUPPORTED_FIELDS[key]}", key)
        if key not in known:
            raise kust.error(f"unknown kustomization field {key!r}", key)
        _check_shape(kust, doc[key], all_shapes.get(key), (key,))
    _check_types(kust, doc, {**_TYPES, **types})
