"""A preference's CPU topology: how a number of vCPUs becomes sockets, cores and threads
(kubevirt-semantics §c.2), and the admission checks of that topology (§c.2.4).

Input: a preference spec (and an instancetype's for the spread check). Output: the
topology name as written, the spread options, ``(sockets, cores, threads)`` for a vCPU
count, the deprecation warnings of a preference, or ``PreferenceError`` for a topology
KubeVirt's admission refuses. Pure: never touches the specs it is given.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from reconciler.expand.tree import RuleError, dig

if TYPE_CHECKING:
    from reconciler.model import Obj

SOCKETS, CORES, THREADS, SPREAD, ANY = "sockets", "cores", "threads", "spread", "any"
TOPOLOGIES = MappingProxyType(
    {
        SOCKETS: SOCKETS,
        "preferSockets": SOCKETS,
        CORES: CORES,
        "preferCores": CORES,
        THREADS: THREADS,
        "preferThreads": THREADS,
        SPREAD: SPREAD,
        "preferSpread": SPREAD,
        ANY: ANY,
        "preferAny": ANY,
    }
)
DEPRECATED_TOPOLOGIES = frozenset(
    {"preferSockets", "preferCores", "preferThreads", "preferSpread", "preferAny"}
)
SOCKETS_CORES, CORES_THREADS, SOCKETS_CORES_THREADS = "SocketsCores", "CoresThreads", "SocketsCoresThreads"
ACROSS = (SOCKETS_CORES, CORES_THREADS, SOCKETS_CORES_THREADS)


class PreferenceError(RuleError):
    """A preference rule rejects the VM."""


# --- CPU topology -------------------------------------------------------------------


def preferred_topology(pref: Obj | None) -> str:
    """The topology name as written (``sockets`` when absent)."""
    value = dig(pref, "cpu", "preferredCPUTopology")
    return str(value) if value else SOCKETS


def spread_options(pref: Obj | None) -> tuple[int, str]:
    ratio = 2
    if pref and pref.get("preferSpreadSocketToCoreRatio"):
        ratio = int(pref["preferSpreadSocketToCoreRatio"])
    across = SOCKETS_CORES
    options = dig(pref, "cpu", "spreadOptions")
    if isinstance(options, dict):
        if options.get("across") is not None:
            across = str(options["across"])
        if options.get("ratio") is not None:
            ratio = int(options["ratio"])
    return ratio, across


def guest_topology(vcpus: int, pref: Obj | None) -> tuple[int, int, int]:
    """(sockets, cores, threads) for ``vcpus`` under the preference's topology (§c.2)."""
    sockets = cores = threads = 1
    if vcpus == 1:
        return sockets, cores, threads
    topology = TOPOLOGIES.get(preferred_topology(pref))
    if topology == CORES:
        cores = vcpus
    elif topology in (SOCKETS, ANY):
        sockets = vcpus
    elif topology == THREADS:
        threads = vcpus
    elif topology == SPREAD:
        ratio, across = spread_options(pref)
        ratio = ratio or 1
        if across == SOCKETS_CORES:
            cores, sockets = ratio, vcpus // ratio
        elif across == CORES_THREADS:
            threads, cores = ratio, vcpus // ratio
        elif across == SOCKETS_CORES_THREADS:
            threads, cores, sockets = 2, ratio, vcpus // 2 // ratio
    return sockets, cores, threads


def validate_preference(pref: Obj) -> list[str]:
    """Preference admission (§c.2.4): raises on an invalid topology; returns deprecation warnings."""
    warnings = []
    value = dig(pref, "cpu", "preferredCPUTopology")
    if value:
        if value not in TOPOLOGIES:
            raise PreferenceError(f"unknown preferredCPUTopology {value}")
        if value in DEPRECATED_TOPOLOGIES:
            warnings.append(
                f"PreferredCPUTopology {value} is deprecated for removal in a future release, "
                f"please use {TOPOLOGIES[value]} instead"
            )
        if TOPOLOGIES[value] == SPREAD:
            ratio, across = spread_options(pref)
            if across not in ACROSS:
                raise PreferenceError(f"across {across} is not supported")
            if across == CORES_THREADS and ratio != 2:
                raise PreferenceError(
                    "only a ratio of 2 (1 core 2 threads) is allowed when spreading vCPUs over cores and threads"
                )
            if ratio <= 0:
                raise PreferenceError(f"spread ratio {ratio} must be positive")
    return warnings


def check_spread(it: Obj | None, pref: Obj | None) -> None:
    """VM admission: the instancetype's vCPUs must divide by the spread ratio (§c.2.4)."""
    if it is None or pref is None or TOPOLOGIES.get(preferred_topology(pref)) != SPREAD:
        return
    guest = int(dig(it, "cpu", "guest") or 0)
    ratio, across = spread_options(pref)
    if ratio <= 0:
        raise PreferenceError(f"spread ratio {ratio} must be positive")
    if across == SOCKETS_CORES and guest % ratio != 0:
        raise PreferenceError(
            f"{guest} vCPUs provided by the instance type are not divisible by the "
            f"Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of {ratio} provided by the preference"
        )
    if across == CORES_THREADS and guest % ratio != 0:
        raise PreferenceError(
            f"{guest} vCPUs provided by the instance type are not divisible by the number of threads per core {ratio}"
        )
    if across == SOCKETS_CORES_THREADS and (guest % 2 != 0 or (guest // 2) % ratio != 0):
        raise PreferenceError(
            f"{guest} vCPUs provided by the instance type are not divisible by the number of threads per core 2 "
            f"and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of {ratio}"
        )


__all__ = ["PreferenceError", "check_spread", "guest_topology", "validate_preference"]
