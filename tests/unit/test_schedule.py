"""The schedule rules: the accept set, the worked examples of docs/cronjob-semantics.md, DST."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from croniter import croniter

from cronjob_operator import schedule
from cronjob_operator.schedule import (
    Due,
    ScheduleError,
    _times,
    _zones,
    most_recent_due,
    parse_schedule,
)

MARGIN = timedelta(milliseconds=100)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, us: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, us, tzinfo=UTC)


def due_at(
    expression: str,
    *,
    earliest: datetime,
    now: datetime,
    deadline: int | None = None,
    zone: str | None = None,
) -> Due:
    return most_recent_due(
        parse_schedule(expression, zone),
        earliest=earliest,
        now=now,
        starting_deadline_seconds=deadline,
    )


def fires(expression: str, after: datetime, count: int, zone: str | None = None) -> list[datetime]:
    parsed = parse_schedule(expression, zone)
    found: list[datetime] = []
    t: datetime | None = after
    for _ in range(count):
        assert t is not None
        t = parsed.next_after(t)
        assert t is not None
        found.append(t)
    return found


def test_public_names() -> None:
    assert sorted(schedule.__all__) == sorted(
        [
            "MACROS",
            "MAX_MISSED",
            "SCHEDULES_FIELD",
            "SCHEDULE_FIELD",
            "TIME_ZONE_FIELD",
            "AnySchedule",
            "Due",
            "Reason",
            "Schedule",
            "ScheduleError",
            "ScheduleUnion",
            "Window",
            "missed_times",
            "most_recent_due",
            "parse_schedule",
            "parse_schedules",
            "reach_of",
            "requeue_after",
            "times_between",
            "validate_schedule",
            "validate_time_zone",
        ]
    )


# --- worked examples (docs/cronjob-semantics.md; creation 2016-05-19, a Thursday) -------------

# (schedule, earliest = lastScheduleTime or creation, now, deadline, runs, requeue, warning)
WORKED_EXAMPLES = [
    pytest.param(
        "0 * * * ?", utc(2016, 5, 19, 9, 59), utc(2016, 5, 19, 9, 59), None,
        None, timedelta(minutes=1), False, id="created 09:59, now 09:59",
    ),
    pytest.param(
        "0 * * * ?", utc(2016, 5, 19, 9, 59), utc(2016, 5, 19, 10, 1), None,
        utc(2016, 5, 19, 10), timedelta(minutes=59), False, id="created 09:59, now 10:01",
    ),
    pytest.param(
        "0 * * * ?", utc(2016, 5, 19, 9, 59), utc(2016, 5, 19, 10, 12), 10,
        None, timedelta(minutes=48), False, id="deadline 10s, now 10:12",
    ),
    pytest.param(
        "0 * * * ?", utc(2016, 5, 19, 9, 1), utc(2016, 5, 19, 10, 1), 1_000_000,
        utc(2016, 5, 19, 10), timedelta(minutes=59), False, id="last 09:01, deadline 1000000s",
    ),
    # Forbid, Replace and Allow at 10:01 all start from this decision; the policy is the
    # reconciler's business.
    pytest.param(
        "0 * * * ?", utc(2016, 5, 19, 9, 1), utc(2016, 5, 19, 10, 1), None,
        utc(2016, 5, 19, 10), timedelta(minutes=59), False, id="active job at 10:01",
    ),
    pytest.param(
        "0 * * * ?", utc(2016, 5, 19, 9, 1), utc(2016, 5, 26, 10), None,
        utc(2016, 5, 26, 10), timedelta(hours=1), True, id="a week later: too many missed",
    ),
    pytest.param(
        "0 * * * ?", utc(2016, 5, 19, 9, 1), utc(2016, 5, 26, 10), 10,
        utc(2016, 5, 26, 10), timedelta(hours=1), False, id="a week later, deadline 10s",
    ),
    pytest.param(
        "0 * * * ?", utc(2016, 5, 19, 9, 1), utc(2016, 5, 26, 10), 7200,
        utc(2016, 5, 26, 10), timedelta(hours=1), False, id="a week later, deadline 7200s",
    ),
    pytest.param(
        "@every 1h", utc(2016, 5, 19, 8, 59), utc(2016, 5, 19, 9, 59), None,
        utc(2016, 5, 19, 9, 59), timedelta(hours=1), False, id="@every 1h",
    ),
    pytest.param(
        "30 6-16/4 * * 1-5", utc(2016, 5, 19, 10, 30), utc(2016, 5, 20, 10, 31), None,
        utc(2016, 5, 20, 10, 30), timedelta(hours=3, minutes=59), False, id="6-16/4, Fri 10:31",
    ),
    pytest.param(
        "0 12 * * 5", utc(2016, 5, 19), utc(2016, 5, 19, 16), None,
        None, timedelta(hours=20), False, id="Fridays at noon, Thu 16:00",
    ),
    pytest.param(
        "*/5 * * * *", utc(2016, 5, 19, 10, 30), utc(2016, 5, 19, 10, 32), 60,
        None, timedelta(minutes=3), False, id="*/5, deadline 60s",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("expression", "earliest", "now", "deadline", "runs", "requeue", "warning"), WORKED_EXAMPLES
)
def test_worked_examples(
    expression: str,
    earliest: datetime,
    now: datetime,
    deadline: int | None,
    runs: datetime | None,
    requeue: timedelta,
    warning: bool,
) -> None:
    due = due_at(expression, earliest=earliest, now=now, deadline=deadline)
    assert due.scheduled == runs
    assert due.too_many_missed is warning
    assert schedule.requeue_after(due, now) == requeue + MARGIN


def test_a_week_of_hourly_misses_is_counted_past_the_limit() -> None:
    due = due_at("0 * * * ?", earliest=utc(2016, 5, 19, 9, 1), now=utc(2016, 5, 26, 10))
    assert due.missed == schedule.MAX_MISSED + 1


def test_a_schedule_that_never_fires_is_invalid_not_unparseable() -> None:
    assert schedule.validate_schedule("59 23 31 2 *") == []  # as upstream: it parses
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("59 23 31 2 *")
    assert caught.value.reason == "InvalidSchedule"
    assert str(caught.value).startswith('spec.schedule: "59 23 31 2 *": never fires')


def test_an_obvious_error_is_unparseable() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("obvious error schedule")
    assert caught.value.reason == "UnparseableSchedule"
    assert caught.value.field == "spec.schedule"
    assert "expected 5 fields" in str(caught.value)


def test_after_running_the_same_time_is_not_due_again() -> None:
    due = due_at("0 * * * *", earliest=utc(2016, 5, 19, 10), now=utc(2016, 5, 19, 10, 0, 30))
    assert due.scheduled is None
    assert due.next_time == utc(2016, 5, 19, 11)


def test_a_deadline_of_zero_never_starts_anything() -> None:
    due = due_at("* * * * *", earliest=utc(2016, 5, 19), now=utc(2016, 5, 19, 10), deadline=0)
    assert (due.scheduled, due.missed) == (None, 0)


def test_a_time_exactly_at_the_deadline_is_too_late() -> None:
    now = utc(2016, 5, 19, 10, 1)
    assert due_at("0 * * * *", earliest=utc(2016, 5, 19), now=now, deadline=60).scheduled is None
    assert due_at("0 * * * *", earliest=utc(2016, 5, 19), now=now, deadline=61).scheduled == utc(
        2016, 5, 19, 10
    )


def test_a_negative_deadline_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="starting_deadline_seconds"):
        due_at("* * * * *", earliest=utc(2016, 5, 19), now=utc(2016, 5, 19, 1), deadline=-1)


def test_a_huge_deadline_does_not_overflow() -> None:
    due = due_at("0 * * * *", earliest=utc(2016, 5, 19), now=utc(2016, 5, 19, 1), deadline=2**62)
    assert due.scheduled == utc(2016, 5, 19, 1)


def test_requeue_after_is_none_when_nothing_is_left() -> None:
    assert schedule.requeue_after(Due(None, 0, False, None), utc(2016, 5, 19)) is None


# --- cheap after long downtime -----------------------------------------------------------


def test_a_year_of_every_minute_downtime_is_cheap(monkeypatch: pytest.MonkeyPatch) -> None:
    """525,600 missed ticks must cost about a hundred steps, not half a million."""
    steps = 0
    instants = _zones.instants

    def counting(*args: object) -> object:
        nonlocal steps
        steps += 1
        return instants(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_times, "instants", counting)
    now = utc(2017, 5, 19, 10, 0, 30)
    due = due_at("* * * * *", earliest=utc(2016, 5, 19, 10), now=now)
    assert due.scheduled == utc(2017, 5, 19, 10)
    assert due.missed == schedule.MAX_MISSED + 1
    assert due.too_many_missed
    assert due.next_time == utc(2017, 5, 19, 10, 1)
    # 101 counted, one found backwards, one ahead; a generous bound, far below 525,600.
    assert steps <= 2 * (schedule.MAX_MISSED + 1) + 10


def test_a_century_of_every_second_downtime_is_cheap() -> None:
    due = due_at("@every 1s", earliest=utc(1916, 5, 19), now=utc(2016, 5, 19, 0, 0, 0, 500))
    assert due.scheduled == utc(2016, 5, 19)
    assert due.too_many_missed


# --- the accept set ------------------------------------------------------------------------

ACCEPTED = [
    "* * * * *",
    "0 * * * ?",
    "*/15 * * * *",
    "5/20 * * * *",
    "30 6-16/4 * * 1-5",
    "0 0 1,15 * *",
    "0 0 * JAN-MAR MON-FRI",
    "0 0 * jan,Jun,DEC sun,Sat",
    "0 0 ? * *",
    "0 0 31 2 *",  # parses; it never fires (InvalidSchedule at parse_schedule)
    "0 0 * * 0",
    "  0  0 *\t* *  ",  # any whitespace between fields, as Go's strings.Fields
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
    "@every 1h",
    "@every 90m",
    "@every 1h30m",
    "@every 1.5h",
    "@every 500ms",  # robfig rounds up to one second
    # robfig quirks the built-in accepts, so we do too:
    "? ? ? ? ?",  # "?" is "*" in every field
    "1,,2 * * * *",  # empty list items are dropped
    "*-5 * * * *",  # anything after "*-" is ignored
    "+5 * * * *",  # strconv.Atoi takes a sign
    "*/100 * * * *",  # a step beyond the range selects the start only
    # strconv.Atoi takes leading zeros of any length, so robfig does too:
    "0000000000000000000005 * * * *",
    "+000000000000000000000000000000000000000000005 * * * *",
    "*/0000000000000000000000015 * * * *",
    pytest.param("0" * 5000 + "5 * * * *", id="5000 zeros"),  # past Python's int() digit limit
    "@every 000000000000000000000001h",  # and so does Go's time.ParseDuration
    "@every 0000000000000000000000001.5h",
]


@pytest.mark.parametrize("expression", ACCEPTED)
def test_accepted(expression: str) -> None:
    assert schedule.validate_schedule(expression) == []


REJECTED = [
    ("", "must not be empty"),
    ("   ", "expected 5 fields"),
    ("* * * * * *", "found 6; a seconds field or a year field is not supported"),
    ("* * * * * * *", "found 7"),
    ("* * * *", "found 4"),
    ("@reboot", "@reboot is not supported"),
    ("@Daily", "unknown macro"),
    ("@daily ", "unknown macro"),
    ("  @daily", "must be the whole schedule"),
    ("@every", "unknown macro"),
    ("@every 1x", '"1x" is not a duration'),
    ("@every 1h30", "is not a duration"),
    ("@every ", "is not a duration"),
    ("TZ=UTC 0 * * * *", "set spec.timeZone instead"),
    ("CRON_TZ=Europe/Berlin 0 9 * * *", "set spec.timeZone instead"),
    ("60 * * * *", "minute 60 is out of range 0-59"),
    ("* 24 * * *", "hour 24 is out of range 0-23"),
    ("* * 0 * *", "day of month 0 is out of range 1-31"),
    ("* * 32 * *", "day of month 32 is out of range 1-31"),
    ("* * * 0 *", "month 0 is out of range 1-12"),
    ("* * * 13 *", "month 13 is out of range 1-12"),
    ("* * * * 7", "day of week 7 is out of range 0-6 (use 0 or SUN for Sunday)"),
    ("* * * * 1-7", "day of week 7 is out of range 0-6"),
    ("0-60 * * * *", "minute 60 is out of range 0-59"),
    ("99999999999999999999 * * * *", "minute 99999999999999999999 is out of range 0-59"),
    ("09223372036854775808 * * * *", "is out of range 0-59"),  # overflows int64
    ("*/0009223372036854775808 * * * *", 'minute step "0009223372036854775808"'),
    ("@every 09223372036854775808ns", "is not a duration"),
    ("5-3 * * * *", 'minute range "5-3" runs backwards'),
    ("*/0 * * * *", "must be a positive number"),
    ("*/x * * * *", 'minute step "x"'),
    ("1/2/3 * * * *", 'more than one "/"'),
    ("1-2-3 * * * *", 'more than one "-"'),
    ("-1 * * * *", "is not a number"),
    ("0 0 L * *", "L, W, # and H are not supported"),
    ("0 0 15W * *", "L, W, # and H are not supported"),
    ("0 0 LW * *", "L, W, # and H are not supported"),
    ("0 0 * * 5L", "L, W, # and H are not supported"),
    ("0 0 * * 1#2", "L, W, # and H are not supported"),
    ("H * * * *", "L, W, # and H are not supported"),
    ("0 0 * * wen", 'day of week "wen" is not a number or a day name (SUN-SAT)'),
    ("0 0 * JANUARY *", 'month "JANUARY" is not a number or a month name (JAN-DEC)'),
    ("0 0 MON * *", 'day of month "MON" is not a number'),
    ("0 0 * * 1-fri-sat", 'more than one "-"'),
    ("obvious error schedule", "expected 5 fields"),
]


@pytest.mark.parametrize(("expression", "problem"), REJECTED)
def test_rejected(expression: str, problem: str) -> None:
    problems = schedule.validate_schedule(expression)
    assert problems
    assert all(p.startswith(f'spec.schedule: "{expression}": ') for p in problems)
    assert any(problem in p for p in problems), problems
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(expression)
    assert caught.value.reason == "UnparseableSchedule"
    assert problem in str(caught.value)


def test_every_problem_is_reported() -> None:
    prefix = 'spec.schedule: "60 24 0 13 7": '
    assert schedule.validate_schedule("60 24 0 13 7") == [
        prefix + "minute 60 is out of range 0-59",
        prefix + "hour 24 is out of range 0-23",
        prefix + "day of month 0 is out of range 1-31",
        prefix + "month 13 is out of range 1-12",
        prefix + "day of week 7 is out of range 0-6 (use 0 or SUN for Sunday)",
    ]


@pytest.mark.parametrize("expression", ["0 , * * *", "0 0 , * *"])
def test_a_field_that_selects_nothing_never_fires(expression: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(expression)
    assert caught.value.reason == "InvalidSchedule"


def test_field_syntax_selects_the_right_times() -> None:
    after = utc(2024, 1, 1)  # a Monday
    assert [t.minute for t in fires("5/20 * * * *", after, 3)] == [5, 25, 45]
    assert [t.hour for t in fires("0 6-16/4 * * *", after, 3)] == [6, 10, 14]
    assert [t.minute for t in fires("*/100 * * * *", after, 2)] == [0, 0]
    assert [t.day for t in fires("0 0 * * MON-wed", after, 3)] == [2, 3, 8]
    assert [t.month for t in fires("0 0 1 feb,Apr *", after, 2)] == [2, 4]
    assert fires("@weekly", after, 1) == [utc(2024, 1, 7)]
    assert fires("@monthly", after, 1) == [utc(2024, 2, 1)]
    assert fires("@yearly", after, 1) == [utc(2025, 1, 1)]
    assert fires("0 0 29 2 *", utc(2097, 1, 1), 1) == [utc(2104, 2, 29)]


# --- day of month and day of week --------------------------------------------------------


def test_croniter_ors_restricted_day_fields() -> None:
    """The engine's own rule: both day fields restricted means either may match."""
    found = croniter("0 0 13 * 5", utc(2024, 1, 1))
    days = [found.get_next(datetime).strftime("%a %d") for _ in range(4)]
    assert days == ["Fri 05", "Fri 12", "Sat 13", "Fri 19"]


def test_restricted_day_fields_are_ored() -> None:
    days = [t.strftime("%a %d") for t in fires("0 0 13 * 5", utc(2024, 1, 1), 4)]
    assert days == ["Fri 05", "Fri 12", "Sat 13", "Fri 19"]


def test_a_star_day_field_is_anded() -> None:
    assert [t.day for t in fires("0 0 * * 5", utc(2024, 1, 1), 2)] == [5, 12]
    assert [t.day for t in fires("0 0 ? * 5", utc(2024, 1, 1), 2)] == [5, 12]
    assert [t.day for t in fires("0 0 13 * *", utc(2024, 1, 1), 2)] == [13, 13]
    assert [t.day for t in fires("0 0 */1 * 1", utc(2024, 1, 1), 2)] == [8, 15]


def test_a_stepped_star_is_a_restriction_as_in_robfig() -> None:
    """robfig drops the star of ``*/2`` (Vixie cron keeps it): odd days OR Mondays."""
    days = [t.strftime("%a %d") for t in fires("0 0 */2 * 1", utc(2024, 1, 1), 5)]
    assert days == ["Wed 03", "Fri 05", "Sun 07", "Mon 08", "Tue 09"]


def test_a_full_list_is_a_restriction_as_in_robfig() -> None:
    """``1-31`` is not a star, so it ORs with Mondays: every day."""
    assert [t.day for t in fires("0 0 1-31 * 1", utc(2024, 1, 1), 3)] == [2, 3, 4]


# --- time zones ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["UTC", "Europe/Berlin", "America/New_York", "Etc/GMT+5"])
def test_known_time_zones(name: str) -> None:
    assert schedule.validate_time_zone(name) is None
    assert parse_schedule("0 9 * * *", name).zone.key == name


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "must not be empty"),
        ("Local", "local zone is not allowed"),
        ("local", "local zone is not allowed"),
        ("localtime", "local zone is not allowed"),
        ("Mars/Olympus_Mons", "unknown time zone"),
        ("utc", "unknown time zone"),
        ("America", "unknown time zone"),
        ("../../etc/passwd", "unknown time zone"),
        ("/etc/localtime", "unknown time zone"),
    ],
)
def test_unusable_time_zones(name: str, problem: str) -> None:
    message = schedule.validate_time_zone(name)
    assert message is not None
    assert message.startswith(f'spec.timeZone: "{name}": ')
    assert problem in message
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("0 9 * * *", name)
    assert caught.value.reason == "UnknownTimeZone"
    assert caught.value.field == "spec.timeZone"


def test_the_time_zone_is_checked_before_the_schedule() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("not a schedule", "Mars/Olympus_Mons")
    assert caught.value.reason == "UnknownTimeZone"


def test_unset_time_zone_is_utc() -> None:
    assert parse_schedule("0 9 * * *").zone.key == "UTC"


def test_wall_clock_follows_the_zone() -> None:
    assert fires("0 9 * * *", utc(2024, 1, 10), 1, "America/New_York") == [utc(2024, 1, 10, 14)]
    assert fires("0 9 * * *", utc(2024, 7, 10), 1, "America/New_York") == [utc(2024, 7, 10, 13)]


def test_etc_gmt_plus_5_is_five_hours_behind() -> None:
    assert fires("0 9 * * *", utc(2024, 7, 10), 1, "Etc/GMT+5") == [utc(2024, 7, 10, 14)]


def test_inputs_must_be_aware_and_outputs_are_utc() -> None:
    parsed = parse_schedule("0 9 * * *", "Europe/Berlin")
    with pytest.raises(ValueError, match="timezone-aware"):
        parsed.next_after(datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        most_recent_due(
            parsed,
            earliest=datetime(2024, 1, 1),
            now=utc(2024, 1, 2),
            starting_deadline_seconds=None,
        )
    tokyo = timezone(timedelta(hours=9))
    found = parsed.next_after(datetime(2024, 1, 1, 16, tzinfo=tokyo))  # 08:00 in Berlin
    assert found == utc(2024, 1, 1, 8)
    assert found is not None
    assert found.tzinfo is UTC
    due = most_recent_due(
        parsed,
        earliest=datetime(2024, 1, 1, tzinfo=tokyo),
        now=datetime(2024, 1, 2, 18, tzinfo=tokyo),
        starting_deadline_seconds=None,
    )
    assert due.scheduled == utc(2024, 1, 2, 8)
    assert due.scheduled is not None
    assert due.scheduled.tzinfo is UTC
    assert due.next_time is not None
    assert due.next_time.tzinfo is UTC


# --- DST -----------------------------------------------------------------------------------
# America/New_York: 2024-03-10 02:00 EST -> 03:00 EDT; 2024-11-03 02:00 EDT -> 01:00 EST.
# Europe/Berlin: 2024-03-31 02:00 CET -> 03:00 CEST; 2024-10-27 03:00 CEST -> 02:00 CET.

SPRING_FORWARD = [
    ("30 2 * * *", "America/New_York", utc(2024, 3, 9, 12), [utc(2024, 3, 11, 6, 30)]),
    ("30 2 * * *", "Europe/Berlin", utc(2024, 3, 30, 12), [utc(2024, 4, 1, 0, 30)]),
    (
        "0 * * * *",
        "America/New_York",
        utc(2024, 3, 10, 5, 30),  # 00:30 EST
        [utc(2024, 3, 10, 6), utc(2024, 3, 10, 7), utc(2024, 3, 10, 8)],  # 01:00, 03:00, 04:00
    ),
]


@pytest.mark.parametrize(("expression", "zone", "after", "expected"), SPRING_FORWARD)
def test_a_time_that_does_not_exist_is_skipped_that_day(
    expression: str, zone: str, after: datetime, expected: list[datetime]
) -> None:
    assert fires(expression, after, len(expected), zone) == expected


def test_a_skipped_time_is_not_due() -> None:
    due = due_at(
        "30 2 * * *",
        earliest=utc(2024, 3, 9, 7, 30),  # ran 02:30 EST on the 9th
        now=utc(2024, 3, 10, 12),
        zone="America/New_York",
    )
    assert due.scheduled is None
    assert due.next_time == utc(2024, 3, 11, 6, 30)


FALL_BACK_ONCE = [
    (
        "30 1 * * *",
        "America/New_York",
        utc(2024, 11, 2, 12),
        [utc(2024, 11, 3, 5, 30), utc(2024, 11, 4, 6, 30)],  # 01:30 EDT only, then 01:30 EST
    ),
    (
        "30 2 * * *",
        "Europe/Berlin",
        utc(2024, 10, 26, 12),
        [utc(2024, 10, 27, 0, 30), utc(2024, 10, 28, 1, 30)],  # 02:30 CEST only
    ),
    (
        "*/20 1 * * *",
        "America/New_York",
        utc(2024, 11, 3, 4, 50),
        [utc(2024, 11, 3, 5), utc(2024, 11, 3, 5, 20), utc(2024, 11, 3, 5, 40)],
    ),
]


@pytest.mark.parametrize(("expression", "zone", "after", "expected"), FALL_BACK_ONCE)
def test_named_hours_run_once_in_a_repeated_hour(
    expression: str, zone: str, after: datetime, expected: list[datetime]
) -> None:
    found = fires(expression, after, len(expected) + 1, zone)
    assert found[: len(expected)] == expected
    assert found[len(expected)] > expected[-1] + timedelta(hours=12)


FALL_BACK_TWICE = [
    (
        "0 * * * *",
        "America/New_York",
        utc(2024, 11, 3, 4, 30),  # 00:30 EDT
        # 01:00 EDT, 01:00 EST, 02:00 EST
        [utc(2024, 11, 3, 5), utc(2024, 11, 3, 6), utc(2024, 11, 3, 7)],
    ),
    (
        "*/30 * * * *",
        "Europe/Berlin",
        utc(2024, 10, 26, 23, 45),  # 01:45 CEST
        # 02:00 CEST, 02:30 CEST, 02:00 CET, 02:30 CET, 03:00 CET
        [
            utc(2024, 10, 27, 0),
            utc(2024, 10, 27, 0, 30),
            utc(2024, 10, 27, 1),
            utc(2024, 10, 27, 1, 30),
            utc(2024, 10, 27, 2),
        ],
    ),
    ("@hourly", "Europe/Berlin", utc(2024, 10, 27, 0, 30), [utc(2024, 10, 27, 1)]),
]


@pytest.mark.parametrize(("expression", "zone", "after", "expected"), FALL_BACK_TWICE)
def test_every_hour_keeps_its_cadence_in_a_repeated_hour(
    expression: str, zone: str, after: datetime, expected: list[datetime]
) -> None:
    assert fires(expression, after, len(expected), zone) == expected


def test_in_the_second_pass_the_first_pass_already_ran() -> None:
    zone = "America/New_York"
    # Ran 01:30 EDT (05:30Z); now is 01:45 EST (06:45Z), the second 01:30 has passed.
    due = due_at(
        "30 1 * * *", earliest=utc(2024, 11, 3, 5, 30), now=utc(2024, 11, 3, 6, 45), zone=zone
    )
    assert due.scheduled is None
    assert due.next_time == utc(2024, 11, 4, 6, 30)


def test_in_the_second_pass_a_missed_first_pass_time_is_found() -> None:
    # Last ran the day before; now is 01:30 EST (06:30Z), after 01:45 EDT (05:45Z) passed.
    due = due_at(
        "45 1 * * *",
        earliest=utc(2024, 11, 2, 5, 45),
        now=utc(2024, 11, 3, 6, 30),
        zone="America/New_York",
    )
    assert due.scheduled == utc(2024, 11, 3, 5, 45)
    assert due.missed == 1
    assert due.next_time == utc(2024, 11, 4, 6, 45)


def test_a_first_pass_past_its_deadline_leaves_the_second_pass_to_run() -> None:
    """At most once per wall-clock time: 01:30 EDT was missed (deadline 600 s), so 01:30
    EST, the same wall-clock time an hour later, runs instead of skipping the day."""
    due = due_at(
        "30 1 * * *",
        earliest=utc(2026, 10, 31, 5, 30),  # ran 01:30 EDT the day before
        now=utc(2026, 11, 1, 6, 35),  # 01:35 EST
        deadline=600,
        zone="America/New_York",
    )
    assert due.scheduled == utc(2026, 11, 1, 6, 30)
    assert due.missed == 1
    assert due.next_time == utc(2026, 11, 2, 6, 30)


def test_before_the_second_pass_a_missed_first_pass_requeues_for_it() -> None:
    due = due_at(
        "30 1 * * *",
        earliest=utc(2026, 10, 31, 5, 30),
        now=utc(2026, 11, 1, 6, 10),  # 01:10 EST: 01:30 EDT is past its deadline
        deadline=600,
        zone="America/New_York",
    )
    assert due.scheduled is None
    assert due.next_time == utc(2026, 11, 1, 6, 30)


def test_a_first_pass_still_in_reach_runs_late_and_the_second_pass_does_not_count() -> None:
    # No deadline: the missed 01:30 EDT is still in reach at 01:35 EST and runs (late);
    # the second pass is not another time to run.
    due = due_at(
        "30 1 * * *",
        earliest=utc(2026, 10, 31, 5, 30),
        now=utc(2026, 11, 1, 6, 35),
        zone="America/New_York",
    )
    assert due.scheduled == utc(2026, 11, 1, 5, 30)
    assert due.missed == 1
    assert due.next_time == utc(2026, 11, 2, 6, 30)


def test_a_first_pass_that_ran_keeps_the_second_pass_from_running() -> None:
    due = due_at(
        "30 1 * * *",
        earliest=utc(2026, 11, 1, 5, 30),  # 01:30 EDT ran
        now=utc(2026, 11, 1, 6, 35),
        deadline=600,
        zone="America/New_York",
    )
    assert due.scheduled is None
    assert due.next_time == utc(2026, 11, 2, 6, 30)


def test_in_the_first_pass_the_second_pass_is_ahead() -> None:
    # "0 * * * *": at 01:30 EDT (05:30Z), the next run is 01:00 EST (06:00Z).
    due = due_at(
        "0 * * * *",
        earliest=utc(2024, 11, 3, 5),
        now=utc(2024, 11, 3, 5, 30),
        zone="America/New_York",
    )
    assert due.scheduled is None
    assert due.next_time == utc(2024, 11, 3, 6)


# --- @every ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "delay"),
    [
        ("@every 1h", timedelta(hours=1)),
        ("@every 90m", timedelta(minutes=90)),
        ("@every 1h30m", timedelta(minutes=90)),
        ("@every 1.5h", timedelta(minutes=90)),
        ("@every 2m30.9s", timedelta(seconds=150)),  # truncated to the second
        ("@every 500ms", timedelta(seconds=1)),  # at least a second
        ("@every 0", timedelta(seconds=1)),
        ("@every 1\u00b5s", timedelta(seconds=1)),
    ],
)
def test_every_is_a_constant_delay(expression: str, delay: timedelta) -> None:
    assert (
        parse_schedule(expression).next_after(utc(2016, 5, 19, 9, 0, 0, 700))
        == utc(2016, 5, 19, 9) + delay
    )


def test_every_is_anchored_at_earliest_not_at_now() -> None:
    due = due_at("@every 1h", earliest=utc(2016, 5, 19, 8, 59), now=utc(2016, 5, 19, 12, 30))
    assert due.scheduled == utc(2016, 5, 19, 11, 59)
    assert due.missed == 3
    assert due.next_time == utc(2016, 5, 19, 12, 59)


def test_every_keeps_its_anchor_under_a_deadline() -> None:
    """Upstream re-anchors at now - deadline, so this job would never run there."""
    due = due_at(
        "@every 1h", earliest=utc(2016, 5, 19, 8, 59), now=utc(2016, 5, 19, 9, 59, 5), deadline=10
    )
    assert due.scheduled == utc(2016, 5, 19, 9, 59)
    assert due.missed == 1
    late = due_at(
        "@every 1h", earliest=utc(2016, 5, 19, 8, 59), now=utc(2016, 5, 19, 9, 59, 10), deadline=10
    )
    assert late.scheduled is None
    assert late.next_time == utc(2016, 5, 19, 10, 59)


def test_every_before_its_first_time() -> None:
    due = due_at("@every 1h", earliest=utc(2016, 5, 19, 8, 59), now=utc(2016, 5, 19, 9))
    assert (due.scheduled, due.missed, due.next_time) == (None, 0, utc(2016, 5, 19, 9, 59))


@pytest.mark.parametrize("expression", ["*/5 * * * *", "0 9-17 * * 1-5", "30 2 * * *", "0 0 1 1 *"])
def test_remembered_schedule_times_answer_as_croniter_does(expression: str) -> None:
    """The bracket of two consecutive matches answers every query croniter would, on
    matches exactly, a second either side, and far away, in both directions."""
    rng = random.Random(expression)
    _times._BRACKETS.clear()
    base = datetime(2026, 3, 1)
    starts = [base + timedelta(seconds=rng.randrange(0, 400 * 86400)) for _ in range(200)]
    exact = [m for s in starts[:40] if (m := _times._step_wall(expression, s, True)) is not None]
    starts += exact + [m + timedelta(seconds=d) for m in exact for d in (-1, 1)]
    rng.shuffle(starts)
    for start in sorted(starts[:100]) + starts[100:]:  # runs of hits, then jumps around
        for forward in (True, False):
            expected = _times._step_wall(expression, start, forward)
            assert _times._first_wall(expression, start, forward) == expected, (start, forward)


@pytest.mark.parametrize("zone", [None, "Europe/Berlin"])
def test_a_due_time_asked_again_costs_no_croniter_step(
    zone: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a due time a decision asks around it from both sides (the newest time at or
    before now, the times after the watermark, the next one); every other decision at
    that moment (the one after the create, every other CronJob of the schedule, created
    at another time) asks the same and is answered from what the first one learned."""
    _times._BRACKETS.clear()
    _times._step_wall.cache_clear()
    due_time = utc(2026, 3, 2, 12)
    # 12:00 UTC either way (Berlin is UTC+1 in March)
    daily = parse_schedule("0 12 * * *") if zone is None else parse_schedule("0 13 * * *", zone)
    now = due_time + timedelta(milliseconds=300)

    def decision(created: datetime) -> tuple[Due, list[datetime]]:
        return (
            most_recent_due(daily, earliest=created, now=now, starting_deadline_seconds=None),
            list(schedule.times_between(daily, created, now, limit=1000)),
        )

    first = decision(due_time - timedelta(minutes=10))
    assert first[0].scheduled == due_time
    assert first[1] == [due_time]
    steps: list[str] = []
    template = _times._croniter_template

    def counted(expression: str) -> croniter:
        steps.append(expression)
        return template(expression)

    monkeypatch.setattr(_times, "_croniter_template", counted)
    assert decision(due_time - timedelta(minutes=10)) == first
    assert decision(due_time - timedelta(hours=3, seconds=7)) == first
    assert steps == []


def test_a_counted_second_pass_is_newer_than_a_later_first_pass_that_is_not() -> None:
    """Fall-back day in New York, every minute of hours 0-1, deadline 61 s, last run just
    before 01:00 EDT. At 01:00 EST (06:00Z) the 01:00 EDT run was missed and is past the
    deadline, so its second pass counts and is the newest time due; 01:59 EDT (05:59Z) is
    older, though it comes from a later wall-clock time (found by the property test)."""
    now = datetime(2024, 11, 3, 6, 0, tzinfo=UTC)
    due = most_recent_due(
        parse_schedule("* 0,1 * * *", "America/New_York"),
        earliest=now - timedelta(seconds=3601),
        now=now,
        starting_deadline_seconds=61,
    )
    assert due.scheduled == now
    assert due.next_time == datetime(2024, 11, 3, 6, 1, tzinfo=UTC)


def test_every_counts_exactly_max_missed_as_not_too_many() -> None:
    """TooManyMissedTimes starts past MAX_MISSED, for @every as for cron expressions."""
    now = utc(2016, 5, 19, 12, 0, 30)
    exact = due_at("@every 1m", earliest=now - timedelta(minutes=schedule.MAX_MISSED), now=now)
    assert (exact.missed, exact.too_many_missed) == (schedule.MAX_MISSED, False)
    one_more = due_at(
        "@every 1m", earliest=now - timedelta(minutes=schedule.MAX_MISSED + 1), now=now
    )
    assert (one_more.missed, one_more.too_many_missed) == (schedule.MAX_MISSED + 1, True)


def test_every_past_the_end_of_time_has_no_next_time_and_no_requeue() -> None:
    now = datetime(9999, 12, 31, 23, 45, tzinfo=UTC)
    due = due_at("@every 1h", earliest=datetime(9999, 12, 31, 23, 30, tzinfo=UTC), now=now)
    assert due.next_time is None
    assert schedule.requeue_after(due, now) is None
