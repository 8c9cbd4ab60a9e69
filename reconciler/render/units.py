"""Kubernetes resource quantities as integers.

Input: a quantity as written in YAML (``2Gi``, ``512M``, ``1.5Gi``, ``1024``, ``100m``).
Output: an ``int`` (bytes, or whole units). Pure. Raises ``ValueError`` on anything
that is not a Kubernetes quantity; callers turn it into a RenderError naming the field.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

_SUFFIX: Mapping[str, Decimal] = MappingProxyType(
    {
        "": Decimal(1),
        "Ki": Decimal(1024),
        "Mi": Decimal(1024**2),
        "Gi": Decimal(1024**3),
        "Ti": Decimal(1024**4),
        "Pi": Decimal(1024**5),
        "Ei": Decimal(1024**6),
        "n": Decimal("1e-9"),
        "u": Decimal("1e-6"),
        "m": Decimal("1e-3"),
        "k": Decimal(10**3),
        "M": Decimal(10**6),
        "G": Decimal(10**9),
        "T": Decimal(10**12),
        "P": Decimal(10**15),
        "E": Decimal(10**18),
    }
)
_QUANTITY = re.compile(
    r"^([+-]?[0-9]+(?:\.[0-9]*)?|[+-]?\.[0-9]+)([eE][+-]?[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)


def quantity_decimal(value: object) -> Decimal:
    """The exact value of a quantity."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(str(value))
    if not isinstance(value, str):
        raise ValueError(f"not a quantity: {value!r}")
    m = _QUANTITY.match(value.strip())
    if not m:
        raise ValueError(f"not a quantity: {value!r}")
    number, exponent, suffix = m.group(1), m.group(2), m.group(3) or ""
    try:
        d = Decimal(number + (exponent or ""))
    except InvalidOperation as err:  # pragma: no cover - the regex already checked
        raise ValueError(f"not a quantity: {value!r}") from err
    return d * _SUFFIX[suffix]


def quantity_bytes(value: object) -> int:
    """A byte quantity, rounded up to a whole byte like Kubernetes' ``Value()``."""
    d = quantity_decimal(value)
    if d < 0:
        raise ValueError(f"negative quantity: {value!r}")
    return math.ceil(d)


def quantity_count(value: object) -> int:
    """A count such as CPUs (``2``, ``1500m`` -> 2), fractions rounded up."""
    return quantity_bytes(value)
