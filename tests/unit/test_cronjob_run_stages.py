"""Every source's run passes the same stages: concurrencyPolicy's room, then the create.

A run request, a backfill's step and the scheduled time due now, all in one reconcile of
one CronJob, decided without any client (the decision is sans-I/O: it returns the step
whose outcome it needs, and is asked again with that outcome). Each policy is applied
to the three alike: Allow starts all three, Forbid none beside the active run, Replace
deletes the active run once before the first start (its run recorded) and then waits
for the status write that records the new one before it replaces that; BufferOne
buffers the scheduled time and the other two wait. With every way out of the process
refused, the decision comes to the same end: it makes no call of its own.
"""

from __future__ import annotations

import json
import socket
import subprocess
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

import pytest

from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION, CRONJOB, RUN_ANNOTATION
from cronjob_operator.api.cronjob_rules import BACKFILL_TOKEN_ANNOTATION, manual_job_name
from cronjob_operator.controllers.cronjob.decide import decide
from cronjob_operator.controllers.cronjob.jobs import classify, job_name, job_reference
from cronjob_operator.controllers.cronjob.plan import (
    Create,
    Created,
    Delete,
    Deleted,
    Event,
    Outcome,
    Plan,
)
from cronjob_operator.controllers.cronjob.view import view_of
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controllerutil import rfc3339

NAME, NS, UID = "nightly", "default", "cronjob-uid"
CREATED = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
PREVIOUS = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # the run still active
NOW = datetime(2026, 3, 2, 10, 0, 5, tzinfo=UTC)  # 10:00 is due
BACKFILLED = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)  # the backfill's only time
TOKEN = "run-1"

SCHEDULED_JOB = job_name(NAME, NOW.replace(second=0))
BACKFILL_JOB = job_name(NAME, BACKFILLED)
REQUESTED_JOB = manual_job_name(NAME, TOKEN)
ACTIVE_JOB = job_name(NAME, PREVIOUS)


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
                {
                    "apiVersion": CRONJOB.api_version,
                    "kind": "CronJob",
                    "name": NAME,
                    "uid": UID,
                    "controller": True,
                }
            ],
        },
        "status": {},
    }


ACTIVE = _job(ACTIVE_JOB, PREVIOUS, 1)


def _cronjob(policy: str) -> dict[str, Any]:
    backfill = {
        "token": "b-1",
        "from": rfc3339(BACKFILLED),
        "to": rfc3339(BACKFILLED + timedelta(hours=1)),
    }
    return {
        "apiVersion": CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {
            "name": NAME,
            "namespace": NS,
            "uid": UID,
            "generation": 1,
            "creationTimestamp": rfc3339(CREATED),
            "annotations": {RUN_ANNOTATION: TOKEN, BACKFILL_ANNOTATION: json.dumps(backfill)},
        },
        "spec": {
            "schedule": "0 * * * *",
            "concurrencyPolicy": policy,
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
        },
        # The active run is recorded: lastScheduleTime is its time, active lists it.
        "status": {"lastScheduleTime": rfc3339(PREVIOUS), "active": [job_reference(ACTIVE)]},
    }


def _decide_without_a_client(policy: str) -> Plan:
    """The decision asked again with each outcome it needs until it needs none; every
    create and Replace delete succeeds."""
    view = view_of(objects.freeze(_cronjob(policy)), classify([objects.freeze(ACTIVE)]))
    outcomes: dict[int, Outcome] = {}
    while True:
        plan = decide(view, NOW, outcomes)
        if not plan.pending:
            return plan
        index = len(plan.steps) - 1
        step = plan.steps[index]
        if isinstance(step, Create):
            made = _job(step.job["metadata"]["name"], NOW, 100 + index)
            outcomes[index] = Created(objects.freeze(made))
        else:
            outcomes[index] = Deleted()


def _effects(plan: Plan) -> list[str]:
    """The plan's creates and deletes, in order."""
    effects = []
    for step in plan.steps:
        if isinstance(step, Create):
            effects.append(f"create {step.job['metadata']['name']}")
        elif isinstance(step, Delete):
            effects.append(f"delete {step.name}")
    return effects


def _reasons(plan: Plan) -> list[str]:
    return [step.reason for step in plan.steps if isinstance(step, Event)]


def test_under_allow_every_source_starts_its_run() -> None:
    plan = _decide_without_a_client("Allow")
    assert _effects(plan) == [
        f"create {REQUESTED_JOB}",
        f"create {BACKFILL_JOB}",
        f"create {SCHEDULED_JOB}",
    ]
    assert plan.result.follow_up, "Jobs first: the follow-up records the scheduled run"
    backfill_job = next(
        step.job
        for step in plan.steps
        if isinstance(step, Create) and step.job["metadata"]["name"] == BACKFILL_JOB
    )
    assert backfill_job["metadata"]["annotations"][BACKFILL_TOKEN_ANNOTATION] == "b-1"


def test_under_forbid_no_source_starts_beside_the_active_run() -> None:
    plan = _decide_without_a_client("Forbid")
    assert _effects(plan) == []
    assert "RunRequestPending" in _reasons(plan)
    assert "JobAlreadyActive" in _reasons(plan)
    assert plan.status is not None
    assert plan.status["pendingRunRequest"] == TOKEN


def test_under_replace_the_active_run_is_deleted_once_and_the_next_waits_for_its_record() -> None:
    plan = _decide_without_a_client("Replace")
    # The recorded active run makes room for the request's run; that new run's Job is
    # the only evidence of it until a status write records it, so the backfill and the
    # scheduled run wait for that write (the follow-up replaces).
    assert _effects(plan) == [f"delete {ACTIVE_JOB}", f"create {REQUESTED_JOB}"]
    assert plan.status is not None, "the write that records the request's run"
    assert plan.result.follow_up


def test_under_buffer_one_the_scheduled_run_waits_in_the_buffer_and_the_others_wait() -> None:
    plan = _decide_without_a_client("BufferOne")
    assert _effects(plan) == []
    assert plan.status is not None
    assert plan.status["bufferedRun"] == rfc3339(NOW.replace(second=0))
    assert plan.status["pendingRunRequest"] == TOKEN
    assert plan.status["backfill"]["next"] == rfc3339(BACKFILLED), "its step has not run"


@pytest.mark.parametrize("policy", ["Allow", "Forbid", "Replace", "BufferOne"])
def test_the_decision_makes_no_call(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sans-I/O: with every way out of the process failing (a socket, a connection, a
    subprocess), the three sources are decided to the end all the same."""

    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError(f"the decision made a call: {args!r}")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    plan = _decide_without_a_client(policy)
    assert not plan.pending
    assert plan.status is not None or plan.result.follow_up
