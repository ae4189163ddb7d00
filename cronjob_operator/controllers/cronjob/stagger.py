"""Stagger: a CronJob's fixed offset from its nominal times, and when a stagger is refused.

``stagger_offset`` is a fixed offset in ``[0, staggerSeconds]`` from a hash of the
CronJob's namespace and name (stable across restarts, replicas and a re-create): a
nominal time t is due at t + offset. ``stagger_problem`` rejects a stagger that is not
below the schedule's shortest gap (the webhook and the decision both ask).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo

from cronjob_operator import schedule as schedules
from cronjob_operator.api.batch_v1 import MAX_STAGGER_SECONDS

__all__ = ["GAP_SCAN_LIMIT", "STAGGER_FIELD", "shortest_gap", "stagger_offset", "stagger_problem"]

STAGGER_FIELD: Final = "spec.staggerSeconds"

GAP_SCAN_LIMIT: Final = 1000
"""How many consecutive schedule times ``shortest_gap`` looks at from its start."""

_GAP_SCAN_START: Final = datetime(2025, 1, 1, tzinfo=UTC)

_GAP_SCAN_SPAN: Final = timedelta(days=400)  # a year of DST transitions, and then some

_SMALLEST_CRON_GAP: Final = timedelta(minutes=1)


def stagger_offset(namespace: str, name: str, stagger_seconds: int) -> timedelta:
    """The CronJob's fixed offset in ``[0, stagger_seconds]`` seconds."""
    if stagger_seconds <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return timedelta(seconds=int.from_bytes(digest[:8], "big") % (stagger_seconds + 1))


@functools.lru_cache(maxsize=1024)
def shortest_gap(schedule: schedules.AnySchedule) -> timedelta | None:
    """The shortest time between consecutive runs of ``schedule`` in its time zone.

    Looks at the first ``GAP_SCAN_LIMIT`` times from 2025-01-01 and at the times around
    each DST transition of the following 400 days (a spring-forward day can bring two runs
    an hour closer). Only gaps up to the largest stagger matter, and those are between
    runs less than an hour apart, which a few days of runs show. None when it fires at
    most once in that span. Cached: the webhook and every reconcile ask again.
    """
    starts = [_GAP_SCAN_START, *_transitions(schedule.zone)]
    gaps = (
        gap
        for start in starts
        for gap in _gaps(schedule, start, GAP_SCAN_LIMIT if start == starts[0] else 100)
    )
    shortest: timedelta | None = None
    for gap in gaps:
        if shortest is None or gap < shortest:
            shortest = gap
            if shortest <= _SMALLEST_CRON_GAP:
                break
    return shortest


def _gaps(schedule: schedules.AnySchedule, start: datetime, limit: int) -> Iterator[timedelta]:
    end = start + _GAP_SCAN_SPAN
    times = itertools.takewhile(lambda t: t <= end, schedule.times_after(start))
    previous: datetime | None = None
    for moment in itertools.islice(times, limit + 1):
        if previous is not None:
            yield moment - previous
        previous = moment


def _transitions(zone: ZoneInfo) -> list[datetime]:
    """A day before each UTC offset change of ``zone`` in the scanned span."""
    days = [_GAP_SCAN_START + timedelta(days=n) for n in range(_GAP_SCAN_SPAN.days + 1)]
    offsets = [day.astimezone(zone).utcoffset() for day in days]
    return [
        days[n - 1] - timedelta(days=1) for n in range(1, len(days)) if offsets[n] != offsets[n - 1]
    ]


def stagger_problem(schedule: schedules.AnySchedule | None, stagger_seconds: int) -> str | None:
    """Why ``stagger_seconds`` cannot be used with ``schedule`` (None if it can): the
    detail, after ``spec.staggerSeconds: <value>:`` (``STAGGER_FIELD``). Without a
    schedule (it is invalid, and reported as such) only the range is checked."""
    if stagger_seconds < 0 or stagger_seconds > MAX_STAGGER_SECONDS:
        return f"must be between 0 and {MAX_STAGGER_SECONDS} seconds"
    if schedule is None:
        return None
    gap = shortest_gap(schedule)
    if gap is None or stagger_seconds < gap.total_seconds():
        return None
    seconds = int(gap.total_seconds())
    return (
        f"must be smaller than the shortest gap between two runs of {schedule.expression!r} "
        f"({seconds} seconds), or runs could swap or merge; use at most {seconds - 1}"
    )
