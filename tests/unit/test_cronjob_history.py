"""History and Jobs: classification, status sync, pruning, Job names and shape.

The pure rules of ``controllers/cronjob/history.py`` and ``jobs.py``, and
``runs.observe_schedule``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from cronjob_operator.api.batch_v1 import settings_of
from cronjob_operator.controllers.cronjob.history import (
    advance_last_schedule_time,
    recorded_by,
    sync_status,
    to_prune,
    unconfirmed_active,
)
from cronjob_operator.controllers.cronjob.jobs import (
    SCHEDULED_AT_ANNOTATION,
    SCHEDULED_TIMESTAMP_ANNOTATION,
    build_job,
    classify,
    finished_state,
    job_name,
    job_reference,
    scheduled_time,
)
from cronjob_operator.controllers.cronjob.runs import observe_schedule
from cronjob_operator.controllers.cronjob.status import CronJobStatus
from cronjob_operator.controllers.cronjob.view import api_status, job_times_of, status_of
from cronjob_operator.runtime.objects import freeze


def job(
    name: str,
    *,
    uid: str | None = None,
    finished: str | None = None,
    start: str | None = None,
    completion: str | None = None,
) -> Any:
    status: dict[str, Any] = {}
    if finished:
        status["conditions"] = [{"type": finished, "status": "True"}]
    if start:
        status["startTime"] = start
    if completion:
        status["completionTime"] = completion
    return freeze(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": uid or f"uid-{name}",
                "resourceVersion": "7",
            },
            "status": status,
        }
    )


def test_classify_by_terminal_conditions() -> None:
    sets = classify([job("a"), job("b", finished="Complete"), job("c", finished="Failed")])
    assert [j["metadata"]["name"] for j in sets.active] == ["a"]
    assert [j["metadata"]["name"] for j in sets.successful] == ["b"]
    assert [j["metadata"]["name"] for j in sets.failed] == ["c"]


def test_condition_false_is_not_finished() -> None:
    pending = freeze(
        {
            "metadata": {"name": "x"},
            "status": {"conditions": [{"type": "Complete", "status": "False"}]},
        }
    )
    assert finished_state(pending) is None


def test_sync_removes_finished_and_confirmed_missing_adds_unlisted() -> None:
    done = job("done", finished="Complete", completion="2016-05-19T10:05:00Z")
    running = job("running")
    status = status_of(
        {
            "active": [
                job_reference(done),
                {"name": "gone", "uid": "uid-gone"},
                {"name": "lagging", "uid": "uid-lag"},
            ],
            "lastSuccessfulTime": "2016-05-19T09:00:00Z",
        }
    )
    sets = classify([done, running])
    times = job_times_of([done, running])
    notices = sync_status(status, sets, times, confirmed_missing=["uid-gone"])
    assert [n.reason for n in notices] == ["SawCompletedJob", "MissingJob"]
    assert [ref["name"] for ref in status["active"]] == ["lagging", "running"]
    assert api_status(status)["lastSuccessfulTime"] == "2016-05-19T10:05:00Z"


def test_last_successful_time_only_moves_forward() -> None:
    status = status_of({"lastSuccessfulTime": "2016-05-19T11:00:00Z"})
    old = job("old", finished="Complete", completion="2016-05-19T10:00:00Z")
    sync_status(status, classify([old]), job_times_of([old]))
    assert api_status(status)["lastSuccessfulTime"] == "2016-05-19T11:00:00Z"


def test_sync_never_lists_a_job_twice() -> None:
    running = job("running")
    status: CronJobStatus = {"active": [job_reference(running)]}
    sync_status(status, classify([running]), job_times_of([running]))
    sync_status(status, classify([running]), job_times_of([running]))
    assert len(status["active"]) == 1


def test_unconfirmed_active_lists_entries_the_cache_lacks() -> None:
    status = {"active": [{"name": "a", "uid": "uid-a"}, {"name": "b", "uid": "uid-b"}]}
    assert [r["name"] for r in unconfirmed_active(status, [job("a")])] == ["b"]


def test_prune_oldest_by_start_time_unset_last_ties_by_name() -> None:
    jobs = [
        job("d"),
        job("c", start="2016-05-19T10:00:00Z"),
        job("b", start="2016-05-19T09:00:00Z"),
        job("a", start="2016-05-19T10:00:00Z"),
    ]
    times = job_times_of(jobs)
    assert [j["metadata"]["name"] for j in to_prune(jobs, 1, times)] == ["b", "a", "c"]
    assert to_prune(jobs, None, times) == []
    assert len(to_prune(jobs, 0, times)) == 4
    assert to_prune(jobs, 4, times) == []


def test_job_name_and_shape() -> None:
    scheduled = datetime(2016, 5, 19, 10, 0, tzinfo=UTC)
    cronjob = freeze(
        {
            "apiVersion": "batch.tutorial.kubebuilder.io/v1",
            "kind": "CronJob",
            "metadata": {"name": "hello", "namespace": "ns", "uid": "cj-uid"},
            "spec": {
                "jobTemplate": {
                    "metadata": {"labels": {"app": "x"}, "annotations": {"note": "y"}},
                    "spec": {
                        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
                    },
                }
            },
        }
    )
    built = build_job(cronjob, scheduled, ZoneInfo("Europe/Berlin"))
    assert built["metadata"]["name"] == "hello-1463652000"
    assert built["metadata"]["labels"] == {"app": "x"}
    assert built["metadata"]["annotations"] == {
        "note": "y",
        SCHEDULED_AT_ANNOTATION: "2016-05-19T12:00:00+02:00",
        SCHEDULED_TIMESTAMP_ANNOTATION: "2016-05-19T12:00:00+02:00",
    }
    owner = built["metadata"]["ownerReferences"][0]
    assert owner == {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "name": "hello",
        "uid": "cj-uid",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    built["spec"]["template"]["spec"]["containers"][0]["image"] = "changed"  # a mutable copy
    assert (
        cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]
        == "busybox"
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("hello-1463652000", datetime(2016, 5, 19, 10, tzinfo=UTC)),
        ("hello-m4x7q2abcd", None),  # a manual run
        ("hello-", None),
        ("hello-12a4", None),
        ("other-1463652000", None),
        ("hello-\u0661\u0662", None),  # digits, but not ASCII ones
    ],
)
def test_scheduled_time_is_read_back_from_the_job_name(
    name: str, expected: datetime | None
) -> None:
    assert scheduled_time("hello", name) == expected
    if expected is not None:
        assert job_name("hello", expected) == name


def test_last_schedule_time_advances_to_the_newest_existing_run_never_back() -> None:
    ten, eleven = "hello-1463652000", "hello-1463655600"
    status: CronJobStatus = {}
    advance_last_schedule_time(status, "hello", [job(ten), job(eleven), job("hello-mabc")])
    assert api_status(status)["lastScheduleTime"] == "2016-05-19T11:00:00Z"
    status = status_of({"lastScheduleTime": "2016-05-19T12:00:00Z"})
    advance_last_schedule_time(status, "hello", [job(ten, finished="Complete")])
    assert api_status(status)["lastScheduleTime"] == "2016-05-19T12:00:00Z"
    status = {}
    advance_last_schedule_time(status, "hello", [])
    assert status == {}


def test_only_runs_the_stored_status_recorded_may_be_pruned() -> None:
    ten, eleven, manual = job("hello-1463652000"), job("hello-1463655600"), job("hello-mabc")
    recorded = status_of({"lastScheduleTime": "2016-05-19T10:00:00Z"})
    assert recorded_by(recorded, "hello", [ten, eleven, manual]) == [ten, manual]
    assert recorded_by({}, "hello", [ten, eleven, manual]) == [manual]


def test_max_length_name_fits_job_name_limit() -> None:
    name = job_name("x" * 52, datetime(2100, 1, 1, tzinfo=UTC))
    assert len(name) <= 63


def test_status_merge_keeps_our_changes_and_theirs() -> None:
    from cronjob_operator.runtime.controllerutil import merge_status

    base = {
        "lastScheduleTime": "t1",
        "active": [],
        "conditions": [
            {"type": "Degraded", "status": "False"},
            {"type": "Available", "status": "True"},
        ],
    }
    ours = {
        "lastScheduleTime": "t2",
        "active": [{"name": "j2"}],
        "conditions": [
            {"type": "Degraded", "status": "False"},
            {"type": "Available", "status": "False"},
        ],
    }
    fresh = {
        "lastScheduleTime": "t1",
        "active": [],
        "lastSuccessfulTime": "theirs",
        "conditions": [
            {"type": "Degraded", "status": "True"},
            {"type": "Available", "status": "True"},
            {"type": "Custom", "status": "True"},
        ],
    }
    merged = merge_status(base, ours, fresh)
    assert merged["lastScheduleTime"] == "t2"
    assert merged["active"] == [{"name": "j2"}]
    assert merged["lastSuccessfulTime"] == "theirs"
    assert {c["type"]: c["status"] for c in merged["conditions"]} == {
        "Degraded": "True",
        "Available": "False",
        "Custom": "True",
    }


CREATED = datetime(2016, 5, 19, 9, 59, tzinfo=UTC)
EDITED = datetime(2016, 5, 19, 10, 40, 0, 700000, tzinfo=UTC)


def test_first_sight_of_a_schedule_dates_it_from_creation() -> None:
    status: CronJobStatus = {}
    since = observe_schedule(
        status, settings_of({"schedule": "0 * * * *"}), created=CREATED, now=EDITED
    )
    assert since == CREATED
    assert api_status(status)["observedSchedule"] == {
        "schedule": "0 * * * *",
        "since": "2016-05-19T09:59:00Z",
    }


def test_an_unchanged_schedule_keeps_its_since() -> None:
    status = status_of(
        {
            "observedSchedule": {
                "schedule": "0 * * * *",
                "timeZone": "UTC",
                "since": "2016-05-19T09:00:00Z",
            }
        }
    )
    before = dict(status["observedSchedule"])
    spec = {"schedule": "0 * * * *", "timeZone": "UTC"}
    assert observe_schedule(status, settings_of(spec), created=CREATED, now=EDITED) == datetime(
        2016, 5, 19, 9, tzinfo=UTC
    )
    assert status["observedSchedule"] == before


@pytest.mark.parametrize(
    "spec",
    [
        {"schedule": "30 * * * *"},
        {"schedule": "0 * * * *", "timeZone": "Atlantic/Azores"},
    ],
    ids=["schedule", "timeZone"],
)
def test_an_edit_dates_the_schedule_from_the_reconcile_that_sees_it(spec: dict[str, str]) -> None:
    status = status_of(
        {"observedSchedule": {"schedule": "0 * * * *", "since": "2016-05-19T09:59:00Z"}}
    )
    since = observe_schedule(status, settings_of(spec), created=CREATED, now=EDITED)
    assert since == EDITED.replace(microsecond=0)
    assert api_status(status)["observedSchedule"] == {**spec, "since": "2016-05-19T10:40:00Z"}
