"""The typed status of ``controllers/cronjob/view.py``: parsed once, rendered once.

A Job's times are parsed on first read, at most once.

``status_of`` parses every timestamp the decision reads (``status.TIMES``; ``stored_status``
is that status frozen, copying only what holds a time) and
``api_status`` renders them back: a status the controller wrote comes back unchanged,
``stamp`` is what the API server keeps of a time, and ``time_at`` reads an unset or empty
timestamp as None.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from cronjob_operator.controllers.cronjob import view
from cronjob_operator.controllers.cronjob.view import (
    JobTimes,
    api_status,
    stamp,
    status_of,
    stored_status,
    time_at,
)
from cronjob_operator.runtime.controllerutil import parse_time
from cronjob_operator.runtime.objects import FrozenDict, freeze

AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
STORED = {
    "active": [{"name": "cj-1", "uid": "u1"}],
    "lastScheduleTime": "2026-12-01T09:30:00Z",
    "lastSuccessfulTime": "2026-12-01T09:00:00Z",
    "lastFailureTime": "2026-12-01T08:00:00Z",
    "bufferedRun": "2026-12-01T10:00:00Z",
    "nextScheduleTime": "2026-12-01T10:30:00Z",
    "consecutiveFailures": 1,
    "observedSchedule": {"schedule": "*/30 * * * *", "since": "2026-11-30T00:00:00Z"},
    "skippedRuns": {"accountedThrough": "2026-12-01T09:30:00Z", "suspended": 2},
    "backfill": {
        "token": "b",
        "from": "2026-11-01T00:00:00Z",
        "to": "2026-11-02T00:00:00Z",
        "next": "2026-11-01T12:00:00Z",
        "state": "Running",
    },
    "conditions": [{"type": "Available", "lastTransitionTime": "2026-12-01T00:00:00Z"}],
}


def test_a_written_status_parses_to_datetimes_and_renders_back_unchanged() -> None:
    status = status_of(freeze(STORED))
    assert time_at(status, "lastScheduleTime") == AT
    assert time_at(status["observedSchedule"], "since") == datetime(2026, 11, 30, tzinfo=UTC)
    assert time_at(status["skippedRuns"], "accountedThrough") == AT
    assert time_at(status["backfill"], "next") == datetime(2026, 11, 1, 12, tzinfo=UTC)
    assert status["conditions"] == STORED["conditions"]  # the runtime's, left as strings
    assert api_status(status) == STORED


def test_an_offset_is_read_as_utc_and_unset_or_empty_times_as_none() -> None:
    status = status_of({"lastScheduleTime": "2026-12-01T10:30:00+01:00", "bufferedRun": ""})
    moment = time_at(status, "lastScheduleTime")
    assert moment == AT
    assert moment is not None
    assert moment.tzinfo is UTC
    assert time_at(status, "bufferedRun") is None
    assert time_at(status, "lastSuccessfulTime") is None
    assert time_at(None, "accountedThrough") is None


def test_stamp_keeps_what_the_api_server_keeps() -> None:
    later = (AT + timedelta(microseconds=700_000)).astimezone(timezone(timedelta(hours=2)))
    assert stamp(later) == AT
    assert stamp(later).tzinfo is UTC
    assert api_status({"lastScheduleTime": stamp(later)}) == {
        "lastScheduleTime": "2026-12-01T09:30:00Z"
    }


def test_a_jobs_times_are_parsed_once() -> None:
    job = freeze(
        {
            "metadata": {"name": "cj-1", "uid": "u1", "creationTimestamp": "2026-12-01T09:30:00Z"},
            "status": {
                "startTime": "2026-12-01T09:30:01Z",
                "completionTime": "2026-12-01T09:31:00Z",
                "conditions": [{"type": "Complete", "status": "True"}],
            },
        }
    )
    times = JobTimes(job)
    assert times.created == AT
    assert times.started == AT + timedelta(seconds=1)
    assert times.completed == AT + timedelta(minutes=1)
    assert times.failed is None


def test_a_jobs_times_are_parsed_on_first_read_and_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[object] = []

    def counting(value: object) -> datetime | None:
        parsed.append(value)
        return parse_time(value)  # type: ignore[arg-type]

    monkeypatch.setattr(view, "parse_time", counting)
    times = JobTimes(freeze({"metadata": {"creationTimestamp": "2026-12-01T09:30:00Z"}}))
    assert parsed == []
    assert times.created == AT
    assert times.created == AT
    assert parsed == ["2026-12-01T09:30:00Z"]


def test_the_stored_status_is_the_parsed_status_frozen_and_shares_what_holds_no_time() -> None:
    cached = freeze(STORED)
    stored = stored_status(cached)
    assert stored == freeze(status_of(cached))
    assert isinstance(stored, FrozenDict)
    assert isinstance(stored["observedSchedule"], FrozenDict)
    assert stored["conditions"] is cached["conditions"]
    assert stored_status(freeze({})) == {}
