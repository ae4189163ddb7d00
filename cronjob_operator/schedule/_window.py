"""Which of a schedule's times may run: a run window and exclusions.

A :class:`Window` narrows a schedule's times without changing the schedule: a time runs
only inside ``[start, end)`` (instants) and when it is not excluded, an exclusion being a
date (the time's wall-clock date in the schedule's zone) or a time of an exclusion cron
schedule (same zone). The controller and ``kubectl cjt next`` both ask it, so the next
time either shows is one that runs. A time outside the window is no run at all (nothing
counts it); an excluded time inside it is a run that is skipped, which the skip
accounting counts as ``Excluded``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from typing import Final, Protocol
from zoneinfo import ZoneInfo

from cronjob_operator.schedule._grammar import Every
from cronjob_operator.schedule._times import Schedule

TINY: Final = timedelta(microseconds=1)
"""Less than any gap between two schedule times (they are whole seconds apart)."""
MAX_EXCLUDED_WALK: Final = 200
"""The most excluded times in a row one look for the next time that runs passes over
(an excluded date counts one); beyond it there is no next time to show. A walk of them
costs at most about 45 ms of CPU with 10 exclusion schedules (bench/exclusion_walk.py)."""


class _Timed(Protocol):
    def times_after(self, t: datetime) -> Iterator[datetime]: ...


@dataclass(frozen=True)
class Window:
    """The window ``[start, end)`` (None: unbounded) and the exclusions, in ``zone``."""

    zone: ZoneInfo
    start: datetime | None = None
    end: datetime | None = None
    dates: frozenset[date] = frozenset()
    schedules: tuple[Schedule, ...] = ()

    def contains(self, moment: datetime) -> bool:
        """Whether ``moment`` is inside ``[start, end)``."""
        return (self.start is None or moment >= self.start) and (
            self.end is None or moment < self.end
        )

    def excludes(self, moment: datetime) -> bool:
        """Whether ``moment`` falls on an excluded date or is a time of an exclusion
        schedule."""
        if moment.astimezone(self.zone).date() in self.dates:
            return True
        return any(member.next_after(moment - TINY) == moment for member in self.schedules)

    def runs(self, moment: datetime) -> bool:
        """Whether a schedule time ``moment`` runs: inside the window and not excluded."""
        return self.contains(moment) and not self.excludes(moment)

    def ended(self, moment: datetime) -> bool:
        """Whether no time after ``moment`` is inside the window."""
        return self.end is not None and moment >= self.end - TINY

    def through(self, moment: datetime) -> datetime:
        """``moment``, or the window's last instant when it ends before."""
        return moment if self.end is None else min(moment, self.end - TINY)

    def ending_at(self, last: datetime) -> Window:
        """This window closed right after ``last`` (kept if it closes earlier)."""
        end = last + TINY
        return self if self.end is not None and self.end <= end else replace(self, end=end)

    def times_after(self, schedule: _Timed, after: datetime) -> Iterator[datetime]:
        """The schedule's times after ``after`` that run, ascending; it stops at the end
        of the window or after ``MAX_EXCLUDED_WALK`` excluded times in a row (an excluded
        date is passed in one step)."""
        if self.start is not None and after < self.start - TINY:
            after = _moved_toward(schedule, after, self.start - TINY)
        times = schedule.times_after(after)
        passed = 0
        while passed < MAX_EXCLUDED_WALK:
            moment = next(times, None)
            if moment is None or (self.end is not None and moment >= self.end):
                return
            if not self.excludes(moment):
                passed = 0
                yield moment
                continue
            passed += 1
            day_after = self._day_after_excluded_date(moment)
            if day_after is not None:
                times = schedule.times_after(_moved_toward(schedule, moment, day_after - TINY))

    def _day_after_excluded_date(self, moment: datetime) -> datetime | None:
        """The start of the next day (in the zone) when ``moment`` is on an excluded date
        and that start is later than ``moment``, else None."""
        local = moment.astimezone(self.zone).date()
        if local not in self.dates:
            return None
        start = datetime.combine(local + timedelta(days=1), time(0), tzinfo=self.zone)
        return start if start > moment else None

    def next_after(self, schedule: _Timed, after: datetime) -> datetime | None:
        """The first time after ``after`` that runs, or None."""
        return next(self.times_after(schedule, after), None)


def _moved_toward(schedule: _Timed, after: datetime, bound: datetime) -> datetime:
    """Where a walk from ``after`` may start instead, no later than ``bound``, with the
    same times after ``bound``: ``bound`` itself for cron times, which do not depend on
    where a walk starts; for ``@every``, whose times count from ``after``, ``after``
    moved by whole delays."""
    if isinstance(schedule, Schedule) and isinstance(schedule._rule, Every):
        delay = schedule._rule.delay
        return after + (bound - after) // delay * delay
    return bound
