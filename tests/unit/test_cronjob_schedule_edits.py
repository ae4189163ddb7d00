"""Editing a CronJob's schedule or time zone: no run for a time before the edit was seen,
no day run twice, and the edit remembered in status across restarts (on the runtime's
fake client; the real-cluster versions are in tests/integration/test_cronjob_controller.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.controllers.cronjob.jobs import job_name
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.kinds import JOB
from tests.unit import cronjob_harness
from tests.unit.cronjob_harness import Harness

CREATED = datetime(2016, 5, 19, 9, 59, tzinfo=UTC)
FIRST = datetime(2016, 5, 19, 10, tzinfo=UTC)
NS, NAME = "ns", "edited"


def hourly_that_ran_at(schedule: str, ran: datetime, zone: str | None = None) -> Harness:
    """A CronJob on ``schedule`` whose last run was ``ran`` (reconciled then)."""
    spec: dict[str, Any] = {"schedule": schedule, "concurrencyPolicy": "Allow"}
    if zone:
        spec["timeZone"] = zone
    world = Harness(
        cronjob_harness.cronjob(NAME, NS, created=CREATED, spec=spec),
        start=CREATED,
        namespace=NS,
        name=NAME,
    )
    world.reconcile_at(ran + timedelta(seconds=1))
    assert world.status()["lastScheduleTime"] == rfc3339(ran)
    for job in world.jobs():  # finished and pruned: only new creates matter below
        world.client.delete(JOB, job, namespace=NS)
    return world


def test_a_schedule_edit_does_not_run_a_time_before_the_edit() -> None:
    world = hourly_that_ran_at("0 * * * *", FIRST)  # ran 10:00
    world.edit(lambda cronjob: cronjob["spec"].update(schedule="30 * * * *"))  # seen at 10:40
    result = world.reconcile_at(FIRST + timedelta(minutes=40))
    assert world.jobs() == {}, "10:30 is before the edit: no catch-up run"
    assert result.requeue_after == pytest.approx(timedelta(minutes=50).total_seconds() + 0.1)
    world.reconcile_at(FIRST + timedelta(minutes=90, seconds=1))
    assert list(world.jobs()) == [job_name(NAME, FIRST + timedelta(minutes=90))]


def test_a_time_zone_edit_does_not_run_the_day_twice() -> None:
    nine = datetime(2016, 12, 1, 9, tzinfo=UTC)
    world = hourly_that_ran_at("0 9 * * *", nine)
    # 09:00 there is 10:00Z in winter
    world.edit(lambda cronjob: cronjob["spec"].update(timeZone="Atlantic/Azores"))
    result = world.reconcile_at(nine + timedelta(minutes=90))
    assert world.jobs() == {}, "09:00 Azores today (10:00Z) is before the edit"
    tomorrow = nine + timedelta(days=1, hours=1)
    assert result.requeue_after == pytest.approx((tomorrow - nine).total_seconds() - 5400 + 0.1)


def test_the_edit_is_remembered_across_restarts() -> None:
    """The operator was down when the schedule changed, and every reconcile is by a fresh
    reconciler (as after a restart): only status can tell them what ran against what."""
    world = hourly_that_ran_at("0 * * * *", FIRST)
    world.edit(lambda cronjob: cronjob["spec"].update(schedule="30 * * * *"))
    for minutes in (50, 55, 59):  # first sight of the edit at 10:50, then restarts
        world.restart()
        world.reconcile_at(FIRST + timedelta(minutes=minutes))
    assert world.jobs() == {}
    observed = world.status()["observedSchedule"]
    assert observed == {"schedule": "30 * * * *", "since": "2016-05-19T10:50:00Z"}
