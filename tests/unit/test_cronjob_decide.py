"""The decision as a table, in the form of the built-in controller's TestControllerV2SyncCronJob.

Each row is a CronJob (concurrency policy, suspend, deadline, whether it ran in the
prior hour, whether that run is still active) seen at one moment; ``decide`` is asked
directly (no client: ``settle`` plays each create and Replace delete as succeeding), and
the row says what its Plan does: create a Job, delete the active one, how many runs are
active after it, how many Warning events, when to look again, whether it writes status.
The times are upstream's: an hourly schedule, 2016-05-19 (a Thursday), 10:00 UTC the top
of the hour.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers.cronjob.decide import decide
from cronjob_operator.controllers.cronjob.jobs import classify, job_name, job_reference
from cronjob_operator.controllers.cronjob.plan import Create, Created, Delete, Deleted, Event, Plan
from cronjob_operator.controllers.cronjob.view import view_of
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controllerutil import rfc3339

NAME, NS, UID = "mycronjob", "snazzycats", "1a2b3c"
ON_THE_HOUR = "0 * * * *"
TOP_OF_THE_HOUR = datetime(2016, 5, 19, 10, tzinfo=UTC)
JUST_BEFORE_THE_HOUR = TOP_OF_THE_HOUR - timedelta(minutes=1)
JUST_AFTER_THE_HOUR = TOP_OF_THE_HOUR + timedelta(minutes=1)
JUST_BEFORE_THE_PRIOR_HOUR = TOP_OF_THE_HOUR - timedelta(hours=1, minutes=1)
PRIOR_HOUR = TOP_OF_THE_HOUR - timedelta(hours=1)
WEEK_AFTER_THE_HOUR = TOP_OF_THE_HOUR + timedelta(days=7)
SHORT_DEAD, MEDIUM_DEAD, LONG_DEAD = 5, 2 * 60 * 60, 100 * 60 * 60


@dataclass(frozen=True)
class Row:
    """One row: the CronJob and moment, then what the Plan does."""

    policy: str
    suspend: bool
    deadline: int | None
    ran_previously: bool
    still_active: bool
    now: datetime
    create: bool
    delete: bool
    active: int
    warnings: int
    requeue: timedelta | None
    schedule: str = ON_THE_HOUR
    writes_status: bool = True


def _rows() -> dict[str, Row]:
    hour = timedelta(hours=1)
    soon = timedelta(milliseconds=100)  # the requeue lands just after the time
    before = JUST_BEFORE_THE_HOUR
    after = JUST_AFTER_THE_HOUR
    week = WEEK_AFTER_THE_HOUR
    to_next = hour - timedelta(minutes=1) + soon  # from just after the hour to the next
    to_top = timedelta(minutes=1) + soon  # from just before the hour to it
    return {
        "never ran, not valid schedule, A": Row(
            "Allow", False, None, False, False, before, False, False, 0, 1, None, "* * * *"
        ),
        "never ran, not valid schedule, F": Row(
            "Forbid", False, None, False, False, before, False, False, 0, 1, None, "* * * *"
        ),
        "never ran, not valid schedule, R": Row(
            "Replace", False, None, False, False, before, False, False, 0, 1, None, "* * * *"
        ),
        "never ran, not time, A": Row(
            "Allow", False, None, False, False, before, False, False, 0, 0, to_top
        ),
        "never ran, not time, F": Row(
            "Forbid", False, None, False, False, before, False, False, 0, 0, to_top
        ),
        "never ran, not time, R": Row(
            "Replace", False, None, False, False, before, False, False, 0, 0, to_top
        ),
        "never ran, is time, A": Row(
            "Allow", False, None, False, False, after, True, False, 1, 0, None
        ),
        "never ran, is time, F": Row(
            "Forbid", False, None, False, False, after, True, False, 1, 0, None
        ),
        "never ran, is time, R": Row(
            "Replace", False, None, False, False, after, True, False, 1, 0, None
        ),
        "never ran, is time, suspended": Row(
            "Allow", True, None, False, False, after, False, False, 0, 0, to_next
        ),
        "never ran, is time, past deadline": Row(
            "Allow", False, SHORT_DEAD, False, False, after, False, False, 0, 0, to_next
        ),
        "never ran, is time, not past deadline": Row(
            "Allow", False, LONG_DEAD, False, False, after, True, False, 1, 0, None
        ),
        "prev ran but done, not time, A": Row(
            "Allow", False, None, True, False, before, False, False, 0, 0, to_top
        ),
        "prev ran but done, not time, F": Row(
            "Forbid", False, None, True, False, before, False, False, 0, 0, to_top
        ),
        "prev ran but done, not time, R": Row(
            "Replace", False, None, True, False, before, False, False, 0, 0, to_top
        ),
        "prev ran but done, is time, A": Row(
            "Allow", False, None, True, False, after, True, False, 1, 0, None
        ),
        "prev ran but done, is time, F": Row(
            "Forbid", False, None, True, False, after, True, False, 1, 0, None
        ),
        "prev ran but done, is time, R": Row(
            "Replace", False, None, True, False, after, True, False, 1, 0, None
        ),
        "prev ran but done, is time, suspended": Row(
            "Allow", True, None, True, False, after, False, False, 0, 0, to_next
        ),
        "prev ran but done, is time, past deadline": Row(
            "Allow", False, SHORT_DEAD, True, False, after, False, False, 0, 0, to_next
        ),
        "prev ran but done, is time, not past deadline": Row(
            "Allow", False, LONG_DEAD, True, False, after, True, False, 1, 0, None
        ),
        "still active, not time, A": Row(
            "Allow", False, None, True, True, before, False, False, 1, 0, to_top
        ),
        "still active, not time, F": Row(
            "Forbid", False, None, True, True, before, False, False, 1, 0, to_top
        ),
        "still active, not time, R": Row(
            "Replace", False, None, True, True, before, False, False, 1, 0, to_top
        ),
        "still active, is time, A": Row(
            "Allow", False, None, True, True, after, True, False, 2, 0, None
        ),
        "still active, is time, F": Row(
            "Forbid", False, None, True, True, after, False, False, 1, 0, to_next
        ),
        "still active, is time, R": Row(
            "Replace", False, None, True, True, after, True, True, 1, 0, None
        ),
        "still active, is time, suspended": Row(
            "Allow", True, None, True, True, after, False, False, 1, 0, to_next
        ),
        "still active, is time, past deadline": Row(
            "Allow", False, SHORT_DEAD, True, True, after, False, False, 1, 0, to_next
        ),
        "still active, is time, not past deadline": Row(
            "Allow", False, LONG_DEAD, True, True, after, True, False, 2, 0, None
        ),
        "prev ran but done, long overdue, not past deadline, A": Row(
            "Allow", False, LONG_DEAD, True, False, week, True, False, 1, 0, None
        ),
        "prev ran but done, long overdue, not past deadline, R": Row(
            "Replace", False, LONG_DEAD, True, False, week, True, False, 1, 0, None
        ),
        "prev ran but done, long overdue, not past deadline, F": Row(
            "Forbid", False, LONG_DEAD, True, False, week, True, False, 1, 0, None
        ),
        "prev ran but done, long overdue, no deadline, A": Row(
            "Allow", False, None, True, False, week, True, False, 1, 1, None
        ),
        "prev ran but done, long overdue, no deadline, R": Row(
            "Replace", False, None, True, False, week, True, False, 1, 1, None
        ),
        "prev ran but done, long overdue, no deadline, F": Row(
            "Forbid", False, None, True, False, week, True, False, 1, 1, None
        ),
        "prev ran but done, long overdue, past medium deadline, A": Row(
            "Allow", False, MEDIUM_DEAD, True, False, week, True, False, 1, 0, None
        ),
        "prev ran but done, long overdue, past short deadline, A": Row(
            "Allow", False, SHORT_DEAD, True, False, week, True, False, 1, 0, None
        ),
        "prev ran but done, long overdue, past medium deadline, R": Row(
            "Replace", False, MEDIUM_DEAD, True, False, week, True, False, 1, 0, None
        ),
        "prev ran but done, long overdue, past short deadline, R": Row(
            "Replace", False, SHORT_DEAD, True, False, week, True, False, 1, 0, None
        ),
        "prev ran but done, long overdue, past medium deadline, F": Row(
            "Forbid", False, MEDIUM_DEAD, True, False, week, True, False, 1, 0, None
        ),
        "prev ran but done, long overdue, past short deadline, F": Row(
            "Forbid", False, SHORT_DEAD, True, False, week, True, False, 1, 0, None
        ),
    }


ROWS = _rows()


def _cronjob(row: Row) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedule": row.schedule,
        "concurrencyPolicy": row.policy,
        "suspend": row.suspend,
        "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
    }
    if row.deadline is not None:
        spec["startingDeadlineSeconds"] = row.deadline
    created = JUST_BEFORE_THE_PRIOR_HOUR if row.ran_previously else JUST_BEFORE_THE_HOUR
    status: dict[str, Any] = {}
    if row.ran_previously:
        status["lastScheduleTime"] = rfc3339(PRIOR_HOUR)
    return {
        "apiVersion": CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {
            "name": NAME,
            "namespace": NS,
            "uid": UID,
            "generation": 1,
            "creationTimestamp": rfc3339(created),
        },
        "spec": spec,
        "status": status,
    }


def _job(name: str, created: datetime, number: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"job-{number}",
            "resourceVersion": str(number),
            "creationTimestamp": rfc3339(created),
            "ownerReferences": [
                {"apiVersion": CRONJOB.api_version, "kind": "CronJob", "name": NAME, "uid": UID}
            ],
        },
        "status": {},
    }


def settle(cronjob: objects.Obj, jobs: list[dict[str, Any]], now: datetime) -> Plan:
    """The final Plan, every create and Replace delete succeeding."""
    view = view_of(objects.freeze(cronjob), classify([objects.freeze(job) for job in jobs]))
    outcomes: dict[int, Any] = {}
    while True:
        plan = decide(view, now, outcomes)
        if not plan.pending:
            return plan
        index = len(plan.steps) - 1
        step = plan.steps[index]
        if isinstance(step, Create):
            made = _job(step.job["metadata"]["name"], now, 100 + index)
            outcomes[index] = Created(objects.freeze(made))
        else:
            outcomes[index] = Deleted()


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_sync_cronjob(row: Row) -> None:
    cronjob = _cronjob(row)
    jobs = []
    if row.still_active:
        active = _job(job_name(NAME, PRIOR_HOUR), PRIOR_HOUR, 1)
        jobs.append(active)
        cronjob["status"]["active"] = [job_reference(active)]
    plan = settle(cronjob, jobs, row.now)
    creates = [step for step in plan.steps if isinstance(step, Create)]
    deletes = [step for step in plan.steps if isinstance(step, Delete)]
    warnings = [step for step in plan.steps if isinstance(step, Event) and step.type == "Warning"]
    assert bool(creates) == row.create
    assert bool(deletes) == row.delete
    if row.create:
        (create,) = creates
        assert create.job["metadata"]["name"] == job_name(NAME, row.now.replace(minute=0))
        assert plan.result.follow_up, "Jobs first: the follow-up writes the run's status"
    if row.delete:
        assert [step.name for step in deletes] == [job_name(NAME, PRIOR_HOUR)]
        assert all(step.replace for step in deletes)
    assert len(warnings) == row.warnings, warnings
    assert (plan.status is not None) == row.writes_status, "whether this reconcile writes status"
    if plan.status is not None:
        assert len(plan.status.get("active") or ()) == row.active
    if not row.create:
        assert plan.status is not None, "nothing created: this reconcile writes status"
        expected = None if row.requeue is None else row.requeue.total_seconds()
        assert plan.result.requeue_after == pytest.approx(expected or 0.0)


def test_every_row_is_a_distinct_case() -> None:
    assert len(set(ROWS.values())) == len(ROWS)
