"""Worked examples of the catch-up times (``catchUpPolicy: All``) and the accounting walk;
tests/unit/test_schedule_properties.py checks both against brute force."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronjob_operator import schedule
from cronjob_operator.schedule import _times, _zones, missed_times, parse_schedule, times_between


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def test_an_outage_of_three_hours_gives_the_three_hourly_times_oldest_first() -> None:
    found = missed_times(
        parse_schedule("0 * * * *"),
        earliest=utc(2016, 5, 19, 9),
        now=utc(2016, 5, 19, 12, 30),
        starting_deadline_seconds=None,
    )
    assert found == (utc(2016, 5, 19, 10), utc(2016, 5, 19, 11), utc(2016, 5, 19, 12))


def test_the_deadline_limits_which_missed_times_are_in_reach() -> None:
    found = missed_times(
        parse_schedule("0 * * * *"),
        earliest=utc(2016, 5, 19, 9),
        now=utc(2016, 5, 19, 12, 30),
        starting_deadline_seconds=2 * 3600,  # 10:30 and earlier are out of reach
    )
    assert found == (utc(2016, 5, 19, 11), utc(2016, 5, 19, 12))


def test_a_deadline_of_zero_leaves_nothing_in_reach() -> None:
    found = missed_times(
        parse_schedule("* * * * *"),
        earliest=utc(2016, 5, 19, 9),
        now=utc(2016, 5, 19, 9, 5),
        starting_deadline_seconds=0,
    )
    assert found == ()


def test_more_than_the_bound_gives_the_newest_bound_of_them() -> None:
    found = missed_times(
        parse_schedule("* * * * *"),
        earliest=utc(2016, 5, 19, 9),
        now=utc(2016, 5, 19, 12),
        starting_deadline_seconds=None,
    )
    assert len(found) == schedule.MAX_MISSED
    assert found[0] == utc(2016, 5, 19, 12) - timedelta(minutes=schedule.MAX_MISSED - 1)
    assert found[-1] == utc(2016, 5, 19, 12)


def test_a_year_of_every_minute_downtime_costs_about_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps = 0
    instants = _zones.instants

    def counting(*args: object) -> object:
        nonlocal steps
        steps += 1
        return instants(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_times, "instants", counting)
    found = missed_times(
        parse_schedule("* * * * *"),
        earliest=utc(2016, 5, 19, 10),
        now=utc(2017, 5, 19, 10, 0, 30),
        starting_deadline_seconds=None,
    )
    assert len(found) == schedule.MAX_MISSED
    assert steps <= schedule.MAX_MISSED + 10


def test_every_is_anchored_at_earliest() -> None:
    found = missed_times(
        parse_schedule("@every 90m"),
        earliest=utc(2016, 5, 19, 9, 0, 0),
        now=utc(2016, 5, 19, 13, 30),
        starting_deadline_seconds=None,
    )
    assert found == (utc(2016, 5, 19, 10, 30), utc(2016, 5, 19, 12), utc(2016, 5, 19, 13, 30))


def test_the_walk_stops_at_the_limit_and_resumes_where_it_stopped() -> None:
    every_minute = parse_schedule("* * * * *")
    first = list(times_between(every_minute, utc(2016, 5, 19, 9), utc(2016, 5, 19, 10), limit=25))
    assert first[0] == utc(2016, 5, 19, 9, 1)
    assert len(first) == 25
    rest = list(times_between(every_minute, first[-1], utc(2016, 5, 19, 10), limit=100))
    assert rest[0] == utc(2016, 5, 19, 9, 26)
    assert rest[-1] == utc(2016, 5, 19, 10)
    assert len(first) + len(rest) == 60


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="limit must be >= 1"):
        missed_times(
            parse_schedule("* * * * *"),
            earliest=utc(2016, 5, 19),
            now=utc(2016, 5, 20),
            starting_deadline_seconds=None,
            limit=limit,
        )
    with pytest.raises(ValueError, match="limit must be >= 1"):
        list(
            times_between(
                parse_schedule("* * * * *"), utc(2016, 5, 19), utc(2016, 5, 20), limit=limit
            )
        )
