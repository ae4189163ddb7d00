"""Several schedules as one (``spec.schedules``): the union of their times, each once."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronjob_operator import schedule
from cronjob_operator.api.cronjob_rules import shortest_gap, stagger_problem
from cronjob_operator.schedule import (
    ScheduleError,
    _catchup,
    _due,
    missed_times,
    most_recent_due,
    parse_schedule,
    parse_schedules,
)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


HOURLY_AND_EVERY_TWO = parse_schedules(["0 * * * *", "0 */2 * * *"])


def test_a_time_two_schedules_share_is_one_time() -> None:
    times = list(
        schedule.times_between(
            HOURLY_AND_EVERY_TWO, utc(2016, 5, 19), utc(2016, 5, 19, 4), limit=100
        )
    )
    assert times == [utc(2016, 5, 19, h) for h in (1, 2, 3, 4)]


def test_the_next_time_is_the_earliest_of_any_schedule() -> None:
    union = parse_schedules(["0 9 * * 1-5", "30 12 * * 6"])
    friday_evening = utc(2016, 5, 20, 18)
    assert union.next_after(friday_evening) == utc(2016, 5, 21, 12, 30)
    assert union.expression == "0 9 * * 1-5; 30 12 * * 6"


def test_the_due_time_and_missed_count_are_over_the_distinct_times() -> None:
    due = most_recent_due(
        HOURLY_AND_EVERY_TWO,
        earliest=utc(2016, 5, 19),
        now=utc(2016, 5, 19, 4, 30),
        starting_deadline_seconds=None,
    )
    assert due.scheduled == utc(2016, 5, 19, 4)
    assert due.missed == 4  # 01, 02, 03, 04: 02 and 04 are in both, counted once
    assert due.next_time == utc(2016, 5, 19, 5)
    found = missed_times(
        HOURLY_AND_EVERY_TWO,
        earliest=utc(2016, 5, 19),
        now=utc(2016, 5, 19, 4, 30),
        starting_deadline_seconds=None,
        limit=3,
    )
    assert found == (utc(2016, 5, 19, 2), utc(2016, 5, 19, 3), utc(2016, 5, 19, 4))


def test_more_than_the_bound_over_a_union_is_too_many() -> None:
    union = parse_schedules(["* * * * *", "*/2 * * * *"])
    due = most_recent_due(
        union, earliest=utc(2016, 5, 19), now=utc(2016, 5, 19, 3), starting_deadline_seconds=None
    )
    assert due.missed == schedule.MAX_MISSED + 1
    assert due.too_many_missed


def test_an_error_names_the_entry() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedules(["0 * * * *", "61 * * * *"])
    assert caught.value.field == "spec.schedules[1]"
    assert str(caught.value).startswith('spec.schedules[1]: "61 * * * *": ')


@pytest.mark.parametrize("every", ["@every 1h", "@every 90m"])
def test_every_cannot_be_one_of_several(every: str) -> None:
    with pytest.raises(ScheduleError, match=r"spec.schedules\[0\].*@every is a delay"):
        parse_schedules([every, "0 * * * *"])


def test_an_empty_list_is_refused() -> None:
    with pytest.raises(ScheduleError, match="at least one"):
        parse_schedules([])


def test_the_stagger_check_uses_the_union_gap() -> None:
    union = parse_schedules(["0 * * * *", "30 * * * *"])
    assert shortest_gap(union) == timedelta(minutes=30)
    assert stagger_problem(union, 1799) is None
    problem = stagger_problem(union, 1800)
    assert problem is not None
    assert "0 * * * *; 30 * * * *" in problem
    assert "use at most 1799" in problem


CRONS = st.sampled_from(
    ["0 * * * *", "*/20 * * * *", "15,45 */3 * * *", "0 9-17 * * 1-5", "30 2 * * *", "@daily"]
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(CRONS, min_size=1, max_size=4),
    st.sampled_from(["UTC", "America/New_York", "Europe/Berlin"]),
    st.integers(0, 400 * 24),
)
def test_the_union_is_the_sorted_set_of_the_members_times(
    expressions: list[str], zone: str, hours: int
) -> None:
    start = utc(2025, 1, 1) + timedelta(hours=hours)
    end = start + timedelta(days=2)
    union = parse_schedules(expressions, zone)
    expected = sorted(
        {
            moment
            for expression in expressions
            for moment in schedule.times_between(
                parse_schedule(expression, zone), start, end, limit=1000
            )
        }
    )
    assert list(schedule.times_between(union, start, end, limit=1000)) == expected
    due = most_recent_due(union, earliest=start, now=end, starting_deadline_seconds=None)
    assert due.scheduled == (expected[-1] if expected else None)
    assert due.missed == min(len(expected), schedule.MAX_MISSED + 1)


def test_every_walk_of_a_union_walks_a_schedule_listed_ten_times_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The due time, the missed times and the next time of nine copies of one schedule
    and another walk each distinct member once, and answer as the two listed once."""
    calls: list[tuple[str, str]] = []

    def counted(walk: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(member: schedule.Schedule, *args: Any, **kwargs: Any) -> Any:
            calls.append((walk, member.expression))
            return real(member, *args, **kwargs)

        return call

    monkeypatch.setattr(_due, "most_recent_due", counted("due", _due.most_recent_due))
    monkeypatch.setattr(_catchup, "missed_times", counted("missed", _catchup.missed_times))
    monkeypatch.setattr(
        schedule.Schedule, "next_after", counted("next", schedule.Schedule.next_after)
    )
    listed = ["* * * * *"] * 9 + ["*/2 * * * *"]
    copies, once = (parse_schedules(x, "America/New_York") for x in (listed, listed[-2:]))
    window: dict[str, Any] = {
        "earliest": utc(2026, 3, 8, 6),
        "now": utc(2026, 3, 8, 8),
        "starting_deadline_seconds": 600,
    }
    walks: list[Callable[[schedule.AnySchedule], object]] = [
        lambda union: most_recent_due(union, **window),
        lambda union: missed_times(union, **window),
        lambda union: union.next_after(utc(2026, 3, 8, 7)),
    ]
    for walk in walks:
        expected = walk(once)
        calls.clear()
        assert walk(copies) == expected
        assert sorted(calls) == sorted(set(calls)), f"a copy walked again: {sorted(calls)}"
        assert {expression for _, expression in calls} == set(listed)
