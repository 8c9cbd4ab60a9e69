"""Kubernetes resource quantities (``4Gi``, ``64M``, ``100m``, ``1.5e3``).

Input: quantity strings or numbers as they appear in manifests. Output: exact
``Fraction`` values, and strings in Kubernetes' canonical form (what Go's
``resource.Quantity.String()`` prints). Pure; never rounds silently.
"""

from __future__ import annotations

import re
from fractions import Fraction
from types import MappingProxyType
from typing import Any

BINARY = MappingProxyType({"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6})
DECIMAL = MappingProxyType(
    {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
)
_DECIMAL_SUFFIX = MappingProxyType({v: k for k, v in DECIMAL.items()})
_BINARY_SUFFIX = MappingProxyType({v: k for k, v in BINARY.items()})

_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))\Z"
)

FORMAT_BINARY = "BinarySI"
FORMAT_DECIMAL = "DecimalSI"
FORMAT_EXPONENT = "DecimalExponent"


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse(value: Any) -> tuple[Fraction, str]:
    """``"1.5Gi"`` -> (1610612736, "BinarySI"). Integers are DecimalSI."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression, got {value!r}")
    if isinstance(value, int):
        return Fraction(value), FORMAT_DECIMAL
    if isinstance(value, float):
        return Fraction(str(value)), FORMAT_DECIMAL
    text = str(value).strip()
    m = _QUANTITY.match(text)
    if not m:
        raise QuantityError(
            f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {text!r}"
        )
    num = Fraction(m.group("num") if not m.group("num").startswith(".") else "0" + m.group("num"))
    if m.group("sign") == "-":
        num = -num
    if m.group("bin"):
        return num * (1024 ** BINARY[m.group("bin")]), FORMAT_BINARY
    if m.group("exp"):
        return num * Fraction(10) ** int(m.group("exp")[1:]), FORMAT_EXPONENT
    return num * Fraction(10) ** DECIMAL[m.group("dec") or ""], FORMAT_DECIMAL


def value(v: Any) -> Fraction:
    return parse(v)[0]


def is_quantity(v: Any) -> bool:
    try:
        parse(v)
    except QuantityError:
        return False
    return True


def ceil_int(v: Any) -> int:
    """Rounded up to an integer, like ``Quantity.Value()``."""
    q = value(v)
    return -((-q.numerator) // q.denominator)


def canonical(amount: Fraction | int, fmt: str = FORMAT_DECIMAL) -> str:
    """Kubernetes' canonical text for ``amount`` in format ``fmt``."""
    amount = Fraction(amount)
    if fmt == FORMAT_BINARY:
        if -1024 < amount < 1024 or amount.denominator != 1:
            fmt = FORMAT_DECIMAL
        else:
            n = int(amount)
            exp = 0
            while n != 0 and n % 1024 == 0 and exp < 6:
                n //= 1024
                exp += 1
            return f"{n}{_BINARY_SUFFIX[exp] if exp else ''}"
    # decimal: smallest exponent multiple of 3 (>= -9) giving an integer mantissa,
    # then the largest one keeping it an integer
    if amount == 0:
        return "0"
    exp = -9
    while (amount / Fraction(10) ** exp).denominator != 1:
        exp += 3
        if exp > 18:
            break
    mantissa = amount / Fraction(10) ** exp
    if mantissa.denominator != 1:  # finer than nano: round up like Kubernetes
        mantissa = Fraction(-((-mantissa.numerator) // mantissa.denominator))
    n = int(mantissa)
    while n % 1000 == 0 and exp < 18:
        n //= 1000
        exp += 3
    if fmt == FORMAT_EXPONENT:
        return f"{n}e{exp}" if exp else str(n)
    return f"{n}{_DECIMAL_SUFFIX[exp]}"


def normalized(v: Any) -> str:
    """The canonical text of a quantity as written (``"2048Mi"`` -> ``"2Gi"``)."""
    amount, fmt = parse(v)
    return canonical(amount, fmt)
