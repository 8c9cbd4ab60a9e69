"""A preference's requirements (kubevirt-semantics §c.7): the CPU, memory and
architecture a VM must have for the preference to apply.

Input: the instancetype spec (or None), the preference spec and the template spec
after instancetype and defaults. Output: nothing, or ``PreferenceError`` naming the
field that falls short, worded as KubeVirt's admission words it. Pure: reads the specs,
never changes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.expand.topology import (
    ANY,
    CORES,
    CORES_THREADS,
    SOCKETS,
    SOCKETS_CORES,
    SPREAD,
    THREADS,
    TOPOLOGIES,
    PreferenceError,
    preferred_topology,
    spread_options,
)
from reconciler.expand.tree import dig
from reconciler.model import units

if TYPE_CHECKING:
    from fractions import Fraction

    from reconciler.model import Obj

REQUIREMENTS_PREFIX = "failure checking preference requirements: "
CPU_FIELD = ("spec", "template", "spec", "domain", "cpu")


# --- requirements (§c.7) --------------------------------------------------------------


def has_requirements(pref: Obj | None) -> bool:
    """Whether ``check_requirements`` has anything to check (the preference's ``requirements``)."""
    return isinstance((pref or {}).get("requirements"), dict)


def check_requirements(it: Obj | None, pref: Obj | None, spec: Obj, default_arch: str) -> None:
    """Raise PreferenceError when the VM (after instancetype + defaults) misses a requirement."""
    req = (pref or {}).get("requirements")
    if not isinstance(req, dict):
        return
    need_cpu = int(dig(req, "cpu", "guest") or 0)
    if dig(req, "cpu") is not None:
        _check_cpu(it, pref, spec, need_cpu)
    if dig(req, "memory") is not None and dig(req, "memory", "guest") is not None:
        _check_memory(it, spec, req["memory"]["guest"])
    arch = req.get("architecture")
    if arch is not None:
        have = spec.get("architecture") or default_arch
        if have != arch:
            raise PreferenceError(
                f"{REQUIREMENTS_PREFIX}preference requires architecture {arch} but {have} is being requested",
                ("spec", "template", "spec", "architecture"),
            )


def _check_cpu(it: Obj | None, pref: Obj | None, spec: Obj, need: int) -> None:
    if it is not None:
        have = int(dig(it, "cpu", "guest") or 0)
        if have < need:
            raise PreferenceError(
                f"{REQUIREMENTS_PREFIX}insufficient CPU resources of {have} vCPU provided by instance type, "
                f"preference requires {need} vCPU",
                ("spec", "instancetype"),
            )
        return
    cpu = dig(spec, "domain", "cpu")
    if cpu is None:
        raise PreferenceError(
            f"{REQUIREMENTS_PREFIX}no CPU resources provided by VirtualMachine, preference requires {need} vCPU",
            CPU_FIELD,
        )
    sockets, cores, threads = (int(cpu.get(k) or 0) for k in ("sockets", "cores", "threads"))
    topology = TOPOLOGIES.get(preferred_topology(pref))
    if topology == THREADS:
        have, what = threads, "threads"
    elif topology == CORES:
        have, what = cores, "cores"
    elif topology == SOCKETS:
        have, what = sockets, "sockets"
    elif topology == ANY:
        have, what = cores * sockets * threads, "cores, sockets and threads"
    elif topology == SPREAD:
        _, what = spread_options(pref)
        if what == SOCKETS_CORES:
            have = sockets * cores
        elif what == CORES_THREADS:
            have = cores * threads
        else:
            have = sockets * cores * threads
    else:
        return
    if have < need:
        raise PreferenceError(
            f"{REQUIREMENTS_PREFIX}insufficient CPU resources of {have} vCPU provided by VirtualMachine, "
            f"preference requires {need} vCPU provided as {what}",
            CPU_FIELD,
        )


def _amount(value: object, what: str, field: tuple[str, ...]) -> Fraction:
    """A quantity's amount; one that is not a quantity is a rule error at ``field``."""
    try:
        return units.quantity_value(value)
    except units.QuantityError as err:
        raise PreferenceError(f"{what}: {err}", field) from err


def _check_memory(it: Obj | None, spec: Obj, need: object) -> None:
    need_bytes = _amount(need, "requirements.memory.guest of the preference", ("spec", "preference"))
    if it is not None:
        have = dig(it, "memory", "guest")
        if (
            have is not None
            and _amount(have, "instancetype memory.guest", ("spec", "instancetype")) < need_bytes
        ):
            raise PreferenceError(
                f"{REQUIREMENTS_PREFIX}insufficient Memory resources of {units.normalized(have)} provided by "
                f"instance type, preference requires {units.normalized(need)}",
                ("spec", "instancetype"),
            )
        return
    memory = dig(spec, "domain", "memory")
    if memory is None:
        return
    have = memory.get("guest")
    field = ("spec", "template", "spec", "domain", "memory")
    have_bytes = (
        _amount(have, "spec.template.spec.domain.memory.guest", (*field, "guest")) if have is not None else 0
    )
    if have_bytes < need_bytes:
        shown = units.normalized(have) if have is not None else "0"
        raise PreferenceError(
            f"{REQUIREMENTS_PREFIX}insufficient Memory resources of {shown} provided by VirtualMachine, "
            f"preference requires {units.normalized(need)}",
            field,
        )


__all__ = ["check_requirements"]
