"""Every missed time, not just the newest: catch-up ``All`` and the skip accounting walk.

:func:`most_recent_due` answers the built-in's question (the newest unmet time). Two
features need the times themselves:

* ``spec.catchUpPolicy: All`` runs every missed time in reach, oldest first.
  :func:`missed_times` returns them, at most ``limit`` (``MAX_MISSED``), found by one
  reverse search from ``now``: the newest ``limit`` times in reach, so the cost does not
  grow with the downtime; anything older is beyond the bound.
* Skip accounting walks the times after a watermark in order to classify each once
  (ran, still to run, or skipped for a reason). :func:`times_between` yields them
  ascending, at most ``limit`` per call, so a year of ``* * * * *`` is walked in bounded
  steps across reconciles rather than in one.

Both use the same notion of reach as :func:`most_recent_due` (``earliest``, the deadline,
the fall-back rule at that moment) so the three never disagree about which times exist.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from itertools import islice, takewhile
from typing import Protocol

from cronjob_operator.schedule._due import MAX_MISSED, reach_of
from cronjob_operator.schedule._grammar import Every
from cronjob_operator.schedule._times import Schedule, once_per_wall_time
from cronjob_operator.schedule._zones import as_utc, floor_second


def missed_times(
    schedule: Schedule,
    *,
    earliest: datetime,
    now: datetime,
    starting_deadline_seconds: int | None,
    limit: int = MAX_MISSED,
) -> tuple[datetime, ...]:
    """The unmet times in reach, oldest first: (max(earliest, now - deadline), now], at
    most the newest ``limit`` of them. Empty when none is in reach.

    The newest of them is :func:`most_recent_due`'s ``scheduled``; ``Latest`` runs only
    that one, ``All`` runs them all in this order.
    """
    earliest, now = as_utc(earliest, "earliest"), as_utc(now, "now")
    if limit < 1:
        raise ValueError(f"limit must be >= 1, not {limit}")
    reach = reach_of(now, starting_deadline_seconds)
    lower = max(earliest, reach) if reach is not None else earliest
    rule = schedule._rule
    if isinstance(rule, Every):
        return _every_missed(rule.delay, earliest, lower, now, limit)
    twice = once_per_wall_time(rule, earliest, reach)
    newest_first = takewhile(lambda t: t > lower, schedule._fires_at_or_before(now, twice))
    return tuple(reversed(list(islice(newest_first, limit))))


def _every_missed(
    delay: timedelta, earliest: datetime, lower: datetime, now: datetime, limit: int
) -> tuple[datetime, ...]:
    """``@every``: anchor + k*delay for the k in reach, anchored at ``earliest``."""
    anchor = floor_second(earliest)
    newest = (now - anchor) // delay
    first = max(1, (lower - anchor) // delay + 1, newest - limit + 1)
    return tuple(anchor + k * delay for k in range(first, newest + 1))


class Timed(Protocol):
    """Anything with schedule times: a :class:`Schedule`, or a union of them."""

    def times_after(self, t: datetime) -> Iterator[datetime]: ...


def times_between(
    schedule: Timed, after: datetime, through: datetime, *, limit: int
) -> Iterator[datetime]:
    """Schedule times in (after, through], ascending, at most ``limit`` of them.

    ``@every`` times are ``after`` + k*delay (``after`` is the anchor, as for
    :meth:`Schedule.times_after`), so a walk resumed from the last time it returned
    continues on the same grid.
    """
    after, through = as_utc(after, "after"), as_utc(through, "through")
    if limit < 1:
        raise ValueError(f"limit must be >= 1, not {limit}")
    return islice(takewhile(lambda t: t <= through, schedule.times_after(after)), limit)
