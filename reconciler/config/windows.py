"""Restart windows: when a restart-class change may restart a running VM.

Input: windows (a cron schedule, a duration, a time zone), the current time (passed
in: the plan stays pure). Output: whether a window is open now, and when the next one
opens. Pure; cron parsing is croniter's, time zones are ``zoneinfo``'s.

Windows come from the daemon's ``policy.restartWindows`` (every VM of every host) or
from a VM's annotation ``reconciler.kubevirt.io/restart-window: "SCHEDULE; DURATION[;
TIME ZONE]"``, which replaces the policy's for that VM. A window opens at each time the
schedule names and stays open for the duration. Under rollout ``Restart`` a
restart-class change on a running VM waits for the next window (status, plan and PR
diff say when); live changes apply at once. ``reconciler apply --restart-now`` or the
annotation value ``now`` restarts at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from reconciler.model import RestartWindow
from reconciler.model import annotation_names as vm_annotations
from reconciler.model.units import format_duration, positive_duration

if TYPE_CHECKING:
    from collections.abc import Sequence


ANNOTATION = vm_annotations.RESTART_WINDOW
NOW = "now"


def _cron() -> Any:
    """croniter, imported when a window is first read (most hosts configure none)."""
    from croniter import croniter

    return croniter


def window(schedule: str, duration: str | float, time_zone: str = "UTC") -> RestartWindow:
    """A checked window; ValueError names what is wrong."""
    if len(str(schedule).split()) != 5 or not _cron().is_valid(str(schedule)):
        raise ValueError(f"{schedule!r} is not a cron schedule (minute hour day month weekday)")
    seconds = positive_duration(duration)
    try:
        ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ValueError(f"{time_zone!r} is not a time zone (e.g. UTC, Europe/Berlin)") from err
    return RestartWindow(schedule, seconds, time_zone)


def parse_annotation(value: str) -> RestartWindow:
    """``"SCHEDULE; DURATION[; TIME ZONE]"``."""
    parts = [p.strip() for p in str(value).split(";")]
    if len(parts) not in (2, 3):
        raise ValueError(f'{value!r}: expected "SCHEDULE; DURATION[; TIME ZONE]", e.g. "0 2 * * 6; 2h; UTC"')
    return window(parts[0], parts[1], parts[2] if len(parts) == 3 else "UTC")


def _local(w: RestartWindow, now: float) -> datetime:
    return datetime.fromtimestamp(now, ZoneInfo(w.time_zone))


def is_open(w: RestartWindow, now: float) -> bool:
    """The window opened at most ``duration`` ago (an opening exactly now counts)."""
    local = _local(w, now)
    if _cron().match(w.schedule, local.replace(second=0, microsecond=0)) and local.second == 0:
        return True
    last = _cron()(w.schedule, local).get_prev(datetime)
    return bool(now - last.timestamp() < w.duration_s)


def next_open(w: RestartWindow, now: float) -> float:
    return float(_cron()(w.schedule, _local(w, now)).get_next(datetime).timestamp())


@dataclass(frozen=True, slots=True)
class Gate:
    open: bool
    opens_at: float | None = None  # epoch seconds of the next opening (None: now unknown)
    text: str = ""  # "2026-11-25 02:00 Europe/Berlin" or the schedule when the time is unknown


def describe(w: RestartWindow) -> str:
    return f"{w.schedule} ({w.time_zone}) for {format_duration(w.duration_s)}"


def gate(windows: Sequence[RestartWindow], now: float | None) -> Gate:
    """Open when any window is open at ``now``; else when the next one opens."""
    if not windows:
        return Gate(True)
    if now is None:  # no clock (PR diff): name the windows
        return Gate(False, None, "; ".join(describe(w) for w in windows))
    if any(is_open(w, now) for w in windows):
        return Gate(True)
    soonest = min(windows, key=lambda w: next_open(w, now))
    at = next_open(soonest, now)
    local = datetime.fromtimestamp(at, ZoneInfo(soonest.time_zone))
    return Gate(False, at, f"{local:%Y-%m-%d %H:%M} {soonest.time_zone}")


__all__ = [
    "ANNOTATION",
    "NOW",
    "Gate",
    "describe",
    "gate",
    "is_open",
    "next_open",
    "parse_annotation",
    "window",
]
