"""No module of ``reconciler`` keeps state of its own: what a run keeps lives in the
caller's ``context.Context`` (or in a value the caller holds), never in a module.

Covers: every module of the package is imported and each of its names, and each class
attribute of the classes it defines, is checked: no mutable container (dict, list, set,
bytearray, deque, ...), no ``functools.lru_cache``/``cache`` wrapper, no instance of a
class whose objects can change (only frozen dataclasses, named tuples, enums and the
immutable built-ins pass, looked into all the way down); and no ``global`` statement
in any module's source. The few exceptions are named below with the reason each is one.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import datetime
import decimal
import enum
import fractions
import functools
import importlib
import pkgutil
import re
import types
import typing
import uuid
from pathlib import Path
from typing import Any

import pytest

import reconciler

# (module, name) -> why a mutable-looking object is no state.
ALLOWED: dict[tuple[str, str], str] = {
    **{
        (f"reconciler.{m}", "log"): "structlog's lazy logger proxy: configuration lives in structlog"
        for m in (
            "daemon.books",
            "daemon.health",
            "daemon.http",
            "daemon.listeners",
            "daemon.outbox",
            "daemon.prober",
            "daemon.probing",
            "daemon.publish",
            "daemon.record",
            "daemon.reload",
            "daemon.revert",
            "daemon.runner",
            "daemon.service",
            "daemon.statefile",
            "daemon.watch",
            "host.apply",
            "host.live",
            "images.http",
            "images.registry",
            "source.mirror",
            "status.state",
        )
    },
    **{
        (m, "NO_SECRETS"): "the empty SecretData: nothing in it, and no method changes one"
        for m in (
            "reconciler.model",
            "reconciler.model.packed",
            "reconciler.model.secretdata",
            "reconciler.expand.configs",
            "reconciler.host.payload",
            "reconciler.host.provision",
            "reconciler.plan.saved",
            "reconciler.render.configdisk",
        )
    },
    ("reconciler.manifests.sops.keys", "SEALED"): "the keys of no key at all: no method of Keys changes one",
}

IMMUTABLE_TYPES: tuple[type, ...] = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    range,
    decimal.Decimal,
    fractions.Fraction,
    re.Pattern,
    uuid.UUID,
    datetime.timezone,
    enum.Enum,
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    property,
    staticmethod,
    classmethod,
    typing.TypeVar,
    types.GenericAlias,
    types.UnionType,
)
MUTABLE_CONTAINERS: tuple[type, ...] = (
    dict,
    list,
    set,
    bytearray,
    collections.deque,
    collections.OrderedDict,
    collections.defaultdict,
    collections.Counter,
)


def modules() -> list[str]:
    names = ["reconciler"]
    for info in pkgutil.walk_packages(reconciler.__path__, "reconciler."):
        if not info.name.endswith("__main__"):
            names.append(info.name)
    return sorted(names)


def problem(value: Any, seen: set[int] | None = None) -> str:
    """Why ``value`` is state (``""`` when it is immutable all the way down)."""
    seen = seen if seen is not None else set()
    if id(value) in seen:
        return ""
    seen.add(id(value))
    if isinstance(value, functools._lru_cache_wrapper):
        return "a memoised function (functools.cache / lru_cache)"
    if isinstance(value, MUTABLE_CONTAINERS):
        return f"a mutable {type(value).__name__}"
    if isinstance(value, tuple | frozenset):
        return next((p for v in value if (p := problem(v, seen))), "")
    if isinstance(value, types.MappingProxyType):
        return next((p for kv in value.items() for v in kv if (p := problem(v, seen))), "")
    if isinstance(value, IMMUTABLE_TYPES) or type(value) is object:  # sentinels: object()
        return ""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if not value.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            return f"an instance of the mutable dataclass {type(value).__name__}"
        return next(
            (p for f in dataclasses.fields(value) if (p := problem(getattr(value, f.name), seen))), ""
        )
    if type(value).__module__ in ("typing", "__future__"):
        return ""  # type aliases and special forms; ``from __future__ import annotations``
    return f"an instance of {type(value).__module__}.{type(value).__qualname__}"


def defined_here(module: types.ModuleType, value: Any) -> bool:
    """Functions and classes are checked where they are defined (not where imported)."""
    home = getattr(value, "__module__", None)
    imported = isinstance(value, type | types.FunctionType | functools._lru_cache_wrapper)
    return home is None or home == module.__name__ or not imported


@pytest.mark.parametrize("name", modules())
def test_module_holds_no_mutable_state(name: str) -> None:
    module = importlib.import_module(name)
    found = []
    for attr, value in vars(module).items():
        if attr.startswith("__") and attr.endswith("__"):
            continue  # the interpreter's own (__all__, __path__, __spec__, ...)
        if (name, attr) in ALLOWED or not defined_here(module, value):
            continue
        if why := problem(value):
            found.append(f"{name}.{attr}: {why}")
        if isinstance(value, type) and value.__module__ == name and not issubclass(value, enum.Enum | tuple):
            for cattr, cvalue in vars(value).items():
                if cattr.startswith("_") and cattr.endswith("_"):
                    continue  # dunders and the sunder bookkeeping of NamedTuple and Enum
                if isinstance(cvalue, (*MUTABLE_CONTAINERS, functools._lru_cache_wrapper)):
                    found.append(f"{name}.{attr}.{cattr}: {problem(cvalue)} (class attribute)")
    assert not found, "module-level state:\n" + "\n".join(found)


@pytest.mark.parametrize("name", modules())
def test_module_has_no_global_statement(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    found = [
        f"line {node.lineno}: global {', '.join(node.names)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Global)
    ]
    assert not found, f"{name}: " + "; ".join(found)


def test_the_exceptions_still_exist() -> None:
    """Every allowed exception names a real object (a stale entry is removed, not kept)."""
    for module, attr in ALLOWED:
        assert hasattr(importlib.import_module(module), attr), (module, attr)


def test_the_check_finds_state() -> None:
    """The check itself: each kind of state it must refuse is refused."""

    @functools.cache
    def memo(x: int) -> int:
        return x

    @dataclasses.dataclass
    class Open:
        x: int = 0

    @dataclasses.dataclass(frozen=True)
    class Closed:
        items: tuple[Any, ...] = ()

    containers: tuple[Any, ...] = ({}, [], set(), bytearray())
    assert all(problem(v) for v in containers)
    assert problem(memo)
    assert problem(Open())
    assert problem(Closed(({},)))
    assert problem(types.MappingProxyType({"a": []}))
    assert problem((1, [2]))
    assert not problem(types.MappingProxyType({"a": (1, frozenset({2}))}))
    assert not problem(Closed((1, "x")))
    assert not problem(object())
