"""Cron schedules for CronJobs: parse, validate, and decide which run is due.

This is the pure time logic of the CronJob controller: no I/O and no wall clock (every
function takes ``now``). The reconciler calls :func:`parse_schedule` and
:func:`most_recent_due` (steps 6-7 of the reconcile) and :func:`requeue_after` (step 11);
the admission webhook calls :func:`validate_schedule` and :func:`validate_time_zone`.

Accept set. ``spec.schedule`` is accepted exactly when the built-in ``batch/v1`` CronJob
accepts it, i.e. when robfig/cron v3's ``ParseStandard`` does and there is no time zone
prefix: five fields (minute 0-59, hour 0-23, day of month 1-31, month 1-12 or JAN-DEC,
day of week 0-6 or SUN-SAT; names in any case), each a comma list of ``*``, ``?``, ``N``,
``N-M``, optionally ``/step`` (``N/step`` means ``N-max/step``); or one of the macros
@yearly @annually @monthly @weekly @daily @midnight @hourly or ``@every <Go duration>``.
robfig's quirks are kept, because the point is to accept what the built-in accepts: ``?``
is a synonym of ``*`` in every field, empty list items are ignored (``1,,2``), ``*-5``
reads as ``*``, numbers may carry a ``+`` sign and leading zeros of any length (Go's
``strconv.Atoi``; ``-0`` is zero), a step larger than the range is fine, and
``@every`` takes any Go duration (below one second it means one second). Rejected, with a
message that names the field and the fix: 6 or 7 fields, day of week 7, ``L`` ``W`` ``#``
``H``, ``@reboot`` and other unknown macros, ``TZ=``/``CRON_TZ=`` prefixes (the zone goes
in ``spec.timeZone``), out-of-range values, backwards ranges, step 0, the empty string.
A schedule that parses but can never fire (``59 23 31 2 *``) passes validation, as it does
upstream; :func:`parse_schedule` reports it as ``InvalidSchedule`` so the controller can
say so once instead of looping.

Day matching follows robfig: when day of month and day of week are both restricted
(neither starts with ``*`` or ``?`` without a step above 1), a day matches if either
does (standard cron OR); otherwise both must match.

Engine. croniter evaluates the schedule, but never the text the user wrote: croniter
accepts much that the built-in rejects and treats ``*/2`` in a day field differently, so
the expression is parsed here into field sets and croniter gets a canonical numeric
expression with the same meaning. croniter runs on the naive local wall clock (as if it
were UTC), so it never sees a DST transition; turning wall-clock times into instants is
done here, which is where the DST rules live.

Time zones and DST. Schedule times are wall-clock times in ``spec.timeZone`` (UTC when
unset): a daily 09:00 in America/New_York is 14:00Z in winter and 13:00Z in summer.

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

``@every <d>`` is a constant delay, not a wall-clock schedule: as in upstream, its times
are ``earliest + k*d`` (k >= 1) where ``earliest`` is ``status.lastScheduleTime``, else
the creation time, truncated to the second. Unlike upstream, the anchor is not moved to
``now - startingDeadlineSeconds`` (upstream does, so an @every job with a deadline shorter
than its period never runs); the deadline only limits which of those times may start.

Missed times. :func:`most_recent_due` finds the newest unmet time with one reverse search
from ``now`` and counts missed times forward from ``earliest``, stopping at 101: the cost
does not grow with the downtime (``* * * * *`` after a year is about a hundred steps, not
half a million).
"""

from __future__ import annotations

import copy
import functools
import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from itertools import islice, takewhile
from typing import Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

__all__ = [
    "MACROS",
    "MAX_MISSED",
    "Due",
    "Reason",
    "Schedule",
    "ScheduleError",
    "most_recent_due",
    "parse_schedule",
    "requeue_after",
    "validate_schedule",
    "validate_time_zone",
]

MAX_MISSED: Final = 100
"""More missed times than this is ``TooManyMissedTimes`` (the newest one still runs)."""

Reason = Literal["UnparseableSchedule", "InvalidSchedule", "UnknownTimeZone"]

SCHEDULE_FIELD: Final = "spec.schedule"
TIME_ZONE_FIELD: Final = "spec.timeZone"

_MINUTE: Final = timedelta(minutes=1)
_ZERO: Final = timedelta(0)
MACROS: Final[Mapping[str, str]] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The cron macros and the five fields each stands for (the one table; v1<->v2 conversion
expands macros with it too)."""
_EVERY_PREFIX: Final = "@every "
_FIELD_LAYOUT: Final = "minute hour day-of-month month day-of-week"
_MACRO_HINT: Final = (
    "use one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or "
    "@every <duration>"
)
# Go's strings.Fields splits on unicode.IsSpace, which is not quite Python's str.split().
_GO_SPACE: Final = re.compile(
    "[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+"
)
_GO_INT: Final = re.compile("[+-]?[0-9]+")
_INT64_MAX: Final = (1 << 63) - 1
# Quartz/Jenkins extensions that croniter knows and robfig does not: L, W, #, H.
_UNSUPPORTED: Final = re.compile(r"#|^(?:[0-9]*[LW]|LW|L-[0-9]+|H.*)$", re.IGNORECASE)
# The built-in CronJob's check on each part of a time zone name (validateTimeZone).
_ZONE_PART: Final = re.compile(r"[A-Za-z.\-_0-9+]{1,14}")


class ScheduleError(ValueError):
    """A schedule or time zone the controller cannot use; the message names the field."""

    def __init__(self, reason: Reason, field: str, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.field = field


# --- parsing ------------------------------------------------------------------------


@dataclass(frozen=True)
class _FieldSpec:
    name: str
    low: int
    high: int
    names: Mapping[str, int]
    names_hint: str = ""
    range_hint: str = ""


_MONTH_NAMES: Final = {
    n: i
    for i, n in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
_DAY_NAMES: Final = {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_FIELDS: Final = (
    _FieldSpec("minute", 0, 59, {}),
    _FieldSpec("hour", 0, 23, {}),
    _FieldSpec("day of month", 1, 31, {}),
    _FieldSpec("month", 1, 12, _MONTH_NAMES, " or a month name (JAN-DEC)"),
    _FieldSpec(
        "day of week", 0, 6, _DAY_NAMES, " or a day name (SUN-SAT)", " (use 0 or SUN for Sunday)"
    ),
)
_DAYS_IN_MONTH: Final = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


@dataclass(frozen=True)
class _Cron:
    """A five-field schedule as robfig reads it: the selected values of each field."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_star: bool
    weekdays_star: bool

    @property
    def every_hour(self) -> bool:
        """Whether it runs in every hour, so in both passes of a repeated hour."""
        return len(self.hours) == 24

    def why_never(self) -> str | None:
        """Why no date and time ever matches, or None when the schedule fires."""
        for values, name in (
            (self.minutes, "minute"),
            (self.hours, "hour"),
            (self.months, "month"),
        ):
            if not values:
                return f"the {name} field selects nothing"
        possible_days = any(d <= _DAYS_IN_MONTH[m] for m in self.months for d in self.days)
        if self.days_star or self.weekdays_star:  # AND: both day fields must match
            if not self.weekdays:
                return "the day-of-week field selects nothing"
            if not possible_days:
                return "no selected month has the selected day of month"
        elif not (possible_days or self.weekdays):  # OR: either may match
            return "no selected month has the selected day of month"
        return None

    @cached_property
    def croniter_expression(self) -> str:
        """The same schedule for croniter, written so it cannot read it differently."""
        all_days, all_weekdays = len(self.days) == 31, len(self.weekdays) == 7
        days, weekdays = _cron_list(self.days, 31), _cron_list(self.weekdays, 7)
        if not (self.days_star or self.weekdays_star):  # OR: either day field selects
            if all_days or all_weekdays:
                days, weekdays = "*", "*"
            elif not self.days:
                days = "*"  # "*" AND weekdays == weekdays alone
            elif not self.weekdays:
                weekdays = "*"
        return " ".join(
            (
                _cron_list(self.minutes, 60),
                _cron_list(self.hours, 24),
                days,
                _cron_list(self.months, 12),
                weekdays,
            )
        )

    @cached_property
    def croniter_template(self) -> croniter:
        """croniter's parse of :attr:`croniter_expression`, done once per schedule.

        Parsing is most of the cost of building a croniter (two per reconcile, about half
        of a no-op reconcile's CPU); a walk copies this one and moves the copy's start.
        """
        return croniter(self.croniter_expression, _CRONITER_EPOCH)


_CRONITER_EPOCH: Final = datetime(2000, 1, 1, tzinfo=UTC)


def _cron_list(values: frozenset[int], size: int) -> str:
    return "*" if len(values) == size else ",".join(map(str, sorted(values)))


@dataclass(frozen=True)
class _Every:
    """``@every <d>``: robfig's ConstantDelaySchedule (whole seconds, at least one)."""

    delay: timedelta


_Rule = _Cron | _Every

_SecondPass = Callable[[datetime], bool]
"""Given the first occurrence (UTC) of a repeated wall-clock time, whether its second
occurrence is a schedule time too."""


def _keeps_cadence(cron: _Cron) -> _SecondPass:
    """The fixed part of the fall-back rule: an every-hour schedule runs in both passes."""
    every_hour = cron.every_hour
    return lambda first: every_hour


def _once_per_wall_time(cron: _Cron, earliest: datetime, reach: datetime | None) -> _SecondPass:
    """The fall-back rule at one moment: every-hour schedules run in both passes; others
    run at most once per wall-clock time, so the second pass counts only when the first
    was not run (it came after ``earliest``) and can no longer run (at or before
    ``reach``, ``now - startingDeadlineSeconds``)."""
    if cron.every_hour:
        return _keeps_cadence(cron)
    if reach is None:
        return lambda first: False
    return lambda first: earliest < first <= reach


def _split_fields(expression: str) -> list[str]:
    return [f for f in _GO_SPACE.split(expression) if f]


def _parse(expression: str) -> tuple[_Rule | None, list[str]]:
    """The schedule and every problem found (the rule is None when there are problems)."""
    if not expression:
        return None, [
            f"must not be empty; use 5 fields ({_FIELD_LAYOUT}) or a macro such as @hourly"
        ]
    if expression.startswith(("TZ=", "CRON_TZ=")):
        return None, [
            f"a time zone prefix is not allowed in the schedule; remove it and set "
            f"{TIME_ZONE_FIELD} instead"
        ]
    if expression.startswith("@"):
        return _parse_macro(expression)
    fields = _split_fields(expression)
    if len(fields) != len(_FIELDS):
        extra = ""
        if len(fields) in (6, 7):
            extra = "; a seconds field or a year field is not supported"
        elif any(f.startswith("@") for f in fields):
            extra = "; a macro such as @daily must be the whole schedule, with nothing around it"
        return None, [f"expected 5 fields ({_FIELD_LAYOUT}), found {len(fields)}{extra}"]
    problems: list[str] = []
    parsed = [
        _parse_field(text, spec, problems) for text, spec in zip(fields, _FIELDS, strict=True)
    ]
    if problems:
        return None, problems
    (minutes, _), (hours, _), (days, days_star), (months, _), (weekdays, weekdays_star) = parsed
    return _Cron(minutes, hours, days, months, weekdays, days_star, weekdays_star), []


def _parse_macro(expression: str) -> tuple[_Rule | None, list[str]]:
    if expression in MACROS:
        return _parse(MACROS[expression])
    if expression.startswith(_EVERY_PREFIX):
        text = expression[len(_EVERY_PREFIX) :]
        nanoseconds = _parse_go_duration(text)
        if nanoseconds is None:
            return None, [
                f"{_quote(text)} is not a duration; write @every with a Go duration such as "
                "1h, 90m or 1h30m"
            ]
        whole_seconds = max(nanoseconds, 1_000_000_000) // 1_000_000_000
        return _Every(timedelta(seconds=whole_seconds)), []
    if expression == "@reboot":
        return None, [f"@reboot is not supported (a CronJob has no boot); {_MACRO_HINT}"]
    return None, [f"unknown macro {_quote(expression)}; {_MACRO_HINT}"]


def _parse_field(text: str, spec: _FieldSpec, problems: list[str]) -> tuple[frozenset[int], bool]:
    """The values a field selects, and whether it is a star; problems are appended."""
    values: set[int] = set()
    star = False
    for item in text.split(","):
        if not item:
            continue  # robfig splits with strings.FieldsFunc: empty items vanish
        selected, item_star, problem = _parse_item(item, spec)
        if problem:
            problems.append(problem)
            continue
        values |= selected
        star = star or item_star
    return frozenset(values), star


def _parse_item(item: str, spec: _FieldSpec) -> tuple[set[int], bool, str | None]:
    """One list item, ``range[/step]``, as robfig's getRange reads it."""
    name = spec.name
    range_text, *steps = item.split("/")
    if len(steps) > 1:
        return set(), False, f'{name} "{item}" has more than one "/"'
    bounds = range_text.split("-")
    star = bounds[0] in ("*", "?")  # robfig ignores anything after "*-"
    start, end = spec.low, spec.high
    if not star:
        if len(bounds) > 2:
            return set(), False, f'{name} "{item}" has more than one "-"'
        values: list[int] = []
        for bound in bounds:
            value = _parse_value(bound, spec)
            if value is None:
                return set(), False, _not_a_value(item, bound, spec)
            values.append(value)
        start, end = values[0], values[-1]
    step = 1
    if steps:
        parsed_step = _parse_number(steps[0])
        if parsed_step is None:
            return set(), False, f'{name} step "{steps[0]}" in "{item}" is not a number'
        step = parsed_step
        if len(bounds) == 1:
            end = spec.high  # "N/step" means "N-max/step"
        star = star and step == 1
    for value in (start, end):
        if not spec.low <= value <= spec.high:
            bound = f"{spec.low}-{spec.high}{spec.range_hint}"
            return set(), False, f"{name} {value} is out of range {bound}"
    if start > end:
        return set(), False, f'{name} range "{item}" runs backwards; write the smaller value first'
    if step == 0:
        return set(), False, f'{name} step in "{item}" must be a positive number'
    return set(range(start, end + 1, step)), star, None


def _parse_value(text: str, spec: _FieldSpec) -> int | None:
    named = spec.names.get(text.lower())
    return named if named is not None else _parse_number(text)


def _parse_number(text: str) -> int | None:
    """Go's strconv.Atoi on 64 bits, then robfig's "not negative".

    Leading zeros of any length are fine, as in Go; only the significant digits count
    towards int64's 19 (which also keeps ``int()`` clear of Python's digit limit).
    """
    if not _GO_INT.fullmatch(text):
        return None
    value = _significant_int(text.lstrip("+-"))
    if value is None or value > _INT64_MAX or (text[0] == "-" and value != 0):
        return None
    return value


def _significant_int(digits: str) -> int | None:
    """The value of a decimal digit string, or None when it has more than 20 significant
    digits (more than any uint64; callers check their own bound)."""
    significant = digits.lstrip("0")
    return int(significant or "0") if len(significant) <= 20 else None


def _not_a_value(item: str, bound: str, spec: _FieldSpec) -> str:
    if _UNSUPPORTED.search(bound):
        return (
            f'{spec.name} "{item}": L, W, # and H are not supported by Kubernetes cron '
            "schedules; use numbers, ranges, lists and steps"
        )
    if _GO_INT.fullmatch(bound):
        return f"{spec.name} {bound} is out of range {spec.low}-{spec.high}{spec.range_hint}"
    what = f'"{bound}" in "{item}"' if bound != item else f'"{item}"'
    return f"{spec.name} {what} is not a number{spec.names_hint}"


_GO_UNITS: Final = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_GO_DURATION_PART: Final = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def _parse_go_duration(text: str) -> int | None:
    """Go's time.ParseDuration, in nanoseconds; None where Go returns an error."""
    body = text[1:] if text[:1] in ("+", "-") else text
    negative = text[:1] == "-"
    if body == "0":
        return 0
    if not body:
        return None
    total = 0
    position = 0
    while position < len(body):
        match = _GO_DURATION_PART.match(body, position)
        if match is None or match.end() == position:
            return None
        whole, fraction, unit = match.groups()
        if not whole and not fraction:
            return None  # no digits, e.g. ".s"
        number = _significant_int(whole)
        if number is None or number > 1 << 63:
            return None  # overflows int64 (leading zeros are fine, as in Go)
        if unit not in _GO_UNITS:
            return None
        scale = _GO_UNITS[unit]
        value = number * scale
        if fraction:
            # Go computes the fraction in float64 too, from the digits that fit in int64.
            digits = fraction[:18]
            value += int(int(digits) * (scale / 10 ** len(digits)))
        total += value
        if total > 1 << 63:
            return None
        position = match.end()
    if negative:
        return -total
    return total if total <= _INT64_MAX else None


# --- time zones ---------------------------------------------------------------------


def _load_zone(name: str) -> ZoneInfo | None:
    if not name or name.lower() in ("local", "localtime"):
        return None
    for part in name.split("/"):
        if part in (".", "..") or part.startswith("-") or not _ZONE_PART.fullmatch(part):
            return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def validate_time_zone(name: str) -> str | None:
    """Why ``spec.timeZone`` cannot be ``name``, or None when it is a usable IANA zone."""
    if _load_zone(name) is not None:
        return None
    quoted = _quote(name)
    if not name:
        return (
            f"{TIME_ZONE_FIELD}: {quoted}: must not be empty; leave it unset for UTC or use an "
            'IANA name such as "Europe/Berlin"'
        )
    if name.lower() in ("local", "localtime"):
        return (
            f"{TIME_ZONE_FIELD}: {quoted}: the controller's local zone is not allowed; use an "
            'explicit IANA name such as "Europe/Berlin" or "UTC"'
        )
    return (
        f"{TIME_ZONE_FIELD}: {quoted}: unknown time zone; use an IANA name such as "
        '"Europe/Berlin", "America/New_York" or "UTC"'
    )


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- the public schedule --------------------------------------------------------------


def validate_schedule(expression: str) -> list[str]:
    """Every reason ``spec.schedule`` cannot be ``expression`` (empty when the built-in
    CronJob would accept it). A schedule that never fires is accepted, as upstream."""
    _, problems = _parse(expression)
    return [f"{SCHEDULE_FIELD}: {_quote(expression)}: {problem}" for problem in problems]


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule in its time zone. Make one with :func:`parse_schedule`."""

    expression: str
    zone: ZoneInfo
    _rule: _Rule = field(repr=False, compare=False)

    def next_after(self, t: datetime) -> datetime | None:
        """The first schedule time strictly after ``t`` (aware UTC), or None if none is left.

        For ``@every <d>`` this is ``t`` truncated to the second plus ``d`` (robfig's
        ConstantDelaySchedule); :func:`most_recent_due` anchors @every at ``earliest``.
        """
        t = _as_utc(t, "t")
        if isinstance(self._rule, _Every):
            return _add(_floor_second(t), self._rule.delay)
        return next(self._fires_after(t), None)

    def times_after(self, t: datetime) -> Iterator[datetime]:
        """Schedule times strictly after ``t`` (aware), ascending; cheaper per time than
        calling :meth:`next_after` in a loop. ``@every``: ``t`` + k * delay."""
        t = _as_utc(t, "t")
        if isinstance(self._rule, _Every):
            delay = self._rule.delay
            moment = _add(_floor_second(t), delay)
            while moment is not None:
                yield moment
                moment = _add(moment, delay)
            return
        yield from self._fires_after(t)

    def _fires_after(
        self, t: datetime, second_pass: _SecondPass | None = None
    ) -> Iterator[datetime]:
        """Schedule times strictly after ``t``, ascending (a cron rule only).

        ``second_pass`` says which second occurrences of a repeated wall-clock time count
        (by default: all of them for an every-hour schedule, none otherwise)."""
        assert isinstance(self._rule, _Cron)
        twice = second_pass or _keeps_cadence(self._rule)
        wall = t.astimezone(self.zone)
        start = wall.replace(tzinfo=None)
        if wall.fold == 0:
            # In the first pass of a repeated hour, the second pass of earlier wall-clock
            # times is still ahead: look back by the length of the repeat.
            start -= _fold_length(wall)
        later: deque[datetime] = deque()  # second passes, ascending, due after the first
        for naive in self._walls(start, forward=True):
            first, second = _instants(naive, self.zone)
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
        self, t: datetime, second_pass: _SecondPass | None = None
    ) -> Iterator[datetime]:
        """Schedule times at or before ``t``, newest first (a cron rule only);
        ``second_pass`` as for :meth:`_fires_after`."""
        assert isinstance(self._rule, _Cron)
        twice = second_pass or _keeps_cadence(self._rule)
        wall = t.astimezone(self.zone)
        start = wall.replace(tzinfo=None)
        if wall.fold == 1:
            # In the second pass of a repeated hour, the first pass of later wall-clock
            # times is already behind: look ahead by the length of the repeat.
            start += _fold_length(wall)
        start = _floor_minute(start) + _MINUTE
        first_pass: deque[datetime] = deque()  # descending, behind the second pass
        for naive in self._walls(start, forward=False):
            first, second = _instants(naive, self.zone)
            if first is None:
                continue
            latest, earlier = first, None
            if second is not None and twice(first):
                latest, earlier = second, first
            while first_pass and first_pass[0] > latest:
                early = first_pass.popleft()
                if early <= t:
                    yield early
            if latest <= t:
                yield latest
            if earlier is not None:
                first_pass.append(earlier)
        yield from (early for early in first_pass if early <= t)

    def _walls(self, start: datetime, *, forward: bool) -> Iterator[datetime]:
        """Matching naive wall-clock times after (or before) naive ``start``, exclusive."""
        assert isinstance(self._rule, _Cron)
        cron = copy.copy(self._rule.croniter_template)
        cron.set_current(start.replace(tzinfo=UTC, fold=0), force=True)
        step = cron.get_next if forward else cron.get_prev
        while True:
            try:
                found: datetime = step(datetime)
            except (ValueError, OverflowError):  # past year 1 or 9999; CroniterError too
                return
            yield found.replace(tzinfo=None, fold=0)


@functools.lru_cache(maxsize=4096)
def parse_schedule(expression: str, time_zone: str | None = None) -> Schedule:
    """The schedule for ``spec.schedule`` and ``spec.timeZone`` (None means UTC).

    Parsed schedules are immutable and cached (a reconcile re-reads the same spec many
    times; parsing was 8% of a no-op reconcile). Errors are not cached.

    Raises :class:`ScheduleError`: ``UnknownTimeZone`` for an unknown, ``Local`` or empty
    zone (checked first, as upstream), ``UnparseableSchedule`` for anything
    :func:`validate_schedule` rejects, ``InvalidSchedule`` for a schedule that never fires.
    """
    zone = ZoneInfo("UTC") if time_zone is None else _load_zone(time_zone)
    if zone is None:
        assert time_zone is not None
        message = validate_time_zone(time_zone) or f"{TIME_ZONE_FIELD}: unknown time zone"
        raise ScheduleError("UnknownTimeZone", TIME_ZONE_FIELD, message)
    rule, problems = _parse(expression)
    prefix = f"{SCHEDULE_FIELD}: {_quote(expression)}: "
    if rule is None:
        raise ScheduleError("UnparseableSchedule", SCHEDULE_FIELD, prefix + "; ".join(problems))
    if isinstance(rule, _Every):
        return Schedule(expression, zone, rule)
    why_never = rule.why_never()
    if why_never is not None:
        raise ScheduleError(
            "InvalidSchedule", SCHEDULE_FIELD, f"{prefix}never fires: {why_never}; fix the schedule"
        )
    return Schedule(expression, zone, rule)


# --- the schedule decision ----------------------------------------------------------


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
    earliest, now = _as_utc(earliest, "earliest"), _as_utc(now, "now")
    if starting_deadline_seconds is not None and starting_deadline_seconds < 0:
        raise ValueError(f"starting_deadline_seconds must be >= 0, not {starting_deadline_seconds}")
    reach = None
    if starting_deadline_seconds is not None:
        reach = _add(now, -timedelta(seconds=min(starting_deadline_seconds, 10**13)))
    lower = max(earliest, reach) if reach is not None else earliest
    rule = schedule._rule
    if isinstance(rule, _Every):
        return _every_due(rule.delay, earliest, lower, now)
    twice = _once_per_wall_time(rule, earliest, reach)
    latest = next(schedule._fires_at_or_before(now, twice), None)
    scheduled = latest if latest is not None and latest > lower else None
    missed = 0
    if scheduled is not None:
        in_window = takewhile(lambda t: t <= now, schedule._fires_after(lower, twice))
        missed = sum(1 for _ in islice(in_window, MAX_MISSED + 1))
    next_time = next(schedule._fires_after(now, twice), None)
    return Due(scheduled, missed, missed > MAX_MISSED, next_time)


def _every_due(delay: timedelta, earliest: datetime, lower: datetime, now: datetime) -> Due:
    """``@every``: the times are anchor + k*delay, k >= 1, anchored at ``earliest``."""
    anchor = _floor_second(earliest)
    newest = (now - anchor) // delay  # k of the newest time at or before now
    first_in_reach = max(1, (lower - anchor) // delay + 1)
    missed = min(max(0, newest - first_in_reach + 1), MAX_MISSED + 1)
    scheduled = anchor + newest * delay if missed else None
    try:
        next_time: datetime | None = anchor + max(newest + 1, 1) * delay
    except OverflowError:
        next_time = None
    return Due(scheduled, missed, missed > MAX_MISSED, next_time)


def requeue_after(
    due: Due, now: datetime, margin: timedelta = timedelta(milliseconds=100)
) -> timedelta | None:
    """How long to wait before looking again: until the next time, plus ``margin``."""
    if due.next_time is None:
        return None
    return due.next_time - _as_utc(now, "now") + margin


# --- time helpers ---------------------------------------------------------------------


def _as_utc(t: datetime, name: str) -> datetime:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, not naive {t.isoformat()}")
    return t.astimezone(UTC)


def _add(t: datetime, delta: timedelta) -> datetime | None:
    try:
        return t + delta
    except OverflowError:
        return None


def _floor_second(t: datetime) -> datetime:
    return t.replace(microsecond=0)


def _floor_minute(t: datetime) -> datetime:
    return t.replace(second=0, microsecond=0)


def _offset(t: datetime) -> timedelta:
    offset = t.utcoffset()
    assert offset is not None, "zoneinfo always has an offset"
    return offset


def _fold_length(wall: datetime) -> timedelta:
    """How long the wall-clock time of the aware ``wall`` repeats (zero if it does not)."""
    return max(_offset(wall.replace(fold=0)) - _offset(wall.replace(fold=1)), _ZERO)


def _instants(naive: datetime, zone: ZoneInfo) -> tuple[datetime | None, datetime | None]:
    """The instants (UTC) at which the wall-clock time ``naive`` occurs in ``zone``:
    (None, None) in a spring-forward gap, (first, second) in a repeated hour, else
    (only, None)."""
    first_offset = _offset(naive.replace(tzinfo=zone, fold=0))
    second_offset = _offset(naive.replace(tzinfo=zone, fold=1))
    first = (naive - first_offset).replace(tzinfo=UTC)
    if first_offset == second_offset:
        return first, None
    if first.astimezone(zone).replace(tzinfo=None) != naive:
        return None, None
    return first, (naive - second_offset).replace(tzinfo=UTC)
