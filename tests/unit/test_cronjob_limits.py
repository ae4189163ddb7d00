"""Run window, run limit and exclusions (issue 40 item 2): the decision on the fake client.

The reconciler on the runtime's fake client (``cronjob_harness``) with an injected clock,
as ``test_cronjob_policies``: a restart is a new reconciler on the same API, and every
count is read back from status (which survives restarts).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from cronjob_operator import schedule as schedules
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import SkipReason
from cronjob_operator.api.batch_v1_settings import CronJobSettings
from cronjob_operator.controllers.cronjob import limits
from cronjob_operator.controllers.cronjob.jobs import JobSets, job_name
from cronjob_operator.controllers.cronjob.status import CronJobStatus
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.kinds import JOB
from tests.unit import cronjob_harness
from tests.unit.cronjob_harness import Harness
from tests.unit.test_cronjob_policies import (
    counter,
    counts,
    created_order,
    request_run,
    settle,
)

NS, NAME = "default", "report"
CREATED = datetime(2016, 5, 19, 0, 0, tzinfo=UTC)


def at(hours: float) -> datetime:
    return CREATED + timedelta(hours=hours)


def world_of(**spec: Any) -> Harness:
    """A CronJob created at CREATED, hourly unless ``spec`` says otherwise."""
    body = cronjob_harness.cronjob(
        NAME, NS, created=CREATED, spec={"schedule": "0 * * * *", **spec}
    )
    return Harness(body, start=CREATED, namespace=NS, name=NAME)


def hourly(world: Harness, hours: range) -> None:
    """Reconcile (with the follow-ups) a minute after each of ``hours``."""
    for hour in hours:
        settle(world, at(hour + 1 / 60))


# --- window ---------------------------------------------------------------------------


def test_no_run_outside_the_window_and_none_counted_as_skipped() -> None:
    world = world_of(window={"start": rfc3339(at(2)), "end": rfc3339(at(4))})
    settle(world, at(0.5))
    assert world.status()["nextScheduleTime"] == rfc3339(at(2)), "01:00 is before start"
    hourly(world, range(1, 7))
    assert created_order(world) == [job_name(NAME, at(2)), job_name(NAME, at(3))]
    assert "nextScheduleTime" not in world.status(), "04:00 is the (exclusive) end"
    assert not {
        k: v
        for k, v in (world.status().get("skippedRuns") or {}).items()
        if k != "accountedThrough"
    }
    available = world.condition("Available")
    assert (available["status"], available["reason"]) == ("False", "WindowEnded")
    assert "spec.window.end 2016-05-19T04:00:00Z has passed" in available["message"]


def test_a_staggered_run_of_the_last_time_in_the_window_is_still_due_after_its_end() -> None:
    """01:00 is inside the window (end 01:00:01); staggered, it is due at 01:27:27."""
    offset = rules.stagger_offset(NS, NAME, 1800)
    assert offset == timedelta(minutes=27, seconds=27)
    world = world_of(staggerSeconds=1800, window={"end": rfc3339(at(1) + timedelta(seconds=1))})
    settle(world, at(1.25))
    assert world.status()["nextScheduleTime"] == rfc3339(at(1) + offset)
    assert world.condition("Available")["status"] == "True"
    settle(world, at(1.5))
    assert created_order(world) == [job_name(NAME, at(0)), job_name(NAME, at(1))]
    assert world.condition("Available")["reason"] == "WindowEnded"


def test_a_time_before_a_start_moved_earlier_still_runs() -> None:
    """The skip accounting's watermark never passes now: one at the start (02:00) would
    swallow 01:00 once the start moves before it, neither run nor counted."""
    world = world_of(window={"start": rfc3339(at(2))})
    settle(world, at(0.5))
    watermark = (world.status().get("skippedRuns") or {}).get("accountedThrough")
    assert watermark is None or watermark <= rfc3339(at(0.5)), "no watermark past now"
    world.edit(lambda body: body["spec"]["window"].update(start=rfc3339(at(1))))
    settle(world, at(0.75))
    assert world.status()["nextScheduleTime"] == rfc3339(at(1))
    hourly(world, range(1, 3))
    assert created_order(world) == [job_name(NAME, at(1)), job_name(NAME, at(2))]
    assert counts(world) == {}


def test_an_every_schedule_keeps_its_times_when_a_window_opens() -> None:
    """@every counts from the last run (or the creation): the window only filters those
    times, it does not move them to its start."""
    world = world_of(schedule="@every 1h", window={"start": rfc3339(at(2.5))})
    settle(world, at(0.5))
    assert world.status()["nextScheduleTime"] == rfc3339(at(3))
    hourly(world, range(1, 5))
    assert created_order(world) == [job_name(NAME, at(3)), job_name(NAME, at(4))]
    assert counts(world) == {}


def test_a_window_start_between_two_times_runs_the_first_time_after_it() -> None:
    world = world_of(window={"start": rfc3339(at(1.5))})
    hourly(world, range(1, 3))
    assert created_order(world) == [job_name(NAME, at(2))]
    assert world.condition("Available")["status"] == "True"


# --- run limit ------------------------------------------------------------------------


def test_the_limit_is_reached_exactly_and_scheduling_stops_with_a_reason() -> None:
    world = world_of(maxScheduledRuns=2)
    settle(world, at(0.5))
    assert world.status()["scheduledRuns"] == {"count": 0, "remaining": 2}
    hourly(world, range(1, 2))
    assert world.status()["scheduledRuns"] == {
        "count": 1,
        "countedThrough": rfc3339(at(1)),
        "remaining": 1,
    }
    assert world.condition("Available")["status"] == "True"
    hourly(world, range(2, 6))
    assert created_order(world) == [job_name(NAME, at(1)), job_name(NAME, at(2))]
    assert world.status()["scheduledRuns"] == {
        "count": 2,
        "countedThrough": rfc3339(at(2)),
        "remaining": 0,
    }
    assert "nextScheduleTime" not in world.status()
    available = world.condition("Available")
    assert (available["status"], available["reason"]) == ("False", "RunLimitReached")
    assert "spec.maxScheduledRuns=2 reached (2 scheduled runs" in available["message"]
    assert counter(world, SkipReason.CATCH_UP_BOUND) == 0, "later times are no runs"


def test_a_restart_between_the_create_and_the_status_write_counts_the_run_once() -> None:
    world = world_of(maxScheduledRuns=2, catchUpPolicy="All")
    settle(world, at(0.5))
    world.reconcile_once_at(at(3.5))  # creates 01:00; the status write is the follow-up's
    assert world.status()["scheduledRuns"]["count"] == 0
    world.restart()  # the manager dies before the follow-up
    settle(world, at(3.5))
    world.restart()
    settle(world, at(3.75))
    assert created_order(world) == [job_name(NAME, at(1)), job_name(NAME, at(2))]
    assert max(world.runs().values()) == 1
    assert world.status()["scheduledRuns"] == {
        "count": 2,
        "countedThrough": rfc3339(at(2)),
        "remaining": 0,
    }


def test_a_stale_status_write_of_another_replica_does_not_count_a_run_twice() -> None:
    world = world_of(maxScheduledRuns=3)
    settle(world, at(0.5))
    hourly(world, range(1, 2))
    stale = world.cronjob()  # a replica that still holds the CronJob of before 02:00
    hourly(world, range(2, 3))
    world.reconcile_stale_at(at(2.5), stale)
    assert world.status()["scheduledRuns"]["count"] == 2


def test_a_run_recorded_by_its_create_and_deleted_at_once_is_still_counted() -> None:
    """The first reconcile writes status with its create (it records observedSchedule):
    lastScheduleTime holds the run, which the count does not yet; a TTL controller then
    deletes the finished Job before any other reconcile sees it."""
    world = world_of(maxScheduledRuns=2)
    world.reconcile_once_at(at(1.5))
    assert world.status()["lastScheduleTime"] == rfc3339(at(1))
    assert world.status()["scheduledRuns"]["count"] == 0
    world.client.delete(JOB, job_name(NAME, at(1)), namespace=NS)
    settle(world, at(1.75))
    assert world.status()["scheduledRuns"]["count"] == 1


def test_raising_the_limit_resumes_scheduling() -> None:
    world = world_of(maxScheduledRuns=1)
    hourly(world, range(1, 3))
    assert world.condition("Available")["reason"] == "RunLimitReached"
    world.edit(lambda body: body["spec"].update(maxScheduledRuns=2))
    hourly(world, range(3, 5))
    assert created_order(world) == [job_name(NAME, at(1)), job_name(NAME, at(3))]
    assert world.status()["scheduledRuns"]["remaining"] == 0


def test_a_buffered_time_past_a_lowered_limit_does_not_start() -> None:
    world = world_of(maxScheduledRuns=3, concurrencyPolicy="BufferOne")
    hourly(world, range(1, 3))  # 01:00 runs (and stays active), 02:00 waits
    assert world.status()["bufferedRun"] == rfc3339(at(2))
    world.edit(lambda body: body["spec"].update(maxScheduledRuns=1))
    world.finish(job_name(NAME, at(1)), at=at(2.5))
    settle(world, at(2.5))
    assert created_order(world) == [job_name(NAME, at(1))]
    assert "bufferedRun" not in world.status()
    assert world.condition("Available")["reason"] == "RunLimitReached"


def test_manual_runs_do_not_count() -> None:
    world = world_of(maxScheduledRuns=1)
    request_run(world, "now")
    settle(world, at(0.5))
    assert created_order(world) == [rules.manual_job_name(NAME, "now")], "the manual run ran"
    assert world.status()["scheduledRuns"]["count"] == 0
    hourly(world, range(1, 2))
    assert created_order(world)[1:] == [job_name(NAME, at(1))]
    assert world.status()["scheduledRuns"]["count"] == 1


def _job(scheduled: datetime, created: datetime) -> dict[str, Any]:
    """A Job of NAME's run at ``scheduled``, created at ``created``."""
    name = job_name(NAME, scheduled)
    return {"metadata": {"name": name, "creationTimestamp": rfc3339(created)}}


def test_uncounted_runs_past_the_limit_count_in_the_order_their_jobs_were_created() -> None:
    """Two runs no status write counted, one room left: the one created first counts,
    even when its scheduled time is the later (a backfill ran an older time after it)."""
    status: CronJobStatus = {}
    jobs = JobSets(successful=[_job(at(23), at(23) + timedelta(seconds=1)), _job(at(22), at(23.5))])
    limits.count_runs(status, CronJobSettings(max_scheduled_runs=1), NAME, jobs, stored_last=None)
    assert status["scheduledRuns"] == {
        "count": 1,
        "countedThrough": at(23),
        "remaining": 0,
    }


def test_a_recorded_run_without_its_job_counts_first_and_one_just_created_last() -> None:
    """``lastScheduleTime`` with no Job left ran before anything the cache holds; a Job only
    ``status.active`` lists is this reconcile's, created after every cached one."""
    status: CronJobStatus = {
        "lastScheduleTime": at(20),
        "active": [{"name": job_name(NAME, at(21))}],
    }
    jobs = JobSets(successful=[_job(at(23), at(23) + timedelta(seconds=1))])
    limits.count_runs(status, CronJobSettings(max_scheduled_runs=2), NAME, jobs, stored_last=None)
    assert status["scheduledRuns"] == {
        "count": 2,
        "countedThrough": at(23),
        "remaining": 0,
    }, "20:00 (recorded) and 23:00 (cached) fill the room; 21:00 was created last"


# --- exclusions -----------------------------------------------------------------------


def test_excluded_times_are_skipped_and_counted_with_their_reason() -> None:
    world = world_of(exclusions={"schedules": ["0 2 * * *"], "dates": ["2016-05-20"]})
    settle(world, at(1.5))
    assert world.status()["nextScheduleTime"] == rfc3339(at(3)), "02:00 is excluded"
    hourly(world, range(1, 4))
    assert created_order(world) == [job_name(NAME, at(1)), job_name(NAME, at(3))]
    assert world.status()["skippedRuns"]["excluded"] == 1
    assert counter(world, SkipReason.EXCLUDED) == 1
    messages = [e.message for e in world.recorder.events if e.reason == "RunsSkipped"]
    assert messages == [
        "1 scheduled run(s) skipped (1 Excluded), the newest at 2016-05-19T02:00:00Z; "
        "status.skippedRuns counts them"
    ]
    settle(world, at(23.5))
    assert world.status()["nextScheduleTime"] == rfc3339(at(48)), "the 20th is excluded"
    settle(world, at(48.5))
    assert world.status()["skippedRuns"]["excluded"] == 1 + 24
    assert world.status()["skippedRuns"]["catchUpBound"] == 19


def test_an_invalid_stored_window_is_reported_by_field() -> None:
    world = world_of(exclusions={"dates": ["2016-02-30"]})
    settle(world, at(1.5))
    assert created_order(world) == []
    degraded = world.condition("Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidWindow")
    assert degraded["message"].startswith("spec.exclusions.dates[0]: '2016-02-30': must be")


def test_an_unusable_stored_limit_alone_is_reported_by_field() -> None:
    """Without a window or exclusions too: 0 read as a limit already reached."""
    world = world_of(maxScheduledRuns=0)
    settle(world, at(1.5))
    assert created_order(world) == []
    degraded = world.condition("Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidWindow")
    assert degraded["message"] == (
        "spec.maxScheduledRuns: 0: must be a whole number of at least 1, or unset for no limit"
    )
    assert world.condition("Available")["reason"] != "RunLimitReached"


def test_a_stored_limit_of_another_type_is_reported_as_not_fitting_the_schema() -> None:
    """ "5" ran unlimited and unreported once; the schema's type is checked before any
    field is read (``controllers.stored``), for this field as for every other."""
    world = world_of(maxScheduledRuns="5")
    settle(world, at(1.5))
    assert created_order(world) == []
    (event,) = {(e.reason, e.message) for e in world.recorder.events if e.type == "Warning"}
    assert event[0] == "InvalidStoredObject"
    assert event[1].startswith("spec.maxScheduledRuns: stored as string '5', not integer")


def test_more_exclusion_schedules_than_the_bound_stored_past_validation_run_nothing() -> None:
    """Each exclusion schedule is asked about every time walked: eleven, past the
    schema's maxItems, are refused before any is parsed (``controllers.stored``)."""
    world = world_of(exclusions={"schedules": [f"{minute} 3 * * *" for minute in range(11)]})
    settle(world, at(1.5))
    assert created_order(world) == []
    (event,) = {(e.reason, e.message) for e in world.recorder.events if e.type == "Warning"}
    assert event == (
        "InvalidStoredObject",
        "spec.exclusions.schedules: 11 entries, more than 10, which the CronJob schema does "
        "not admit (it was stored before the rule or with validation bypassed); nothing is "
        "done for this CronJob until it is corrected (kubectl edit cronjobs report, or "
        "delete and re-create it)",
    )


# --- the window itself ----------------------------------------------------------------


def test_an_excluded_date_is_read_in_the_time_zone() -> None:
    window = rules.parse_spec_window(
        {"timeZone": "America/New_York", "exclusions": {"dates": ["2016-05-18"]}}
    )
    assert window is not None
    assert window.excludes(datetime(2016, 5, 19, 3, 59, tzinfo=UTC))  # 23:59 on the 18th
    assert not window.excludes(datetime(2016, 5, 19, 4, 0, tzinfo=UTC))


def test_window_edges_are_inclusive_start_exclusive_end() -> None:
    window = schedules.Window(ZoneInfo("UTC"), start=at(1), end=at(2))
    assert window.runs(at(1))
    assert not window.runs(at(2))
    assert not window.runs(at(1) - timedelta(microseconds=1))
    schedule = schedules.parse_schedule("*/30 * * * *")
    assert list(window.times_after(schedule, at(0))) == [at(1), at(1.5)]


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            {"window": {"start": "2026-01-02T00:00:00Z", "end": "2026-01-01T00:00:00Z"}},
            ("spec.window.end", "2026-01-01T00:00:00Z", "must be after spec.window.start"),
        ),
        (
            {"window": {"start": "tomorrow"}},
            (
                "spec.window.start",
                "tomorrow",
                "must be an RFC 3339 time such as 2026-01-01T00:00:00Z",
            ),
        ),
        (
            {"maxScheduledRuns": 0},
            (
                "spec.maxScheduledRuns",
                0,
                "must be a whole number of at least 1, or unset for no limit",
            ),
        ),
        (
            {"exclusions": {"schedules": ["0 * * * *", "61 * * * *"]}},
            ("spec.exclusions.schedules[1]", "61 * * * *", "minute 61 is out of range 0-59"),
        ),
        # Stored past the schema: refused by count and length before anything is parsed.
        (
            {"exclusions": {"dates": ["2026-01-01"] * 367}},
            ("spec.exclusions.dates", "<367 dates>", "must list at most 366 dates"),
        ),
        (
            {"exclusions": {"schedules": ["0 * * * *"] * 11}},
            ("spec.exclusions.schedules", "<11 schedules>", "must list at most 10 schedules"),
        ),
        (
            {"exclusions": {"schedules": ["0 * * * *", "0," * 600 + "0 * * * *"]}},
            (
                "spec.exclusions.schedules[1]",
                "0," * 20 + "...",
                "must be at most 1024 characters (five short cron fields)",
            ),
        ),
        (
            {"exclusions": {"dates": 20260101}},
            ("spec.exclusions.dates", 20260101, "must be a list of dates"),
        ),
    ],
)
def test_window_problems_name_the_field(
    spec: dict[str, Any], problem: tuple[str, Any, str]
) -> None:
    assert rules.window_problems(spec) == [problem]


def test_excluded_dates_are_passed_a_day_at_a_time() -> None:
    """A month of excluded days under an every-minute schedule: 43,200 excluded times,
    passed in 30 steps (the walk's bound is 200), so the next time is the 31st's first."""
    window = rules.parse_spec_window(
        {"exclusions": {"dates": [f"2026-01-{day:02d}" for day in range(1, 31)]}}
    )
    assert window is not None
    schedule = schedules.parse_schedule("* * * * *")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert window.next_after(schedule, start) == datetime(2026, 1, 31, tzinfo=UTC)


def test_an_every_schedule_walked_past_an_excluded_date_keeps_its_times() -> None:
    window = rules.parse_spec_window({"exclusions": {"dates": ["2026-01-01"]}})
    assert window is not None
    schedule = schedules.parse_schedule("@every 1h")
    after = datetime(2026, 1, 1, 0, 30, tzinfo=UTC)  # its times: 01:30, 02:30, ...
    assert window.next_after(schedule, after) == datetime(2026, 1, 2, 0, 30, tzinfo=UTC)


def test_more_excluded_times_in_a_row_than_the_bound_show_no_next_time() -> None:
    window = rules.parse_spec_window({"exclusions": {"schedules": ["* 0-11 * * *"]}})
    assert window is not None
    schedule = schedules.parse_schedule("* * * * *")
    assert window.next_after(schedule, datetime(2026, 1, 1, tzinfo=UTC)) is None  # 720 in a row
    assert window.next_after(schedule, datetime(2026, 1, 1, 9, tzinfo=UTC)) == datetime(
        2026, 1, 1, 12, tzinfo=UTC
    )
