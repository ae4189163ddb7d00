"""The cron grammar: which ``spec.schedule`` strings are accepted, and what they select.

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
``@every`` takes any Go duration (below one second it means one second; the duration
itself is read by ``_duration``). Rejected, with a message that names the field and the
fix: 6 or 7 fields, day of week 7, ``L`` ``W`` ``#`` ``H``, ``@reboot`` and other unknown
macros, ``TZ=``/``CRON_TZ=`` prefixes (the zone goes in ``spec.timeZone``), out-of-range
values, backwards ranges, step 0, the empty string. A schedule that parses but can never
fire (``59 23 31 2 *``) passes validation, as it does upstream; :meth:`Cron.why_never`
says why, so that ``parse_schedule`` can report it as ``InvalidSchedule`` once instead
of looping.

Day matching follows robfig: when day of month and day of week are both restricted
(neither starts with ``*`` or ``?`` without a step above 1), a day matches if either
does (standard cron OR); otherwise both must match.

The result is a rule: :class:`Cron` (the values each field selects) or :class:`Every`
(a constant delay). croniter evaluates a :class:`Cron`, but never the text the user
wrote: croniter accepts much that the built-in rejects and treats ``*/2`` in a day field
differently, so it gets :attr:`Cron.croniter_expression`, a canonical numeric expression
with the same meaning.

``MACROS`` is the one table of the cron macros; the v1<->v2 conversion webhook expands
macros with it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import Final

from cronjob_operator.schedule._duration import INT64_MAX, parse_go_duration, significant_int
from cronjob_operator.schedule._errors import SCHEDULE_FIELD, TIME_ZONE_FIELD, quote

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

# Quartz/Jenkins extensions that croniter knows and robfig does not: L, W, #, H.
_UNSUPPORTED: Final = re.compile(r"#|^(?:[0-9]*[LW]|LW|L-[0-9]+|H.*)$", re.IGNORECASE)


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
class Cron:
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


def _cron_list(values: frozenset[int], size: int) -> str:
    return "*" if len(values) == size else ",".join(map(str, sorted(values)))


@dataclass(frozen=True)
class Every:
    """``@every <d>``: robfig's ConstantDelaySchedule (whole seconds, at least one)."""

    delay: timedelta


Rule = Cron | Every


def validate_schedule(expression: str) -> list[str]:
    """Every reason ``spec.schedule`` cannot be ``expression`` (empty when the built-in
    CronJob would accept it). A schedule that never fires is accepted, as upstream."""
    _, problems = parse(expression)
    return [f"{SCHEDULE_FIELD}: {quote(expression)}: {problem}" for problem in problems]


def _split_fields(expression: str) -> list[str]:
    return [f for f in _GO_SPACE.split(expression) if f]


def parse(expression: str) -> tuple[Rule | None, list[str]]:
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
    return Cron(minutes, hours, days, months, weekdays, days_star, weekdays_star), []


def _parse_macro(expression: str) -> tuple[Rule | None, list[str]]:
    if expression in MACROS:
        return parse(MACROS[expression])
    if expression.startswith(_EVERY_PREFIX):
        text = expression[len(_EVERY_PREFIX) :]
        nanoseconds = parse_go_duration(text)
        if nanoseconds is None:
            return None, [
                f"{quote(text)} is not a duration; write @every with a Go duration such as "
                "1h, 90m or 1h30m"
            ]
        whole_seconds = max(nanoseconds, 1_000_000_000) // 1_000_000_000
        return Every(timedelta(seconds=whole_seconds)), []
    if expression == "@reboot":
        return None, [f"@reboot is not supported (a CronJob has no boot); {_MACRO_HINT}"]
    return None, [f"unknown macro {quote(expression)}; {_MACRO_HINT}"]


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
    value = significant_int(text.lstrip("+-"))
    if value is None or value > INT64_MAX or (text[0] == "-" and value != 0):
        return None
    return value


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
