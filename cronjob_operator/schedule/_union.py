"""Several schedules as one: ``spec.schedules``, the union of their times.

A :class:`ScheduleUnion` is several cron schedules in one time zone whose times are the
union of theirs: a time two of them share is one time (it runs once, its Job is named by
it). It answers what the reconciler asks of a :class:`Schedule` (``next_after``,
``times_after``, ``zone``, ``expression``), and :func:`most_recent_due`,
:func:`missed_times` and :func:`times_between` accept it, each combining its members'
answers: the newest due time is the newest of theirs, the next time the earliest, the
missed count that of the distinct times, still stopping at ``MAX_MISSED + 1``. So every
feature (deadline, stagger, catch-up, skip accounting) works over the union unchanged.

``@every`` is refused inside a union: it is a delay from the last run, not times of its
own, so "the union" would depend on which member ran last.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from cronjob_operator.schedule import _catchup, _due
from cronjob_operator.schedule._due import MAX_MISSED, Due
from cronjob_operator.schedule._errors import SCHEDULE_FIELD, ScheduleError, quote
from cronjob_operator.schedule._grammar import Every
from cronjob_operator.schedule._times import Schedule, parse_schedule
from cronjob_operator.schedule._zones import as_utc

SCHEDULES_FIELD = "spec.schedules"
SEPARATOR = "; "
"""Between the members in :attr:`ScheduleUnion.expression` (no cron field has ``;``)."""


@dataclass(frozen=True)
class ScheduleUnion:
    """Several parsed cron schedules in one zone. Make one with :func:`parse_schedules`."""

    members: tuple[Schedule, ...]
    zone: ZoneInfo

    @property
    def expression(self) -> str:
        """The members' expressions joined by ``"; "``, as status and messages show it."""
        return SEPARATOR.join(member.expression for member in self.members)

    @property
    def walked(self) -> tuple[Schedule, ...]:
        """The members each once, in listed order: what every walk of the union walks, so
        that a schedule listed ten times costs what it does once."""
        return tuple(dict.fromkeys(self.members))

    def next_after(self, t: datetime) -> datetime | None:
        """The first time of any member strictly after ``t``, or None if none is left."""
        found = [moment for member in self.walked if (moment := member.next_after(t))]
        return min(found, default=None)

    def times_after(self, t: datetime) -> Iterator[datetime]:
        """The union's times strictly after ``t``, ascending, each once."""
        t = as_utc(t, "t")
        return distinct(heapq.merge(*(member.times_after(t) for member in self.walked)))


AnySchedule = Schedule | ScheduleUnion
"""What ``spec.schedule`` or ``spec.schedules`` parse to."""


def most_recent_due(
    schedule: AnySchedule,
    *,
    earliest: datetime,
    now: datetime,
    starting_deadline_seconds: int | None,
) -> Due:
    """:func:`_due.most_recent_due` over one schedule or a union (see the module)."""
    if isinstance(schedule, Schedule):
        return _due.most_recent_due(
            schedule,
            earliest=earliest,
            now=now,
            starting_deadline_seconds=starting_deadline_seconds,
        )
    dues = [
        _due.most_recent_due(
            member, earliest=earliest, now=now, starting_deadline_seconds=starting_deadline_seconds
        )
        for member in schedule.walked
    ]
    # The distinct times among each member's newest MAX_MISSED + 1: when the union has
    # more than that many, so has this set (and the count stops there either way).
    missed = len(
        missed_times(
            schedule,
            earliest=earliest,
            now=now,
            starting_deadline_seconds=starting_deadline_seconds,
            limit=MAX_MISSED + 1,
        )
    )
    return Due(
        max((due.scheduled for due in dues if due.scheduled is not None), default=None),
        missed,
        missed > MAX_MISSED,
        min((due.next_time for due in dues if due.next_time is not None), default=None),
        max((due.latest for due in dues if due.latest is not None), default=None),
    )


def missed_times(
    schedule: AnySchedule,
    *,
    earliest: datetime,
    now: datetime,
    starting_deadline_seconds: int | None,
    limit: int = MAX_MISSED,
) -> tuple[datetime, ...]:
    """:func:`_catchup.missed_times` over one schedule or a union: the newest ``limit``
    distinct times in reach, oldest first."""
    members = schedule.walked if isinstance(schedule, ScheduleUnion) else (schedule,)
    found = {
        moment
        for member in members
        for moment in _catchup.missed_times(
            member,
            earliest=earliest,
            now=now,
            starting_deadline_seconds=starting_deadline_seconds,
            limit=limit,
        )
    }
    return tuple(sorted(found)[-limit:])


def times_between(
    schedule: AnySchedule, after: datetime, through: datetime, *, limit: int
) -> Iterator[datetime]:
    """:func:`_catchup.times_between` over one schedule or a union (each time once)."""
    return _catchup.times_between(schedule, after, through, limit=limit)


def distinct(times: Iterator[datetime]) -> Iterator[datetime]:
    """``times`` (ascending) without repeats."""
    previous: datetime | None = None
    for moment in times:
        if moment != previous:
            yield moment
            previous = moment


def parse_schedules(expressions: Sequence[str], time_zone: str | None = None) -> ScheduleUnion:
    """The union for ``spec.schedules`` and ``spec.timeZone``.

    Raises :class:`ScheduleError` for the first member :func:`parse_schedule` refuses
    (the field is ``spec.schedules[i]``), or ``UnparseableSchedule`` for an empty list or
    an ``@every`` member.
    """
    if not expressions:
        raise ScheduleError(
            "UnparseableSchedule",
            SCHEDULES_FIELD,
            f"{SCHEDULES_FIELD}: must list at least one schedule, or use spec.schedule",
        )
    members = []
    for index, expression in enumerate(expressions):
        field = f"{SCHEDULES_FIELD}[{index}]"
        try:
            member = parse_schedule(expression, time_zone)
        except ScheduleError as exc:
            if exc.field != SCHEDULE_FIELD:
                raise
            message = str(exc).replace(SCHEDULE_FIELD, field, 1)
            raise ScheduleError(exc.reason, field, message) from None
        if isinstance(member._rule, Every):
            raise ScheduleError(
                "UnparseableSchedule",
                field,
                f"{field}: {quote(expression)}: @every is a delay from the last run, not "
                "times, so it cannot be one of several schedules; use spec.schedule for it",
            )
        members.append(member)
    return ScheduleUnion(tuple(members), members[0].zone)
