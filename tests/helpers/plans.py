"""Domains for pure plan tests: a rendered domain of hand-written XML, the live domain a
host that applied it holds, and one change of a plan.

Input: names, XML, states, marks. Output: ``rendered``, ``live_of``, ``one`` and the
revision ``REV`` they are planned at. Pure.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from reconciler import ownership
from reconciler.model import LiveDomain, OwnershipMark, PowerState, RenderedDomain, RunStrategy, VMKey
from reconciler.model.problems import Problem
from reconciler.model.reasons import ChangeReason, Why

if TYPE_CHECKING:
    from reconciler.model.changes import Change, Plan

REV = "0123456789abcdef0123456789abcdef01234567"


def rendered(
    name: str, text: str, strategy: RunStrategy = RunStrategy.ALWAYS, **kw: object
) -> RenderedDomain:
    return RenderedDomain(
        key=VMKey.from_domain(name),
        uuid="",
        xml_data=text,
        spec_hash=hashlib.sha256(text.encode()).hexdigest(),
        run_strategy=strategy,
        source_path=f"vms/{name}.yaml",
        **kw,  # type: ignore[arg-type]
    )


def live_of(
    d: RenderedDomain,
    persistent: str | None = None,
    state: PowerState = PowerState.RUNNING,
    running: str | None = None,
    mark: OwnershipMark | None = None,
) -> LiveDomain:
    """The domain as a host that applied ``d`` holds it (``persistent``/``running``
    differ when drifted; ``mark`` replaces the one ``d`` would carry)."""
    m = mark if mark is not None else ownership.mark_for(d, "f" * 40)
    text = persistent if persistent is not None else d.xml
    active = state in (PowerState.RUNNING, PowerState.PAUSED)
    return LiveDomain(
        name=d.name,
        uuid="",
        state=state,
        persistent_xml=ownership.with_mark(text, m),
        live_xml=(running if running is not None else text) if active else "",
        mark=m,
    )


def one(plan: Plan, name: str) -> Change:
    (c,) = [c for c in plan.changes if c.name == name]
    return c


def because(text: str) -> tuple[ChangeReason, ...]:
    """A change's reasons for a test that names its own: one problem, its message said as it is."""
    return (ChangeReason(Why.PROBLEM, problem=Problem(text)),)
