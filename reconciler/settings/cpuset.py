"""Cpusets as Linux and libvirt write them (``"0-3,8,10-11"``), read and written.

Input: cpuset text or CPU ids. Output: sorted CPU ids or the shortest text. Pure.
(the host config's ``dedicatedCpus`` is one; ``config.host`` reads it with ``parse_cpuset``.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable


def parse_cpuset(text: str, limit: int = 4096) -> tuple[int, ...]:
    """A cpuset as Linux and libvirt write it (``"0-3,8,10-11"``) -> sorted CPU ids."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"{text!r} is not a cpuset (e.g. 2-7,10)")
        lo, hi = int(first), int(last) if dash else int(first)
        if lo > hi or hi >= limit:
            raise ValueError(f"{part!r}: a range from a lower to a higher CPU below {limit}")
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def format_cpuset(cpus: Iterable[int]) -> str:
    """Sorted CPU ids -> the shortest cpuset text (``(0, 1, 2, 5)`` -> ``"0-2,5"``)."""
    out: list[str] = []
    ids = sorted(set(cpus))
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


__all__: list[str] = ["format_cpuset", "parse_cpuset"]
