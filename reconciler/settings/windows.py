"""Restart windows: when a restart-class change may restart a running VM.

Input: windows (a cron schedule, a duration, a time zone), the current time (passed
in: the plan stays pure). A schedule must open at least once a year (``0 0 31 2 *``
never does, ``0 0 29 2 *`` once in four years: both refused), a duration is from a
minute to a year, a time zone is a name of the tz database (never a path, never one of
its directories such as ``America``). Output: whether a window is open now, and when the next one
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

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from reconciler.model import RestartWindow
from reconciler.model import annotation_names as vm_annotations
from reconciler.model.units import format_duration, positive_duration
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import tzinfo


ANNOTATION = vm_annotations.RESTART_WINDOW
NOW = "now"
MIN_WINDOW_S = 60.0  # a window shorter than cron's one-minute step may never be seen open


def _cron() -> Any:
    """croniter, imported when a window is first read (most hosts configure none)."""
    from croniter import croniter

    return croniter


# A time zone is a name of the tz database: ``Area/Location`` words, never a path.
_TZ_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+-]{0,30}(?:/[A-Za-z0-9_+-]{1,30}){0,2}")
# A schedule must open within a year of any instant: checked from this one (1 March after
# a leap day, so ``0 0 29 2 *``, open once in four years, is refused too).
_SCHEDULE_CHECKED_FROM = 1740787200.0  # 2025-03-01T00:00:00Z


class WindowError(ValueError):
    """A window that is not one; ``key``: the setting at fault (schedule, duration, timeZone)."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


def window(schedule: str, duration: str | float, time_zone: str = "UTC") -> RestartWindow:
    """A checked window; ``WindowError`` (a ValueError) says what is wrong, and in
    ``key`` which of ``schedule``, ``duration`` or ``timeZone`` it is about."""
    cron = _cron()
    text = str(schedule)
    if len(text) > 200 or len(text.split()) != 5 or not cron.is_valid(text):
        raise WindowError(
            f"{_shown(schedule)} is not a cron schedule (minute hour day month weekday)", "schedule"
        )
    try:
        cron(text, datetime.fromtimestamp(_SCHEDULE_CHECKED_FROM, UTC), max_years_between_matches=1).get_next(
            datetime
        )
    except ValueError as err:  # croniter's CroniterBadDateError
        raise WindowError(
            f"{_shown(schedule)} is a cron schedule that does not open every year (a window that never opens "
            "would hold restarts forever)",
            "schedule",
        ) from err
    try:
        seconds = positive_duration(duration, MIN_WINDOW_S)
    except ValueError as err:
        raise WindowError(str(err), "duration") from err
    zone = str(time_zone)
    if not _TZ_NAME.fullmatch(zone) or any(part in ("posixrules", "Factory") for part in zone.split("/")):
        raise WindowError(f"{_shown(time_zone)} is not a time zone (e.g. UTC, Europe/Berlin)", "timeZone")
    from zoneinfo import ZoneInfoNotFoundError

    try:
        _zone(zone)
    except (ZoneInfoNotFoundError, ValueError, OSError) as err:  # OSError: a tzdata directory
        raise WindowError(
            f"{_shown(time_zone)} is not a time zone (e.g. UTC, Europe/Berlin)", "timeZone"
        ) from err
    return RestartWindow(text, seconds, zone)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def parse_annotation(value: str) -> RestartWindow:
    """``"SCHEDULE; DURATION[; TIME ZONE]"``."""
    parts = [p.strip() for p in str(value).split(";")]
    if len(parts) not in (2, 3):
        raise ValueError(f'{value!r}: expected "SCHEDULE; DURATION[; TIME ZONE]", e.g. "0 2 * * 6; 2h; UTC"')
    return window(parts[0], parts[1], parts[2] if len(parts) == 3 else "UTC")


def _zone(name: str) -> tzinfo:
    """``zoneinfo.ZoneInfo(name)``, imported on first use (most runs read no window)."""
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def _local(w: RestartWindow, now: float) -> datetime:
    return datetime.fromtimestamp(now, _zone(w.time_zone))


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
    local = datetime.fromtimestamp(at, _zone(soonest.time_zone))
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
