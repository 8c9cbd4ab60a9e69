"""Units: Kubernetes quantities, libvirt memory units, durations, and sizes in words.

Input: a quantity, a size with its libvirt unit, or a duration, as written in YAML, in
a config file or in domain XML. Output: exact numbers (``Fraction``, ``int`` bytes or
KiB, ``float`` seconds) and canonical text. Pure. Anything that is not of its grammar
is a ``ValueError`` (``QuantityError`` for quantities) saying what was read; the caller
adds the file, line and field. The one place each of these grammars is read:

- a *quantity* is Kubernetes' ``resource.Quantity``: ``<number><suffix>`` with a
  binary suffix (``Ki`` .. ``Ei``), a decimal one (``n``, ``u``, ``m``, ``k``, ``M`` ..
  ``E``) or a decimal exponent (``1.5e3``), never two of them (``1e3Ki`` is refused, as
  the API server refuses it); a YAML integer or float is its number (``1.5`` is
  ``1500m``); a boolean, NaN or infinity is no quantity;
- a *libvirt memory unit* is what ``<memory unit=...>`` accepts (``virScaleInteger``):
  ``b``/``byte``/``bytes``; ``k``, ``KiB`` (1024) and ``KB`` (1000), likewise for
  ``M``, ``G``, ``T``, ``P``, ``E``; any case; no unit is KiB. libvirt keeps memory in
  KiB rounded up, and so does ``memory_kib``;
- a *duration* is a number of seconds or ``<number><unit>`` with ``ms``, ``s``, ``m``,
  ``h`` or ``d`` (``500ms``, ``30s``, ``5m``, ``2h``, ``1d``), finite and not negative;
  ``positive_duration`` bounds it further (at most ``MAX_DURATION_S``, a year, and at
  least the minimum its caller gives);
- an *instant* (seconds since the epoch) is written ``2024-05-01T12:00:00Z`` (UTC).
"""

from __future__ import annotations

import math
import re
import time
from fractions import Fraction
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

# -- Kubernetes quantities -------------------------------------------------------------

BINARY = MappingProxyType({"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6})  # suffix -> power of 1024
DECIMAL = MappingProxyType(
    {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
)
_DECIMAL_SUFFIX = MappingProxyType({v: k for k, v in DECIMAL.items()})
_BINARY_SUFFIX = MappingProxyType({v: k for k, v in BINARY.items()})

FORMAT_BINARY = "BinarySI"
FORMAT_DECIMAL = "DecimalSI"
FORMAT_EXPONENT = "DecimalExponent"

_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?:(?P<whole>[0-9]+)(?:\.(?P<frac>[0-9]*))?|\.(?P<only>[0-9]+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exp>[+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))"
)
# An exponent followed by a suffix: read by some parsers, refused by Kubernetes.
_EXPONENT_AND_SUFFIX = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][+-]?[0-9]+[A-Za-z]+")
# A decimal exponent beyond this is no amount anything here holds (2^63 < 10^19), and
# 10**exponent of a hostile one would never finish.
MAX_EXPONENT = 100
# suffix -> (numerator, denominator) of its factor
_SCALE: Mapping[str, tuple[int, int]] = MappingProxyType(
    {
        **{s: (1024**p, 1) for s, p in BINARY.items()},
        **{s: (10**p, 1) if p >= 0 else (1, 10**-p) for s, p in DECIMAL.items()},
    }
)


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def _refuse(value: object, why: str = "") -> QuantityError:
    hint = f" ({why})" if why else " (<number><suffix>, e.g. 4Gi, 512M, 1.5, 100m)"
    return QuantityError(f"not a quantity: {_shown(value)}{hint}")


def _ratio(value: object) -> tuple[int, int, str]:
    """``(numerator, denominator, format)`` of a quantity, in integers (fast: render reads
    a few per VM); the denominator is positive, not necessarily reduced."""
    if isinstance(value, bool):
        raise _refuse(value)
    if isinstance(value, int):
        return value, 1, FORMAT_DECIMAL
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _refuse(value, "not a finite number")
        f = Fraction(str(value))
        return f.numerator, f.denominator, FORMAT_DECIMAL
    if not isinstance(value, str):
        raise _refuse(value)
    text = value.strip()  # as Kubernetes' UnmarshalJSON
    m = _QUANTITY.fullmatch(text)
    if m is None:
        if _EXPONENT_AND_SUFFIX.fullmatch(text):
            raise _refuse(value, "an exponent and a suffix cannot be combined")
        raise _refuse(value)
    whole, frac, only, binary, exp, dec = m.group("whole", "frac", "only", "bin", "exp", "dec")
    digits = f"{whole}{frac or ''}" if whole is not None else only
    try:
        n = int(digits)
    except ValueError as err:  # more digits than Python reads
        raise _refuse(value, "too many digits") from err
    d = 10 ** len(frac or only or "")
    if m.group("sign") == "-":
        n = -n
    if exp is not None:
        e = int(exp)
        if abs(e) > MAX_EXPONENT:
            raise _refuse(value, f"an exponent beyond ±{MAX_EXPONENT}")
        if e >= 0:
            return n * 10**e, d, FORMAT_EXPONENT
        return n, d * 10**-e, FORMAT_EXPONENT
    num, den = _SCALE[binary or dec or ""]
    return n * num, d * den, FORMAT_BINARY if binary else FORMAT_DECIMAL


def parse_quantity(value: object) -> tuple[Fraction, str]:
    """``"1.5Gi"`` -> ``(1610612736, "BinarySI")``: the exact amount and the format Kubernetes
    keeps for it. YAML integers and floats are DecimalSI."""
    n, d, fmt = _ratio(value)
    return Fraction(n, d), fmt


def quantity_value(value: object) -> Fraction:
    """The exact amount of a quantity."""
    return parse_quantity(value)[0]


def is_quantity(value: object) -> bool:
    try:
        _ratio(value)
    except QuantityError:
        return False
    return True


def quantity_ceil(value: object) -> int:
    """The amount rounded up to an integer, like ``Quantity.Value()``."""
    n, d, _ = _ratio(value)
    return -(-n // d)


def quantity_bytes(value: object) -> int:
    """A size in bytes, rounded up to a whole byte; never negative."""
    n, d, _ = _ratio(value)
    if n < 0:
        raise QuantityError(f"negative quantity: {value!r}")
    return -(-n // d)


def quantity_count(value: object) -> int:
    """A count such as CPUs (``2``, ``1500m`` -> 2), fractions rounded up; never negative."""
    return quantity_bytes(value)


def canonical(amount: Fraction | int, fmt: str = FORMAT_DECIMAL) -> str:
    """Kubernetes' canonical text for ``amount`` in format ``fmt`` (``Quantity.String()``)."""
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
        mantissa = Fraction(math.ceil(mantissa))
    n = int(mantissa)
    while n % 1000 == 0 and exp < 18:
        n //= 1000
        exp += 3
    if fmt == FORMAT_EXPONENT:
        return f"{n}e{exp}" if exp else str(n)
    return f"{n}{_DECIMAL_SUFFIX[exp]}"


def normalized(value: object) -> str:
    """The canonical text of a quantity as written (``"2048Mi"`` -> ``"2Gi"``)."""
    amount, fmt = parse_quantity(value)
    return canonical(amount, fmt)


# -- sizes in words --------------------------------------------------------------------

_SIZE_SUFFIXES = (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024))


def format_bytes(n: int) -> str:
    """``4294967296`` -> ``4Gi``: the largest binary suffix that divides ``n`` (``0`` and
    sizes below 1Ki as plain bytes)."""
    for suffix, factor in _SIZE_SUFFIXES:
        if n and n % factor == 0:
            return f"{n // factor}{suffix}"
    return str(n)


# -- libvirt memory units --------------------------------------------------------------


def _libvirt_units() -> dict[str, int]:
    units = {"b": 1, "byte": 1, "bytes": 1}
    for power, prefix in enumerate("kmgtpe", start=1):
        units[prefix] = units[f"{prefix}ib"] = 1024**power
        units[f"{prefix}b"] = 1000**power
    return units


# lower-case unit -> bytes, as libvirt's virScaleInteger reads ``unit=`` (any case)
LIBVIRT_MEMORY_UNITS: Mapping[str, int] = MappingProxyType(_libvirt_units())


def memory_bytes(value: str | int, unit: str | None) -> int:
    """A libvirt size in bytes: ``("4", "GiB")`` -> 4294967296; no unit is KiB."""
    scale = LIBVIRT_MEMORY_UNITS.get((unit or "KiB").lower())
    if scale is None:
        raise ValueError(f"unknown memory unit {unit!r}")
    try:
        number = int(str(value).strip())
    except ValueError as err:
        raise ValueError(f"not a size: {value!r}") from err
    if number < 0:
        raise ValueError(f"negative size: {value!r}")
    return number * scale


def memory_kib(value: str | int, unit: str | None) -> int:
    """A libvirt size in KiB, rounded up as libvirt stores it (``1000000000 b`` -> 976563)."""
    return -(-memory_bytes(value, unit) // 1024)


# -- durations -------------------------------------------------------------------------

DURATION_UNITS: Mapping[str, float] = MappingProxyType(
    {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
)
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*")
DURATION_EXAMPLES = "e.g. 30s, 5m, 2h"
MAX_DURATION_S = 366 * 86400.0  # a year: any interval or window of this project is shorter


def parse_duration(value: object) -> float:
    """Seconds: a number (of seconds) or ``<number><unit>`` text; finite, not negative."""
    seconds: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value) if not isinstance(value, int) or abs(value) < 10**300 else math.inf
    elif isinstance(value, str) and (m := _DURATION.fullmatch(value)):
        seconds = float(m.group(1)) * DURATION_UNITS[m.group(2) or "s"]
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{_shown(value)} is not a duration ({DURATION_EXAMPLES})")
    return seconds


def positive_duration(value: object, minimum: float = 0.0, maximum: float = MAX_DURATION_S) -> float:
    """``parse_duration``, more than zero, and from ``minimum`` to ``maximum`` seconds (a
    daemon interval of ``1ms`` would reconcile without pause, one of ``1e300`` never)."""
    try:
        seconds = parse_duration(value)
    except ValueError:
        seconds = 0.0
    if seconds <= 0:
        raise ValueError(f"{_shown(value)} is not a positive duration ({DURATION_EXAMPLES})")
    if seconds < minimum:
        raise ValueError(f"{_shown(value)} is shorter than the {format_duration(minimum)} allowed here")
    if seconds > maximum:
        raise ValueError(f"{_shown(value)} is longer than the {format_duration(maximum)} allowed here")
    return seconds


def _shown(value: object) -> str:
    """A value as an error shows it: ``repr``, at most 40 characters."""
    if isinstance(value, int) and abs(value) >= 10**40:  # repr of 5000 digits raises
        return "a number of more than 40 digits"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def format_duration(seconds: float) -> str:
    """``7200`` -> ``2h``: the largest of d, h, m that divides, else seconds."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def utc_iso(seconds: float) -> str:
    """``1714564800`` -> ``2024-05-01T12:00:00Z``; ``0`` (not known) -> ``""``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds)) if seconds else ""
