"""When a parsed schedule fires: :class:`Schedule`, croniter walked through DST.

croniter runs on the naive local wall clock (as if it were UTC), so it never sees a DST
transition: it yields the wall-clock times that match the rule's canonical expression
(``Cron.croniter_expression``), and this module turns each into its instants
(``_zones.instants``), which is where the DST rules live.

* Spring forward: a wall-clock time that does not exist that day is skipped that day
  (croniter alone would run a 02:30 job at 03:00).
* Fall back: a schedule that names particular hours (``30 1 * * *``, ``0 9-17 * * *``)
  runs at most once per wall-clock time: at the first occurrence of the repeated time, or,
  when that one was not run and is past ``startingDeadlineSeconds`` (the controller was
  down, say), at the second; upstream runs it twice, which is a known wart. Without a
  deadline a missed first occurrence never expires, so it runs late instead. A schedule
  whose hour field is every hour (``*/15 * * * *``, ``0 * * * *``, @hourly) keeps its
  cadence and runs in both occurrences of the repeated hour, as upstream does; running it
  once would leave an hour-long hole in a job meant to run every few minutes. This is
  Vixie cron's rule for wildcard jobs, applied to the hour field.

Which second passes count is a :data:`SecondPass`: :func:`keeps_cadence` is the fixed
part (what :meth:`Schedule.next_after` and :meth:`Schedule.times_after` show), and
:func:`once_per_wall_time` the rule at one moment, which needs ``earliest`` and the
deadline and so is applied by ``_due``. :func:`parse_schedule` is the one way to make a
:class:`Schedule`: it loads the zone, parses the expression, refuses a schedule that
never fires, and caches the result.
"""

from __future__ import annotations

import copy
import functools
import heapq
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo

from croniter import croniter

from cronjob_operator.schedule._errors import (
    SCHEDULE_FIELD,
    TIME_ZONE_FIELD,
    ScheduleError,
    quote,
)
from cronjob_operator.schedule._grammar import Cron, Every, Rule, parse
from cronjob_operator.schedule._zones import (
    add,
    as_utc,
    floor_minute,
    floor_second,
    fold_length,
    instants,
    load_zone,
    validate_time_zone,
)

_MINUTE: Final = timedelta(minutes=1)

SecondPass = Callable[[datetime], bool]
"""Given the first occurrence (UTC) of a repeated wall-clock time, whether its second
occurrence is a schedule time too."""


def keeps_cadence(cron: Cron) -> SecondPass:
    """The fixed part of the fall-back rule: an every-hour schedule runs in both passes."""
    every_hour = cron.every_hour
    return lambda first: every_hour


def once_per_wall_time(cron: Cron, earliest: datetime, reach: datetime | None) -> SecondPass:
    """The fall-back rule at one moment: every-hour schedules run in both passes; others
    run at most once per wall-clock time, so the second pass counts only when the first
    was not run (it came after ``earliest``) and can no longer run (at or before
    ``reach``, ``now - startingDeadlineSeconds``)."""
    if cron.every_hour:
        return keeps_cadence(cron)
    if reach is None:
        return lambda first: False
    return lambda first: earliest < first <= reach


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule in its time zone. Make one with :func:`parse_schedule`."""

    expression: str
    zone: ZoneInfo
    _rule: Rule = field(repr=False, compare=False)

    def next_after(self, t: datetime) -> datetime | None:
        """The first schedule time strictly after ``t`` (aware UTC), or None if none is left.

        For ``@every <d>`` this is ``t`` truncated to the second plus ``d`` (robfig's
        ConstantDelaySchedule); :func:`most_recent_due` anchors @every at ``earliest``.
        """
        t = as_utc(t, "t")
        if isinstance(self._rule, Every):
            return add(floor_second(t), self._rule.delay)
        return next(self._fires_after(t), None)

    def times_after(self, t: datetime) -> Iterator[datetime]:
        """Schedule times strictly after ``t`` (aware), ascending; cheaper per time than
        calling :meth:`next_after` in a loop. ``@every``: ``t`` + k * delay."""
        t = as_utc(t, "t")
        if isinstance(self._rule, Every):
            delay = self._rule.delay
            moment = add(floor_second(t), delay)
            while moment is not None:
                yield moment
                moment = add(moment, delay)
            return
        yield from self._fires_after(t)

    def _fires_after(
        self, t: datetime, second_pass: SecondPass | None = None
    ) -> Iterator[datetime]:
        """Schedule times strictly after ``t``, ascending (a cron rule only).

        ``second_pass`` says which second occurrences of a repeated wall-clock time count
        (by default: all of them for an every-hour schedule, none otherwise)."""
        assert isinstance(self._rule, Cron)
        twice = second_pass or keeps_cadence(self._rule)
        wall = t.astimezone(self.zone)
        start = wall.replace(tzinfo=None)
        if wall.fold == 0:
            # In the first pass of a repeated hour, the second pass of earlier wall-clock
            # times is still ahead: look back by the length of the repeat.
            start -= fold_length(wall)
        later: deque[datetime] = deque()  # second passes, ascending, due after the first
        for naive in self._walls(start, forward=True):
            first, second = instants(naive, self.zone)
            if first is None:
                continue  # does not exist that day: skipped
            while later and later[0] < first:
                late = later.popleft()
                if late > t:
                    yield late
            if first > t:
                yield first
            if second is not None and twice(first):
                later.append(second)
        yield from (late for late in later if late > t)

    def _fires_at_or_before(
        self, t: datetime, second_pass: SecondPass | None = None
    ) -> Iterator[datetime]:
        """Schedule times at or before ``t``, newest first (a cron rule only);
        ``second_pass`` as for :meth:`_fires_after`."""
        assert isinstance(self._rule, Cron)
        twice = second_pass or keeps_cadence(self._rule)
        wall = t.astimezone(self.zone)
        start = wall.replace(tzinfo=None)
        if wall.fold == 1:
            # In the second pass of a repeated hour, the first pass of later wall-clock
            # times is already behind: look ahead by the length of the repeat.
            start += fold_length(wall)
        start = floor_minute(start) + _MINUTE
        # Two descending streams merge here: the first passes, and the second passes that
        # count. A second pass (first + the repeat) can be newer than the first pass of a
        # later wall-clock time whose own second pass does not count, so a time is held
        # until no wall-clock time still to come can give a newer one.
        pending: list[_Newest] = []  # a heap that pops the newest time first
        for naive in self._walls(start, forward=False):
            first, second = instants(naive, self.zone)
            if first is None:
                continue
            for moment in (first, second if second is not None and twice(first) else None):
                if moment is not None and moment <= t:
                    heapq.heappush(pending, _Newest(moment))
            # Every time still to come is older than this wall-clock time's last instant.
            bound = second if second is not None else first
            while pending and pending[0].moment >= bound:
                yield heapq.heappop(pending).moment
        while pending:
            yield heapq.heappop(pending).moment

    def _walls(self, start: datetime, *, forward: bool) -> Iterator[datetime]:
        """Matching naive wall-clock times after (or before) naive ``start``, exclusive."""
        assert isinstance(self._rule, Cron)
        expression = self._rule.croniter_expression
        found = _first_wall(expression, start, forward)
        while found is not None:
            yield found
            found = _step_wall(expression, found, forward)


@dataclass(frozen=True, slots=True)
class _Newest:
    """Orders instants newest first, so ``heapq`` (a min-heap) pops the newest."""

    moment: datetime

    def __lt__(self, other: _Newest) -> bool:
        return self.moment > other.moment


@functools.lru_cache(maxsize=8192)
def _step_wall(expression: str, start: datetime, forward: bool) -> datetime | None:
    """croniter's first match strictly after (or before) naive ``start``, or None.

    Remembered (a pure function of its arguments): a walk steps from one match to the
    next, and at a due time every decision of every CronJob with that schedule takes the
    same steps (from the due time to the next one, and back), each about 200 µs of
    croniter and dateutil.
    """
    cron = copy.copy(_croniter_template(expression))
    cron.set_current(start.replace(tzinfo=UTC, fold=0), force=True)
    try:
        found: datetime = cron.get_next(datetime) if forward else cron.get_prev(datetime)
    except (ValueError, OverflowError):  # past year 1 or 9999; CroniterError too
        return None
    return found.replace(tzinfo=None, fold=0)


_Bracket = tuple[datetime, datetime]
_BRACKETS: dict[str, tuple[_Bracket, ...]] = {}
"""Per croniter expression, the last few pairs of consecutive matches found around a
query, newest first."""
_MAX_BRACKETS: Final = 4096
_BRACKETS_PER_EXPRESSION: Final = 4
"""Pairs kept per expression: at a due time a decision asks around the due time from
both sides (the newest time at or before now, the times after the watermark, the next
one), which one pair alone answered only alternately."""


def _first_wall(expression: str, start: datetime, forward: bool) -> datetime | None:
    """The first match strictly after (or before) naive ``start``.

    Between two consecutive matches of a schedule the answers do not change, and a
    reconcile asks both ("the newest time at or before now", "the next one") again and
    again between them, for every CronJob of that schedule. So the pairs of matches
    around the last queries are remembered per expression, and a query between two of
    them is answered without croniter (about half of a no-op reconcile's CPU); a query
    outside costs one extra croniter step to learn the new pair. Wall-clock times only:
    time zones and DST are applied to these by the caller, so the cache holds for every
    zone.
    """
    brackets = _BRACKETS.get(expression, ())
    for before, after in brackets:
        if forward and before <= start < after:
            return after
        if not forward and before < start <= after:
            return before
    found = _step_wall(expression, start, forward)
    if found is None:
        return None
    neighbour = _step_wall(expression, found, not forward)  # on start's side of ``found``
    if neighbour is not None:
        if len(_BRACKETS) >= _MAX_BRACKETS:
            _BRACKETS.clear()
        bracket = (neighbour, found) if forward else (found, neighbour)
        kept = (bracket, *(b for b in brackets if b != bracket))
        _BRACKETS[expression] = kept[:_BRACKETS_PER_EXPRESSION]
    return found


@functools.lru_cache(maxsize=4096)
def parse_schedule(expression: str, time_zone: str | None = None) -> Schedule:
    """The schedule for ``spec.schedule`` and ``spec.timeZone`` (None means UTC).

    Parsed schedules are immutable and cached (a reconcile re-reads the same spec many
    times; parsing was 8% of a no-op reconcile). Errors are not cached.

    Raises :class:`ScheduleError`: ``UnknownTimeZone`` for an unknown, ``Local`` or empty
    zone (checked first, as upstream), ``UnparseableSchedule`` for anything
    :func:`validate_schedule` rejects, ``InvalidSchedule`` for a schedule that never fires.
    """
    zone = ZoneInfo("UTC") if time_zone is None else load_zone(time_zone)
    if zone is None:
        assert time_zone is not None
        message = validate_time_zone(time_zone) or f"{TIME_ZONE_FIELD}: unknown time zone"
        raise ScheduleError("UnknownTimeZone", TIME_ZONE_FIELD, message)
    rule, problems = parse(expression)
    prefix = f"{SCHEDULE_FIELD}: {quote(expression)}: "
    if rule is None:
        raise ScheduleError("UnparseableSchedule", SCHEDULE_FIELD, prefix + "; ".join(problems))
    if isinstance(rule, Every):
        return Schedule(expression, zone, rule)
    why_never = rule.why_never()
    if why_never is not None:
        raise ScheduleError(
            "InvalidSchedule", SCHEDULE_FIELD, f"{prefix}never fires: {why_never}; fix the schedule"
        )
    return Schedule(expression, zone, rule)


_CRONITER_EPOCH: Final = datetime(2000, 1, 1, tzinfo=UTC)


@functools.lru_cache(maxsize=4096)
def _croniter_template(expression: str) -> croniter:
    """croniter's parse of ``expression``, done once and never moved.

    Parsing is most of the cost of building a croniter (a reconcile walks twice: about
    half of a no-op reconcile's CPU); a walk copies this one and moves the copy's start.
    """
    return croniter(expression, _CRONITER_EPOCH)
