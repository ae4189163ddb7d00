"""The schedule decision at one moment: which run is due, how many were missed, when to look again.

This is steps 6-7 of the reconcile (:func:`most_recent_due`) and step 11
(:func:`requeue_after`). ``earliest`` is ``status.lastScheduleTime``, else the creation
time; ``startingDeadlineSeconds`` limits which schedule times may still start.

Missed times. :func:`most_recent_due` finds the newest unmet time with one reverse search
from ``now`` and counts missed times forward from ``earliest``, stopping at 101: the cost
does not grow with the downtime (``* * * * *`` after a year is about a hundred steps, not
half a million). The fall-back rule at that moment (``_times.once_per_wall_time``)
decides which second passes of a repeated hour count.

``@every <d>`` is a constant delay, not a wall-clock schedule: as in upstream, its times
are ``earliest + k*d`` (k >= 1) where ``earliest`` is ``status.lastScheduleTime``, else
the creation time, truncated to the second. Unlike upstream, the anchor is not moved to
``now - startingDeadlineSeconds`` (upstream does, so an @every job with a deadline shorter
than its period never runs); the deadline only limits which of those times may start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice, takewhile
from typing import Final

from cronjob_operator.schedule._grammar import Every
from cronjob_operator.schedule._times import Schedule, once_per_wall_time
from cronjob_operator.schedule._zones import add, as_utc, floor_second

MAX_MISSED: Final = 100
"""More missed times than this is ``TooManyMissedTimes`` (the newest one still runs)."""


@dataclass(frozen=True)
class Due:
    """What the schedule says at ``now`` (steps 6-7 of the reconcile)."""

    scheduled: datetime | None
    """The newest unmet schedule time to run now, or None."""
    missed: int
    """Schedule times in reach, (max(earliest, now - deadline), now], counted up to
    ``MAX_MISSED + 1``; ``scheduled`` is the newest of them."""
    too_many_missed: bool
    """``missed > MAX_MISSED``: record TooManyMissedTimes, and still run ``scheduled``."""
    next_time: datetime | None
    """The first schedule time strictly after ``now``; None if there is none."""
    latest: datetime | None = None
    """The newest schedule time at or before ``now``, met, missed or out of reach (None
    when there is none): the skip accounting has nothing to walk while its watermark is
    at or after it."""


def most_recent_due(
    schedule: Schedule,
    *,
    earliest: datetime,
    now: datetime,
    starting_deadline_seconds: int | None,
) -> Due:
    """Which run is due at ``now``.

    ``earliest`` is ``status.lastScheduleTime``, else the creation time. With a deadline,
    times at or before ``now - deadline`` are out of reach (so a deadline of 0 never starts
    anything) and are not counted as missed. Only the newest time in reach is returned;
    older ones are skipped.
    """
    earliest, now = as_utc(earliest, "earliest"), as_utc(now, "now")
    reach = reach_of(now, starting_deadline_seconds)
    lower = max(earliest, reach) if reach is not None else earliest
    rule = schedule._rule
    if isinstance(rule, Every):
        return _every_due(rule.delay, earliest, lower, now)
    twice = once_per_wall_time(rule, earliest, reach)
    latest = next(schedule._fires_at_or_before(now, twice), None)
    scheduled = latest if latest is not None and latest > lower else None
    missed = 0
    if scheduled is not None:
        in_window = takewhile(lambda t: t <= now, schedule._fires_after(lower, twice))
        missed = sum(1 for _ in islice(in_window, MAX_MISSED + 1))
    next_time = next(schedule._fires_after(now, twice), None)
    return Due(scheduled, missed, missed > MAX_MISSED, next_time, latest)


def reach_of(now: datetime, starting_deadline_seconds: int | None) -> datetime | None:
    """``now - startingDeadlineSeconds``: times at or before it are out of reach (None:
    no deadline, every time since ``earliest`` is in reach)."""
    if starting_deadline_seconds is None:
        return None
    if starting_deadline_seconds < 0:
        raise ValueError(f"starting_deadline_seconds must be >= 0, not {starting_deadline_seconds}")
    return add(now, -timedelta(seconds=min(starting_deadline_seconds, 10**13)))


def _every_due(delay: timedelta, earliest: datetime, lower: datetime, now: datetime) -> Due:
    """``@every``: the times are anchor + k*delay, k >= 1, anchored at ``earliest``."""
    anchor = floor_second(earliest)
    newest = (now - anchor) // delay  # k of the newest time at or before now
    first_in_reach = max(1, (lower - anchor) // delay + 1)
    missed = min(max(0, newest - first_in_reach + 1), MAX_MISSED + 1)
    scheduled = anchor + newest * delay if missed else None
    try:
        next_time: datetime | None = anchor + max(newest + 1, 1) * delay
    except OverflowError:
        next_time = None
    latest = anchor + newest * delay if newest >= 1 else None
    return Due(scheduled, missed, missed > MAX_MISSED, next_time, latest)


def requeue_after(
    due: Due, now: datetime, margin: timedelta = timedelta(milliseconds=100)
) -> timedelta | None:
    """How long to wait before looking again: until the next time, plus ``margin``."""
    if due.next_time is None:
        return None
    return due.next_time - as_utc(now, "now") + margin
