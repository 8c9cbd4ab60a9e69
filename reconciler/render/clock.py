"""Guest clock: ``<clock>`` offset and timers.

Input: ``domain.clock`` of the expanded spec. Output: the ``<clock>`` element, only
when the VM (or its preference) set a clock; libvirt's default (UTC) otherwise.
Pure. Timers: rtc, pit, kvm -> kvmclock, hpet, hyperv -> hypervclock, present
unless ``present: false``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.render.context import DOMAIN, RenderContext
from reconciler.render.xml import sub

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

# KubeVirt timer -> (libvirt timer name, allowed tick policies, has track)
TIMERS: tuple[tuple[str, str, tuple[str, ...], bool], ...] = (
    ("rtc", "rtc", ("delay", "catchup"), True),
    ("pit", "pit", ("delay", "catchup", "discard"), False),
    ("kvm", "kvmclock", (), False),
    ("hpet", "hpet", ("delay", "catchup", "merge", "discard"), False),
    ("hyperv", "hypervclock", (), False),
)


def render_clock(ctx: RenderContext, domain: ET.Element) -> None:
    where = f"{DOMAIN}.clock"
    clock = ctx.mapping(ctx.domain, "clock", DOMAIN)
    if clock is None:
        return
    ctx.known(clock, where, ("utc", "timezone", "timer"))
    utc = ctx.mapping(clock, "utc", where)
    tz = ctx.string(clock, "timezone", where)
    if utc is not None and tz:
        raise ctx.error(where, "utc and timezone cannot both be set")
    if tz:
        el = sub(domain, "clock", offset="timezone", timezone=tz)
    else:
        adjustment = None
        if utc is not None:
            ctx.known(utc, f"{where}.utc", ("offsetSeconds",))
            off = utc.get("offsetSeconds")
            if off is not None:
                if isinstance(off, bool) or not isinstance(off, int):
                    raise ctx.error(f"{where}.utc.offsetSeconds", "expected an integer")
                adjustment = str(off)
        el = sub(domain, "clock", offset="utc", adjustment=adjustment)
    timers = ctx.mapping(clock, "timer", where)
    if timers is None:
        return
    ctx.known(timers, f"{where}.timer", tuple(t[0] for t in TIMERS))
    for key, name, policies, has_track in TIMERS:
        t = ctx.mapping(timers, key, f"{where}.timer")
        if t is None:
            continue
        twhere = f"{where}.timer.{key}"
        keys = ["present"] + (["tickPolicy"] if policies else []) + (["track"] if has_track else [])
        ctx.known(t, twhere, keys)
        policy = ctx.string(t, "tickPolicy", twhere, policies) if policies else ""
        track = ctx.string(t, "track", twhere, ("guest", "wall")) if has_track else ""
        present = ctx.boolean(t, "present", twhere)
        sub(
            el,
            "timer",
            name=name,
            tickpolicy=policy or None,
            track=track or None,
            present="no" if present is False else "yes",
        )
