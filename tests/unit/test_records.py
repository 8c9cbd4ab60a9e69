"""reconciler.records: a record made cheaply behaves as ``dataclasses.dataclass(frozen=True, slots=True)``.

Each shape is declared twice, once under each decorator, and everything observable is compared:
the fields and parameters ``dataclasses`` reports, the signature and annotations of ``__init__``,
``__match_args__``, slots, repr, equality, hash, the errors of assignment and deletion, replace,
asdict, pickle and copy. Then every record of the package is checked against a twin made by
``dataclasses.make_dataclass`` from its fields.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import pickle
import pkgutil
import sys
from dataclasses import field
from typing import Any, ClassVar

import pytest

import reconciler
from reconciler import records

STD = dataclasses.dataclass(frozen=True, slots=True)
FAST = records.dataclass(frozen=True, slots=True)
NAN = float("nan")  # one object: equal to itself inside a tuple, never by ==


def shapes(deco: Any) -> dict[str, tuple[type, tuple[Any, ...], dict[str, Any]]]:
    """Classes declared under ``deco``, each with arguments for two instances (args, kwargs).

    A type checker takes them for plain classes (``deco`` is no decorator expression it knows)."""

    @deco
    class Plain:
        """Two fields with defaults, one without."""

        name: str
        size: int = 1
        tags: tuple[str, ...] = ()

    @deco
    class Options:
        """``field()`` options: factories, hidden, uncompared, unhashed, not in __init__."""

        key: str
        items: list[int] = field(default_factory=list)
        secret: str = field(default="", repr=False)
        note: str = field(default="", compare=False)
        weight: int = field(default=0, hash=False)
        derived: int = field(init=False, default=7)
        made: dict[str, int] = field(init=False, default_factory=dict)
        hidden: int = field(default=3, init=False, repr=False, compare=False)

    @deco
    class One:  # no docstring: the name and the signature are its __doc__
        value: float

    @deco
    class Empty:
        """No field at all."""

    @deco
    class Checked:
        """A __post_init__, a property and a method."""

        low: int
        high: int

        def __post_init__(self) -> None:
            if self.low > self.high:
                raise ValueError(f"{self.low} > {self.high}")

        @property
        def width(self) -> int:
            return self.high - self.low

        def shifted(self, by: int) -> Checked:
            return dataclasses.replace(self, low=self.low + by, high=self.high + by)  # type: ignore[type-var]

    @deco
    class OwnMethods:
        """Its own __repr__ and __eq__ (then a __hash__ is still added) kept."""

        a: int

        def __repr__(self) -> str:
            return f"<{self.a}>"

        def __eq__(self, other: object) -> bool:
            return isinstance(other, OwnMethods) and other.a % 2 == self.a % 2

    @deco
    class OwnHash:
        """Its own __hash__ kept."""

        a: int

        def __hash__(self) -> int:
            return 42

    @deco
    class WithClassVar:
        """A ClassVar: the standard decorator's business."""

        kind: ClassVar[str] = "k"
        a: int

    @deco
    class Base:
        """A base record."""

        a: int

    @deco
    class Derived(Base):
        """A record derived from a record."""

        b: str = "x"

    @deco
    class Nested:
        """A record holding records and a mutable value (unhashable)."""

        inner: Plain | None
        values: tuple[Any, ...] = ()

    plain, other = Plain("a", 2, ("t",)), Plain("b")  # type: ignore[call-arg]
    return {
        "Plain": (Plain, ("a", 2, ("t",)), {"name": "b"}),
        "Options": (Options, ("k", [1], "s", "n", 5), {"key": "j"}),
        "One": (One, (1.5,), {"value": NAN}),
        "Empty": (Empty, (), {}),
        "Checked": (Checked, (1, 3), {"low": 0, "high": 0}),
        "OwnMethods": (OwnMethods, (1,), {"a": 3}),
        "OwnHash": (OwnHash, (1,), {"a": 2}),
        "WithClassVar": (WithClassVar, (1,), {"a": 2}),
        "Base": (Base, (1,), {"a": 2}),
        "Derived": (Derived, (1, "y"), {"a": 2}),
        "Nested": (Nested, (plain, (1, "x")), {"inner": other, "values": ([1],)}),
    }


def outcome(fn: Any) -> tuple[str, Any]:
    """What calling ``fn`` gives: ("ok", value) or ("raise", type and message)."""
    try:
        return "ok", fn()
    except Exception as err:  # the error itself is compared
        return "raise", (type(err).__name__, str(err))


def observed(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Everything of ``cls`` and two instances that a caller could rely on."""
    one, two = cls(*args), cls(**kwargs)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    fields = dataclasses.fields(cls)
    return {
        "params": [getattr(params, p) for p in ("init", "repr", "eq", "order", "unsafe_hash", "frozen")],
        "fields": [
            (f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare, f.kw_only)
            for f in fields
        ],
        "all_fields": sorted(cls.__dataclass_fields__),  # type: ignore[attr-defined]
        "signature": str(inspect.signature(cls)),
        "init_annotations": {k: str(v) for k, v in cls.__init__.__annotations__.items()},  # type: ignore[misc]
        "match_args": cls.__match_args__,  # type: ignore[attr-defined]
        "slots": cls.__slots__,  # type: ignore[attr-defined]
        "has_dict": hasattr(one, "__dict__"),
        "doc": cls.__doc__,
        "qualnames": [
            getattr(cls, m).__qualname__.rsplit(".", 1)[-1] if getattr(cls, m) is not None else None
            for m in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")
        ],
        "repr": (repr(one), repr(two)),
        "eq": (one == two, one == cls(*args), one != two, one == object(), one.__eq__(object())),
        "hash": (outcome(lambda: hash(one)), outcome(lambda: hash(two)), cls.__hash__ is None),
        "hash_equal": outcome(lambda: hash(one) == hash(cls(*args))),
        "set_field": outcome(lambda: setattr(one, fields[0].name, 1)) if fields else None,
        "set_other": outcome(lambda: setattr(one, "nope", 1)),
        "del_field": outcome(lambda: delattr(one, fields[0].name)) if fields else None,
        "del_other": outcome(lambda: delattr(one, "nope")),
        "replace": outcome(lambda: repr(dataclasses.replace(one))),
        "replace_bad": outcome(lambda: dataclasses.replace(one, nope=1)),
        "asdict": outcome(lambda: dataclasses.asdict(one)),
        "astuple": outcome(lambda: dataclasses.astuple(two)),
        "pickle": outcome(lambda: repr(pickle.loads(pickle.dumps(one, protocol=pickle.HIGHEST_PROTOCOL)))),
        "copy": (repr(copy.copy(one)), repr(copy.deepcopy(two))),
        "too_many": outcome(lambda: cls(*args, *args, 1)),
        "missing": outcome(lambda: cls()) if fields and fields[0].default is dataclasses.MISSING else None,
    }


NAMES = sorted(shapes(STD))


@pytest.mark.parametrize("name", NAMES)
def test_a_cheap_record_is_the_standard_one(name: str) -> None:
    std, fast = shapes(STD)[name], shapes(FAST)[name]
    assert observed(*fast) == observed(*std)


def test_the_cheap_path_is_taken_for_plain_shapes() -> None:
    """On 3.11 a plain record's __eq__ is no compiled function (the point of the module)."""
    made = shapes(FAST)
    compiled = {n: made[n][0].__eq__.__code__.co_filename == "<string>" for n in ("Plain", "Derived")}
    assert compiled == {"Plain": sys.version_info[:2] != (3, 11), "Derived": True}


def test_a_post_init_error_and_the_factories() -> None:
    made = shapes(FAST)
    checked, options = made["Checked"][0], made["Options"][0]
    with pytest.raises(ValueError, match="3 > 1"):
        checked(3, 1)
    a, b = options("k"), options("k")
    assert (a.items, a.made, a.derived) == ([], {}, 7)
    assert a.items is not b.items
    assert checked(1, 2).shifted(2) == checked(3, 4)


def test_a_recursive_repr_is_cut() -> None:
    @records.dataclass(frozen=True, slots=True)
    class Loop:
        """Holds a list that holds itself."""

        items: list[Any]

    loop = Loop([])
    loop.items.append(loop)
    assert repr(loop) == "test_a_recursive_repr_is_cut.<locals>.Loop(items=[...])"


def test_other_options_are_the_standard_decorator() -> None:
    @records.dataclass(frozen=True)
    class Frozen:
        """Frozen without slots."""

        a: int

    @records.dataclass
    class Mutable:
        """The bare decorator."""

        a: int

    assert hasattr(Frozen(1), "__dict__")
    assert Frozen.__eq__.__code__.co_filename == "<string>"
    m = Mutable(1)
    m.a = 2
    assert m == Mutable(2)


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(reconciler.__path__, "reconciler."))


def _init_var(f: dataclasses.Field[object]) -> bool:
    """Whether the record's pseudo-field ``f`` is an init-only argument (``InitVar``)."""
    return getattr(f, "_field_type", None) is getattr(dataclasses, "_FIELD_INITVAR")  # noqa: B009


def test_every_record_of_the_package_has_its_standard_signature() -> None:
    """Each frozen slots record of the package against a twin of the same fields."""
    seen = 0
    for name in _modules():
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for cls in vars(module).values():
            params = getattr(cls, "__dataclass_params__", None)
            if not isinstance(cls, type) or cls.__module__ != name or params is None:
                continue
            if not (params.frozen and "__slots__" in cls.__dict__):
                continue
            fields = dataclasses.fields(cls)
            twin = dataclasses.make_dataclass(
                cls.__name__,
                # its fields and its init-only arguments (``InitVar``), in the order declared
                [
                    (f.name, f.type, copy.copy(f))
                    for f in getattr(cls, "__dataclass_fields__").values()  # noqa: B009
                    if f in fields or _init_var(f)
                ],
                frozen=True,
                slots=True,
                repr=params.repr,
                eq=params.eq,
            )
            assert str(inspect.signature(twin)) == str(inspect.signature(cls)), cls
            assert twin.__match_args__ == cls.__match_args__, cls  # type: ignore[attr-defined]
            flags = ("init", "repr", "eq", "order", "unsafe_hash", "frozen")
            mine, its = cls.__dataclass_params__, twin.__dataclass_params__  # type: ignore[attr-defined]
            assert [getattr(mine, p) for p in flags] == [getattr(its, p) for p in flags], cls
            assert (twin.__hash__ is None) == (cls.__hash__ is None), cls
            seen += 1
    assert seen > 100
