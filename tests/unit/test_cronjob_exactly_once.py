"""Each scheduled run is created once, whatever happens between its create and its record.

The reconcile that creates a Job leaves the status write to its follow-up (Jobs first,
docs/cronjob-semantics.md). Under a burst that follow-up waits behind every other due
run, so the Job may finish, and a small history limit would prune it, before its run is
recorded. These tests play that window on the fake client (the follow-up run late, after
the Job finished; a cache that still holds the CronJob from before our own status write)
and count the runs per Job name by distinct uid: a run created twice counts 2.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.api.batch_v1 import CRONJOB, RUN_ANNOTATION
from cronjob_operator.api.cronjob_rules import manual_job_name
from cronjob_operator.controllers.cronjob.jobs import job_name
from cronjob_operator.runtime import errors
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.fake import Action, Reaction
from tests.unit import cronjob_harness
from tests.unit.cronjob_harness import Harness

CREATED = datetime(2026, 3, 2, 9, 59, 30, tzinfo=UTC)
FIRST = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
NS, NAME = "ns", "minutely"
MINUTE = timedelta(minutes=1)


def minutely(**spec: Any) -> Harness:
    body = cronjob_harness.cronjob(
        NAME, NS, created=CREATED, spec={"schedule": "*/1 * * * *", **spec}
    )
    world = Harness(body, start=CREATED, namespace=NS, name=NAME)
    world.reconcile_at(CREATED + timedelta(seconds=10))  # seen once before its first run
    return world


def settle(world: Harness, moment: datetime) -> None:
    """The reconciles that follow: the delayed follow-up, then the ones our own status
    writes and the Jobs' events cause, until one changes nothing."""
    for _ in range(10):
        writes = len(world.client.writes)
        world.reconcile_once_at(moment)
        if len(world.client.writes) == writes:
            return
    raise AssertionError("the reconciles never settled")


@pytest.mark.parametrize("limit", [0, 1, 2])
def test_runs_that_finish_before_they_are_recorded_are_created_once(limit: int) -> None:
    """``limit + 1`` runs finish while their follow-ups wait (each reconcile created a run,
    so none wrote status). The Job controller, behind too, started the newest first, so
    pruning by start time picks the newest: none may go before its status records it,
    nor be created again."""
    world = minutely(successfulJobsHistoryLimit=limit)
    runs = [FIRST + n * MINUTE for n in range(limit + 1)]
    for run in runs:
        result = world.reconcile_once_at(run + timedelta(seconds=1))
        assert result.follow_up, f"the reconcile at {run} created its run"
    done = runs[-1] + timedelta(seconds=30)
    for n, run in enumerate(runs):
        world.finish(job_name(NAME, run), at=done, started=done - timedelta(seconds=n))
    settle(world, done + timedelta(seconds=1))
    assert world.runs() == {job_name(NAME, run): 1 for run in runs}
    assert world.status()["lastScheduleTime"] == rfc3339(runs[-1])
    assert len(world.jobs()) == limit


def test_the_follow_up_records_a_run_that_finished_before_it_and_prunes_it_after() -> None:
    world = minutely(successfulJobsHistoryLimit=0)
    world.reconcile_once_at(FIRST + timedelta(seconds=1))
    job = job_name(NAME, FIRST)
    world.finish(job)
    world.reconcile_once_at(FIRST + timedelta(seconds=5))  # the follow-up
    assert world.status()["lastScheduleTime"] == rfc3339(FIRST)
    assert job in world.jobs(), "the reconcile that records the run does not prune it"
    world.reconcile_once_at(FIRST + timedelta(seconds=6))  # our status write's watch event
    assert world.jobs() == {}
    assert world.runs() == {job: 1}


def test_a_cache_that_lags_our_status_write_delays_the_prune_and_never_reruns() -> None:
    world = minutely(successfulJobsHistoryLimit=0)
    before_record = world.cronjob()
    world.reconcile_once_at(FIRST + timedelta(seconds=1))
    job = job_name(NAME, FIRST)
    world.finish(job)
    world.reconcile_once_at(FIRST + timedelta(seconds=5))  # records the run
    assert world.status()["lastScheduleTime"] == rfc3339(FIRST)
    # The watch event of that write is not in the cache yet: the CronJob read is the copy
    # from before the run was recorded (its resourceVersion makes any write a Conflict).
    world.reconcile_stale_at(FIRST + timedelta(seconds=6), before_record)
    assert job in world.jobs(), "the stale copy has not recorded the run: no prune yet"
    assert world.runs() == {job: 1}
    assert world.status()["lastScheduleTime"] == rfc3339(FIRST)
    world.reconcile_once_at(FIRST + timedelta(seconds=7))  # the cache caught up
    assert world.jobs() == {}
    assert world.runs() == {job: 1}


def test_a_finished_run_whose_record_was_lost_is_recorded_from_its_job_not_rerun() -> None:
    world = minutely(successfulJobsHistoryLimit=1)
    world.reconcile_at(FIRST + timedelta(seconds=1))
    job = job_name(NAME, FIRST)
    world.finish(job)
    world.edit_status(lambda status: status.pop("lastScheduleTime"))  # the record is lost
    settle(world, FIRST + timedelta(seconds=10))
    assert world.runs() == {job: 1}
    assert world.status()["lastScheduleTime"] == rfc3339(FIRST)


def fail_status_writes(count: int) -> Reaction:
    failures = iter([errors.api_error(500, {"message": "injected"})] * count)

    def reaction(action: Action) -> BaseException | None:
        return next(failures, None) if action.subresource == "status" else None

    return reaction


def test_a_manual_run_that_finishes_before_it_is_recorded_is_created_once() -> None:
    world = minutely(successfulJobsHistoryLimit=0, suspend=True)
    world.edit(
        lambda body: body["metadata"].setdefault("annotations", {}).update({RUN_ANNOTATION: "1"})
    )
    world.client.prepend_reactor("update", CRONJOB, fail_status_writes(2))
    with pytest.raises(errors.ServerError):
        world.reconcile_once_at(FIRST + timedelta(seconds=1))  # created; not recorded
    (manual,) = world.jobs()
    world.finish(manual)
    with pytest.raises(errors.ServerError):
        world.reconcile_once_at(FIRST + timedelta(seconds=5))  # the retry: still not recorded
    settle(world, FIRST + timedelta(seconds=10))
    assert world.runs() == {manual: 1}
    assert world.status()["lastHandledRunRequest"] == "1"
    assert world.jobs() == {}, "pruned once the handled request is recorded"


def test_a_finished_run_is_reported_once_when_the_next_run_is_created_beside_it() -> None:
    """The reconcile that sees a run finished and creates the next one writes no status
    (Jobs first): its follow-up, which still finds the run in the stored active list,
    must not report it again (event and runs-finished counter)."""
    world = minutely()
    world.reconcile_at(FIRST + timedelta(seconds=1))
    world.finish(job_name(NAME, FIRST), "Failed")
    world.reconcile_at(FIRST + MINUTE + timedelta(seconds=1))  # sees it, creates the next
    assert world.recorder.reasons().count("SawCompletedJob") == 1
    labels = {"namespace": NS, "cronjob": NAME, "condition": "Failed"}
    assert world.sample("cronjob_operator_jobs_finished_total", **labels) == 1
    assert world.status()["consecutiveFailures"] == 1


@pytest.mark.parametrize("policy", ["Replace", "Forbid", "Allow"])
def test_a_run_request_due_with_a_scheduled_run_is_created_once(policy: str) -> None:
    """A run request and the scheduled run are due in the same reconcile: it creates the
    requested Job, then the scheduled one (under Replace deleting the first to make room).
    Its follow-up must neither create the requested Job again nor delete the scheduled
    one: each run's Job is created once, and Replace keeps the newest, the scheduled run."""
    world = minutely(concurrencyPolicy=policy)
    world.edit(
        lambda body: body["metadata"].setdefault("annotations", {}).update({RUN_ANNOTATION: "r1"})
    )
    manual, scheduled = manual_job_name(NAME, "r1"), job_name(NAME, FIRST)
    world.reconcile_once_at(FIRST)
    world.reconcile_once_at(FIRST + timedelta(seconds=1))  # the follow-up
    settle(world, FIRST + timedelta(seconds=2))
    expected = {manual: 1} if policy == "Forbid" else {manual: 1, scheduled: 1}
    assert world.runs() == expected
    assert world.status()["lastHandledRunRequest"] == "r1"
    active = {ref["name"] for ref in world.status()["active"]}
    assert (
        active == {"Replace": {scheduled}, "Forbid": {manual}, "Allow": {manual, scheduled}}[policy]
    )
