"""The CronJob reconciler's API-facing decisions, against an in-memory client that fails
on demand (the failures a real API server gives: a 500, a 409 uid precondition).

The fake keeps only what these tests need: Jobs by name with uids, and the CronJob's
status. The real-cluster versions of these behaviours are in
tests/integration/test_cronjob_controller.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers import cronjob_state as state
from cronjob_operator.controllers.cronjob import CronJobReconciler
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.reconcile import Request

CREATED = datetime(2016, 5, 19, 9, 59, tzinfo=UTC)
FIRST = datetime(2016, 5, 19, 10, tzinfo=UTC)


def failure(error: type[errors.ApiError], code: int) -> errors.ApiError:
    return error({"reason": error.__name__, "message": f"injected {code}"}, code=code)


class FakeClient:
    """Jobs and one CronJob in memory; ``fail[(verb, name)]`` is raised by that call."""

    def __init__(self, cronjob: dict[str, Any]) -> None:
        self.cronjob = cronjob
        self.jobs: dict[str, dict[str, Any]] = {}
        self.fail: dict[tuple[str, str], errors.ApiError] = {}
        self.calls: list[tuple[str, str]] = []
        self.live = self

    def _call(self, verb: str, name: str) -> None:
        self.calls.append((verb, name))
        if (verb, name) in self.fail:
            raise self.fail[(verb, name)]

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
        self._call("get", name)
        if kind == CRONJOB:
            return objects.freeze(self.cronjob)
        if name not in self.jobs:
            raise failure(errors.NotFound, 404)
        return objects.freeze(self.jobs[name])

    def list(self, kind: Kind, **_: Any) -> list[objects.Obj]:
        return [objects.freeze(job) for job in self.jobs.values()]

    def create(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        self._call("create", name)
        job = {**obj, "metadata": {**obj["metadata"], "uid": f"uid-{name}"}, "status": {}}
        self.jobs[name] = job
        return job

    def delete(self, kind: Kind, name: str, *, uid: str | None = None, **_: Any) -> None:
        self._call("delete", name)
        if name not in self.jobs:
            raise failure(errors.NotFound, 404)
        if uid is not None and self.jobs[name]["metadata"]["uid"] != uid:
            raise failure(errors.Conflict, 409)
        del self.jobs[name]

    def update_status(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        self.cronjob = {**self.cronjob, "status": obj["status"]}
        return self.cronjob


class Recorder:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def event(self, obj: objects.Obj, type_: str, reason: str, message: str) -> None:
        self.reasons.append(reason)


def replace_cronjob() -> dict[str, Any]:
    return {
        "apiVersion": CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {
            "name": "swap",
            "namespace": "ns",
            "uid": "cj-uid",
            "generation": 1,
            "creationTimestamp": "2016-05-19T09:59:00Z",
        },
        "spec": {
            "schedule": "0 * * * *",
            "concurrencyPolicy": "Replace",
            "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}},
        },
    }


def reconciler_at(client: FakeClient, moment: datetime) -> tuple[CronJobReconciler, Recorder]:
    recorder = Recorder()
    reconciler = CronJobReconciler(client, recorder, clock=lambda: moment)  # type: ignore[arg-type]
    return reconciler, recorder


def first_run_active() -> FakeClient:
    client = FakeClient(replace_cronjob())
    reconciler, _ = reconciler_at(client, FIRST + timedelta(minutes=1))
    reconciler.reconcile(Request("ns", "swap"))
    assert list(client.jobs) == [state.job_name("swap", FIRST)]
    return client


SECOND = FIRST + timedelta(hours=1)


@pytest.mark.parametrize(
    "error",
    [failure(errors.ServerError, 500), failure(errors.Conflict, 409)],
    ids=["500", "409 uid precondition"],
)
def test_a_failed_delete_stops_the_replace_before_anything_is_created(
    error: errors.ApiError,
) -> None:
    client = first_run_active()
    old = state.job_name("swap", FIRST)
    client.fail[("delete", old)] = error
    reconciler, recorder = reconciler_at(client, SECOND + timedelta(minutes=1))
    with pytest.raises(type(error)):  # the controller retries with backoff
        reconciler.reconcile(Request("ns", "swap"))
    assert list(client.jobs) == [old]
    assert ("create", state.job_name("swap", SECOND)) not in client.calls
    assert [ref["name"] for ref in client.cronjob["status"]["active"]] == [old]
    assert "FailedDelete" in recorder.reasons

    del client.fail[("delete", old)]  # the retry, once the delete works
    reconciler.reconcile(Request("ns", "swap"))
    assert list(client.jobs) == [state.job_name("swap", SECOND)]


def test_a_failed_get_of_the_old_job_stops_the_replace() -> None:
    client = first_run_active()
    old = state.job_name("swap", FIRST)
    del client.jobs[old]  # not in the cache (lag): the reconciler asks the API server
    client.fail[("get", old)] = failure(errors.ServerError, 500)
    reconciler, _ = reconciler_at(client, SECOND + timedelta(minutes=1))
    before = len(client.calls)
    with pytest.raises(errors.ServerError):
        reconciler.reconcile(Request("ns", "swap"))
    assert client.calls[before:] == [("get", "swap"), ("get", old)], "nothing deleted or created"


def condition(client: FakeClient, type_: str) -> dict[str, Any]:
    conditions = client.cronjob["status"]["conditions"]
    return next(c for c in conditions if c["type"] == type_)


def test_a_cronjob_being_deleted_is_not_available() -> None:
    client = first_run_active()
    client.cronjob["metadata"] |= {
        "deletionTimestamp": "2016-05-19T10:30:00Z",
        "finalizers": ["example.com/hold"],
    }
    reconciler, _ = reconciler_at(client, SECOND + timedelta(minutes=1))
    reconciler.reconcile(Request("ns", "swap"))
    available = condition(client, "Available")
    assert (available["status"], available["reason"]) == ("False", "Terminating")
    assert "metadata.deletionTimestamp" in available["message"]
    assert "example.com/hold" in available["message"]
    assert list(client.jobs) == [state.job_name("swap", FIRST)], "no new run while deleting"


class RejectingClient(FakeClient):
    """Every Job create is rejected as invalid, as the API server does for a bad template."""

    def create(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        self._call("create", obj["metadata"]["name"])
        raise errors.Invalid(
            {"reason": "Invalid", "message": 'Job.batch "x" is invalid: spec.template: bad'},
            code=422,
        )


def test_a_job_template_the_api_server_rejects_is_not_available() -> None:
    client = RejectingClient(replace_cronjob())
    reconciler, recorder = reconciler_at(client, FIRST + timedelta(minutes=1))
    reconciler.reconcile(Request("ns", "swap"))
    available = condition(client, "Available")
    assert (available["status"], available["reason"]) == ("False", "InvalidJobTemplate")
    assert "spec.jobTemplate" in available["message"]
    degraded = condition(client, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidJobTemplate")
    assert "FailedCreate" in recorder.reasons


# --- editing the schedule or time zone ------------------------------------------------------


def hourly_that_ran_at(schedule: str, ran: datetime, zone: str | None = None) -> FakeClient:
    """A CronJob on ``schedule`` whose last run was ``ran`` (reconciled then)."""
    cronjob = replace_cronjob()
    cronjob["spec"] |= {"schedule": schedule, "concurrencyPolicy": "Allow"}
    if zone:
        cronjob["spec"]["timeZone"] = zone
    client = FakeClient(cronjob)
    reconciler_at(client, ran + timedelta(seconds=1))[0].reconcile(Request("ns", "swap"))
    assert client.cronjob["status"]["lastScheduleTime"] == ran.strftime("%Y-%m-%dT%H:%M:%SZ")
    client.jobs.clear()  # finished and pruned: only new creates matter below
    return client


def test_a_schedule_edit_does_not_run_a_time_before_the_edit() -> None:
    client = hourly_that_ran_at("0 * * * *", FIRST)  # ran 10:00
    client.cronjob["spec"]["schedule"] = "30 * * * *"  # edited at 10:40
    reconciler, _ = reconciler_at(client, FIRST + timedelta(minutes=40))
    result = reconciler.reconcile(Request("ns", "swap"))
    assert client.jobs == {}, "10:30 is before the edit: no catch-up run"
    assert result.requeue_after == pytest.approx(timedelta(minutes=50).total_seconds() + 0.1)
    reconciler_at(client, FIRST + timedelta(minutes=90, seconds=1))[0].reconcile(
        Request("ns", "swap")
    )
    assert list(client.jobs) == [state.job_name("swap", FIRST + timedelta(minutes=90))]


def test_a_time_zone_edit_does_not_run_the_day_twice() -> None:
    nine = datetime(2016, 12, 1, 9, tzinfo=UTC)
    client = hourly_that_ran_at("0 9 * * *", nine)
    client.cronjob["spec"]["timeZone"] = "Atlantic/Azores"  # 09:00 there is 10:00Z in winter
    reconciler, _ = reconciler_at(client, nine + timedelta(minutes=90))
    result = reconciler.reconcile(Request("ns", "swap"))
    assert client.jobs == {}, "09:00 Azores today (10:00Z) is before the edit"
    tomorrow = nine + timedelta(days=1, hours=1)
    assert result.requeue_after == pytest.approx((tomorrow - nine).total_seconds() - 5400 + 0.1)


def test_the_edit_is_remembered_across_restarts() -> None:
    """The operator was down when the schedule changed, and every reconcile is by a fresh
    reconciler (as after a restart): only status can tell them what ran against what."""
    client = hourly_that_ran_at("0 * * * *", FIRST)
    client.cronjob["spec"]["schedule"] = "30 * * * *"
    for minutes in (50, 55, 59):  # first sight of the edit at 10:50, then restarts
        reconciler_at(client, FIRST + timedelta(minutes=minutes))[0].reconcile(
            Request("ns", "swap")
        )
    assert client.jobs == {}
    observed = client.cronjob["status"]["observedSchedule"]
    assert observed == {"schedule": "30 * * * *", "since": "2016-05-19T10:50:00Z"}
