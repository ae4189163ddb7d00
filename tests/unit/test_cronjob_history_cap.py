"""History limits a tenant chooses are bounded (issue 35 item 4): every finished Job kept
is read by each reconcile of its CronJob, so the webhook refuses a limit above
``MAX_HISTORY_LIMIT`` and the controller keeps at most that many of a stored one, saying
so with a Warning event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from cronjob_operator.api.batch_v1 import settings_of
from cronjob_operator.api.cronjob_rules import MAX_HISTORY_LIMIT
from cronjob_operator.controllers.cronjob.history import capped_limits, to_prune
from cronjob_operator.controllers.cronjob.jobs import JobSets, build_job, job_name
from cronjob_operator.controllers.cronjob.view import job_times_of
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.fake import RecordedEvent
from cronjob_operator.runtime.kinds import JOB
from cronjob_operator.webhooks import cronjob as webhook
from tests.unit import test_cronjob_reconciler as reconciler
from tests.unit.cronjob_harness import Harness
from tests.unit.test_cronjob_history import job

START = datetime(2016, 5, 19, tzinfo=UTC)


def finished(count: int) -> list[Any]:
    """``count`` succeeded Jobs, started a minute apart, oldest first."""
    return [
        job(f"j{n:05}", finished="Complete", start=rfc3339(START + n * timedelta(minutes=1)))
        for n in range(count)
    ]


@pytest.mark.parametrize("limit", [None, MAX_HISTORY_LIMIT + 1, 2**31 - 1])
def test_a_limit_above_the_cap_keeps_the_cap(limit: int | None) -> None:
    jobs = finished(MAX_HISTORY_LIMIT + 2)
    pruned = to_prune(jobs, limit, job_times_of(jobs))
    assert [j["metadata"]["name"] for j in pruned] == ["j00000", "j00001"]


def test_the_cap_is_reported_only_when_it_prunes_what_the_limit_would_keep() -> None:
    spec = settings_of({"successfulJobsHistoryLimit": 5000, "failedJobsHistoryLimit": 1})
    (message,) = capped_limits(spec, JobSets(successful=finished(MAX_HISTORY_LIMIT + 1)))
    assert message.startswith("spec.successfulJobsHistoryLimit: 5000: ")
    assert f"at most {MAX_HISTORY_LIMIT}" in message
    assert capped_limits(spec, JobSets(successful=finished(MAX_HISTORY_LIMIT))) == []
    within = settings_of({"successfulJobsHistoryLimit": MAX_HISTORY_LIMIT})
    assert capped_limits(within, JobSets(successful=finished(MAX_HISTORY_LIMIT + 1))) == []


def test_a_reconcile_over_the_cap_prunes_to_it_and_warns_naming_the_field() -> None:
    """A stored limit above the cap (from before the bound): the reconcile keeps the
    newest ``MAX_HISTORY_LIMIT`` finished Jobs and says why with a Warning event."""
    world = reconciler.harness(reconciler.cronjob(successfulJobsHistoryLimit=5000))
    owner, zone = world.cronjob(), ZoneInfo("UTC")
    times = [reconciler.CREATED + n * timedelta(seconds=1) for n in range(MAX_HISTORY_LIMIT + 2)]
    for moment in times:
        world.client.create(JOB, build_job(owner, moment, zone))
        world.finish(job_name(reconciler.NAME, moment), at=moment)
    # The first reconcile records the runs, the second prunes (a Job is deleted only
    # after the status write that records its run).
    for seconds in (0, 1):
        world.reconcile_at(reconciler.CREATED + timedelta(minutes=2, seconds=seconds))
    kept = world.jobs()
    assert len(kept) == MAX_HISTORY_LIMIT
    assert not {job_name(reconciler.NAME, moment) for moment in times[:2]} & set(kept)
    warnings = capped_warnings(world)
    assert warnings
    assert {e.type for e in warnings} == {"Warning"}
    assert {e.message.partition(": at most")[0] for e in warnings} == {
        "spec.successfulJobsHistoryLimit: 5000"
    }
    world.reconcile_at(reconciler.CREATED + timedelta(minutes=3))
    assert capped_warnings(world) == warnings, "warned again once the cap no longer prunes"


def capped_warnings(world: Harness) -> list[RecordedEvent]:
    """The ``HistoryLimitCapped`` events recorded so far."""
    return [e for e in world.recorder.events if e.reason == "HistoryLimitCapped"]


@pytest.mark.parametrize("field", ["successfulJobsHistoryLimit", "failedJobsHistoryLimit"])
def test_the_webhook_refuses_a_limit_above_the_cap_naming_the_field(field: str) -> None:
    def body(limit: int) -> dict[str, Any]:
        return {
            "apiVersion": "batch.tutorial.kubebuilder.io/v1",
            "kind": "CronJob",
            "metadata": {"name": "x", "namespace": "ns"},
            "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {}}, field: limit},
        }

    assert webhook.validate_create(body(MAX_HISTORY_LIMIT)) == []
    (error,) = webhook.validate_create(body(MAX_HISTORY_LIMIT + 1))
    assert str(error).startswith(f"spec.{field}: Invalid value: {MAX_HISTORY_LIMIT + 1}: ")
    assert f"must be at most {MAX_HISTORY_LIMIT}" in str(error)
    stored = body(5000)  # from before the bound: an update that keeps it is admitted
    assert webhook.validate_update(stored, stored) == []
    (raised,) = webhook.validate_update(body(5001), stored)
    assert str(raised).startswith(f"spec.{field}: Invalid value: 5001: ")
