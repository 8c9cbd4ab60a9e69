"""``@dataclass(frozen=True, slots=True)``, the records passed between stages, made cheaply.

A record module imports ``dataclass`` from here instead of ``dataclasses``; type checkers see the
standard decorator itself. Any other set of options is the standard decorator at run time too.

Why: for a frozen record the standard library compiles six methods from source (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``), about 0.7 ms a class
and four fifths of it compiling; start-up imports some 130 records, a tenth of a second of
``reconciler diff``. Here ``dataclasses`` still reads the fields (defaults, factories, ``field()``
options, ``__match_args__``) and compiles ``__init__`` with its own generator (construction is
the hot path), then rebuilds the class with slots; the other five methods are closures over the
field names doing what the generated ones do (same tuples compared and hashed, same text, same
errors). ``__dataclass_params__`` says what the standard decorator says. Shapes this does not
cover (a dataclass base, ``ClassVar``/``InitVar``/``KW_ONLY`` fields, keyword-only fields, an
own ``__setattr__``/``__delattr__``) and other Python versions than the one whose
generator it calls (3.11) take the standard decorator. tests/unit/test_records.py holds both
against each other.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
import operator
import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable
    from dataclasses import dataclass as dataclass
else:

    def dataclass(cls=None, /, **options):
        """The standard decorator, or :func:`_record` for ``frozen=True, slots=True`` alone."""
        if frozenset(options.items()) != _RECORD or not _FAST:
            return dataclasses.dataclass(cls, **options)
        return _record if cls is None else _record(cls)


_RECORD = frozenset({("frozen", True), ("slots", True)})
_FAST = sys.version_info[:2] == (3, 11)
# Annotations that make pseudo-fields or keyword-only fields: the standard decorator's business.
_PSEUDO = re.compile(r"ClassVar|InitVar|KW_ONLY")


def _plain(cls: type) -> bool:
    """Whether the closures below make ``cls`` exactly as the standard decorator would."""
    own = cls.__dict__
    return (
        "__setattr__" not in own
        and "__delattr__" not in own
        and not any(hasattr(b, "__dataclass_fields__") for b in cls.__mro__[1:])
        and not any(
            _PSEUDO.search(t if isinstance(t, str) else repr(t))
            for t in own.get("__annotations__", {}).values()
        )
        and not any(isinstance(v, dataclasses.Field) and v.kw_only is True for v in own.values())
    )


def _record(cls: type) -> type:
    """``dataclasses.dataclass(cls, frozen=True, slots=True)``, compiling ``__init__`` only."""
    if not _plain(cls):
        return dataclasses.dataclass(cls, frozen=True, slots=True)
    own_hash = cls.__dict__.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (own_hash is dataclasses.MISSING or (own_hash is None and "__eq__" in cls.__dict__))
    documented = bool(cls.__doc__)
    if not documented:  # made below, once __init__ is there (not from object's signature here)
        cls.__doc__ = cls.__name__
    dataclasses.dataclass(cls, init=False, repr=False, eq=False)  # the fields, defaults, __match_args__
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    params.init = params.repr = params.eq = params.frozen = True
    fields = dataclasses.fields(cls)
    module = sys.modules.get(cls.__module__)
    self_name = "__dataclass_self__" if "self" in cls.__dataclass_fields__ else "self"  # type: ignore[attr-defined]
    init = dataclasses._init_fn(  # type: ignore[attr-defined]  # the standard generator
        fields,
        [f for f in fields if f.init],
        [],
        True,
        hasattr(cls, "__post_init__"),
        self_name,
        module.__dict__ if module is not None else {},
        True,
    )
    _add(cls, init)
    _add(cls, dataclasses._recursive_repr(_repr([f.name for f in fields if f.repr])))  # type: ignore[attr-defined]
    _add(cls, _eq(_getter([f.name for f in fields if f.compare])))
    names = tuple(f.name for f in fields)
    _add(cls, _setattr(cls, names))
    _add(cls, _delattr(cls, names))
    if not explicit_hash:
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        cls.__hash__ = _named(cls, _hash(_getter(hashed)))  # type: ignore[method-assign]
    if not documented:  # the standard decorator's: the name and the signature (of __init__ now)
        try:
            cls.__doc__ = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
        except (TypeError, ValueError):
            cls.__doc__ = cls.__name__
    cls = dataclasses._add_slots(cls, True, False)  # type: ignore[attr-defined]
    abc.update_abstractmethods(cls)
    return cls


def _named(cls: type, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` named as a method of ``cls`` and of its module, as a generated one is."""
    fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
    if fn.__module__ == __name__:  # a closure of this module, not the compiled __init__
        fn.__module__ = cls.__module__
    return fn


def _add(cls: type, fn: Callable[..., Any]) -> None:
    """``fn`` on ``cls`` unless the class body defines it (the standard decorator's rule)."""
    if fn.__name__ not in cls.__dict__:
        setattr(cls, fn.__name__, _named(cls, fn))


def _getter(names: list[str]) -> Callable[[object], tuple[Any, ...]]:
    """The tuple of ``names``' values, as the generated ``(self.a,self.b,)``."""
    if not names:
        return lambda _: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda obj: (one(obj),)
    return operator.attrgetter(*names)


def _repr(names: list[str]) -> Callable[[object], str]:
    def __repr__(self: object) -> str:  # noqa: N807 - the method's own name
        return (
            self.__class__.__qualname__ + "(" + ", ".join([f"{n}={getattr(self, n)!r}" for n in names]) + ")"
        )

    return __repr__


def _eq(values: Callable[[object], tuple[Any, ...]]) -> Callable[[object, object], Any]:
    def __eq__(self: object, other: object) -> Any:  # noqa: N807 - the method's own name
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash(values: Callable[[object], tuple[Any, ...]]) -> Callable[[object], int]:
    def __hash__(self: object) -> int:  # noqa: N807 - the method's own name
        return hash(values(self))

    return __hash__


def _setattr(cls: Any, names: tuple[str, ...]) -> Callable[[Any, str, object], None]:
    def __setattr__(self: Any, name: str, value: object) -> None:  # noqa: N807 - the method's own name
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _delattr(cls: Any, names: tuple[str, ...]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:  # noqa: N807 - the method's own name
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__
