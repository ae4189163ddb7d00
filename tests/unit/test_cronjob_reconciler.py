"""The CronJob reconciler on the fake client, with an injected clock: no cluster, no waiting.

Each test sets up the objects, moves the clock and calls ``reconcile`` directly, then
reads back what the API would hold. The same behaviours run on the real control plane
in tests/integration/test_cronjob_controller.py; these cover the branches fast.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from cronjob_operator import schedule as schedules
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import CRONJOB, MAX_NAME_LENGTH
from cronjob_operator.controllers.cronjob.jobs import (
    SCHEDULED_AT_ANNOTATION,
    job_name,
    job_reference,
)
from cronjob_operator.controllers.cronjob.reconciler import skip_status_echoes
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.controller import Result
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.fake import DEFAULT_START, Action
from cronjob_operator.runtime.kinds import JOB
from tests.unit import cronjob_harness

NS = "ns1"
NAME = "every5"
CREATED = DEFAULT_START  # 00:00, a five-minute boundary
FIRST_RUN = CREATED + timedelta(minutes=5)


def cronjob(**spec: Any) -> dict[str, Any]:
    return cronjob_harness.cronjob(
        NAME,
        NS,
        created=CREATED,
        spec={"schedule": "*/5 * * * *", **spec},
        containers=[{"name": "c"}],
    )


def harness(*initial: dict[str, Any]) -> cronjob_harness.Harness:
    """The shared harness, reconciling ``NS/NAME`` from ``CREATED``."""
    return cronjob_harness.Harness(*initial, start=CREATED, namespace=NS, name=NAME)


def test_first_run_creates_the_job_and_records_it() -> None:
    world = harness(cronjob())
    result = world.reconcile_at(FIRST_RUN + timedelta(seconds=3))
    expected = job_name(NAME, FIRST_RUN)
    assert list(world.jobs()) == [expected]
    job = world.jobs()[expected]
    owner = objects.controller_ref(job)
    assert owner is not None
    assert owner["uid"] == world.cronjob()["metadata"]["uid"]
    status = world.status()
    assert status["lastScheduleTime"] == rfc3339(FIRST_RUN)
    assert [ref["name"] for ref in status["active"]] == [expected]
    assert world.recorder.reasons() == ["SuccessfulCreate"]
    assert world.condition("Progressing")["status"] == "True"
    assert world.condition("Available")["reason"] == "Scheduling"
    assert result.requeue_after == pytest.approx(5 * 60 - 3, abs=1)


def test_a_job_never_takes_a_sharding_label_from_the_job_template() -> None:
    """The sharding labels are the manager's (docs/security.md): a CronJob's author
    cannot give its Jobs a bucket through ``jobTemplate.metadata.labels``."""
    forged = {"sharding.cronjob-operator.io/bucket": "7", "team": "a"}
    body = cronjob()
    body["spec"]["jobTemplate"]["metadata"] = {"labels": forged}
    world = harness(body)
    world.reconcile_at(FIRST_RUN + timedelta(seconds=3))
    job = world.jobs()[job_name(NAME, FIRST_RUN)]
    assert job["metadata"]["labels"] == {"team": "a"}


def test_a_reconcile_that_creates_the_job_walks_the_schedule_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The decision after the create (same view, same now) reuses the first one's walk."""
    walked: list[datetime] = []
    walk = schedules.most_recent_due

    def counted(schedule: Any, **arguments: Any) -> Any:
        walked.append(arguments["now"])
        return walk(schedule, **arguments)

    monkeypatch.setattr(schedules, "most_recent_due", counted)
    world = harness(cronjob())
    result = world.reconcile_once_at(FIRST_RUN + timedelta(seconds=3))
    assert result.follow_up
    assert list(world.jobs()) == [job_name(NAME, FIRST_RUN)]
    assert walked == [FIRST_RUN + timedelta(seconds=3)]


def test_each_reconcile_reads_the_window_and_exclusions_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The decision after the create, and the condition check of the follow-up, use the
    window the view read (366 excluded dates cost more to read than a decision)."""
    reads: list[Any] = []
    read = rules.window_of

    def counted(settings: Any) -> Any:
        reads.append(settings.exclusions)
        return read(settings)

    monkeypatch.setattr(rules, "window_of", counted)
    world = harness(
        cronjob(exclusions={"dates": ["2100-01-02"]}, window={"end": "2100-01-01T00:00:00Z"})
    )
    assert world.reconcile_once_at(FIRST_RUN + timedelta(seconds=3)).follow_up
    assert list(world.jobs()) == [job_name(NAME, FIRST_RUN)]
    assert len(reads) == 1
    world.reconcile_once_at(FIRST_RUN + timedelta(seconds=3))  # the follow-up writes status
    assert world.condition("Available")["reason"] == "Scheduling"
    assert len(reads) == 2


def test_before_the_first_time_nothing_runs_and_it_requeues_for_it() -> None:
    world = harness(cronjob())
    result = world.reconcile_at(CREATED + timedelta(minutes=2))
    assert world.jobs() == {}
    assert result.requeue_after == pytest.approx(3 * 60, abs=1)
    assert world.condition("Progressing")["reason"] == "Idle"


def test_same_time_twice_creates_one_job_and_writes_nothing_new() -> None:
    world = harness(cronjob())
    world.reconcile_at(FIRST_RUN)
    writes = len(world.client.writes)
    world.reconcile_at(FIRST_RUN + timedelta(seconds=10))
    assert len(world.jobs()) == 1
    assert world.client.writes[writes:] == []  # a no-op reconcile makes no API writes


def test_finished_job_moves_to_last_successful_time() -> None:
    world = harness(cronjob())
    world.reconcile_at(FIRST_RUN)
    world.clock.advance(timedelta(minutes=1))
    world.finish(job_name(NAME, FIRST_RUN))
    world.reconcile_at(world.clock())
    status = world.status()
    assert status.get("active") in (None, ())
    assert status["lastSuccessfulTime"] == rfc3339(FIRST_RUN + timedelta(minutes=1))
    assert "SawCompletedJob" in world.recorder.reasons()


@pytest.mark.parametrize(
    ("policy", "jobs_after", "reason"),
    [
        ("Allow", 2, "SuccessfulCreate"),
        ("Forbid", 1, "JobAlreadyActive"),
        ("Replace", 1, "SuccessfulDelete"),
    ],
)
def test_concurrency_policies(policy: str, jobs_after: int, reason: str) -> None:
    world = harness(cronjob(concurrencyPolicy=policy))
    world.reconcile_at(FIRST_RUN)
    world.recorder.clear()
    second = FIRST_RUN + timedelta(minutes=5)
    world.reconcile_at(second)
    assert len(world.jobs()) == jobs_after
    assert reason in world.recorder.reasons()
    if policy == "Replace":
        assert list(world.jobs()) == [job_name(NAME, second)]
        assert [ref["name"] for ref in world.status()["active"]] == [job_name(NAME, second)]


def test_history_limits_prune_the_oldest_finished_jobs() -> None:
    world = harness(cronjob(successfulJobsHistoryLimit=1, failedJobsHistoryLimit=0))
    runs = [FIRST_RUN + timedelta(minutes=5 * i) for i in range(3)]
    for run in runs:
        world.reconcile_at(run)
    world.finish(job_name(NAME, runs[0]), started=runs[0])
    world.finish(job_name(NAME, runs[1]), started=runs[1])
    world.finish(job_name(NAME, runs[2]), "Failed", started=runs[2])
    world.reconcile_at(runs[2] + timedelta(minutes=1))
    # A failed Job is pruned only once the stored status has counted it (failure
    # awareness): the reconcile above counted it, this one prunes it.
    world.reconcile_at(runs[2] + timedelta(minutes=1, seconds=1))
    assert list(world.jobs()) == [job_name(NAME, runs[1])]
    deletes = world.client.writes_of("delete", JOB)
    assert {action.name for action in deletes} == {job_name(NAME, runs[0]), job_name(NAME, runs[2])}


def test_suspend_stops_new_runs_and_says_so() -> None:
    world = harness(cronjob(suspend=True))
    result = world.reconcile_at(FIRST_RUN)
    assert world.jobs() == {}
    # It looks again at the next time only to count that time as skipped (Suspended).
    assert result == Result(requeue_after=timedelta(minutes=5, milliseconds=100).total_seconds())
    assert world.condition("Available")["reason"] == "Suspended"


def test_starting_deadline_skips_a_run_that_is_too_late() -> None:
    world = harness(cronjob(startingDeadlineSeconds=60))
    world.reconcile_at(FIRST_RUN + timedelta(minutes=2))
    assert world.jobs() == {}
    world.reconcile_at(FIRST_RUN + timedelta(minutes=5, seconds=30))
    assert list(world.jobs()) == [job_name(NAME, FIRST_RUN + timedelta(minutes=5))]


def test_too_many_missed_runs_start_only_the_latest() -> None:
    world = harness(cronjob())
    late = CREATED + timedelta(days=1, seconds=10)
    world.reconcile_at(late)
    assert list(world.jobs()) == [job_name(NAME, CREATED + timedelta(days=1))]
    assert "TooManyMissedTimes" in world.recorder.reasons()


def test_missed_times_are_counted_from_the_last_run_not_from_creation() -> None:
    world = harness(cronjob())
    late = CREATED + timedelta(days=1, seconds=10)
    world.reconcile_at(late)
    world.recorder.clear()
    world.reconcile_at(late + timedelta(minutes=5))
    assert job_name(NAME, CREATED + timedelta(days=1, minutes=5)) in world.jobs()
    assert world.recorder.reasons() == ["SuccessfulCreate"], "one missed time, not 289"


def test_a_name_stored_past_validation_too_long_for_job_names_is_degraded() -> None:
    long_name = "n" * (MAX_NAME_LENGTH + 1)
    spec = {"schedule": "*/5 * * * *"}
    world = cronjob_harness.Harness(
        cronjob_harness.cronjob(long_name, NS, created=CREATED, spec=spec),
        start=CREATED,
        namespace=NS,
        name=long_name,
    )
    assert world.reconcile_at(FIRST_RUN) == Result()
    assert world.jobs() == {}
    assert world.condition("Degraded")["reason"] == "NameTooLong"
    (event,) = world.recorder.events
    assert (event.type, event.reason) == ("Warning", "FailedCreate")
    assert event.message.startswith("metadata.name: ")


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"schedule": "not a schedule"}, "UnparseableSchedule"),
        ({"timeZone": "Mars/Olympus"}, "UnknownTimeZone"),
        ({"schedule": "0 0 30 2 *"}, "InvalidSchedule"),
    ],
)
def test_bad_input_is_degraded_and_not_retried(spec: dict[str, Any], reason: str) -> None:
    world = harness(cronjob(**spec))
    result = world.reconcile_at(FIRST_RUN)
    assert result == Result()
    degraded = world.condition("Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", reason)
    assert world.condition("Available")["status"] == "False"
    assert world.recorder.events[0].type == "Warning"
    assert world.jobs() == {}


def test_job_the_api_rejects_is_degraded_and_not_available() -> None:
    world = harness(cronjob())

    def reject(action: Action) -> errors.ApiError:
        status = {"reason": "Invalid", "message": f"Job {action.name} is invalid: spec: bad"}
        return errors.api_error(422, status)

    world.client.prepend_reactor("create", JOB, reject)
    world.reconcile_at(FIRST_RUN)
    assert world.condition("Degraded")["reason"] == "InvalidJobTemplate"
    available = world.condition("Available")
    assert (available["status"], available["reason"]) == ("False", "InvalidJobTemplate")
    assert "FailedCreate" in world.recorder.reasons()


def test_other_create_failures_raise_for_backoff() -> None:
    world = harness(cronjob())
    world.client.prepend_reactor("create", JOB, lambda _: errors.api_error(500, {}))
    with pytest.raises(errors.ServerError):
        world.reconcile_at(FIRST_RUN)


def test_status_conflict_is_merged_onto_a_fresh_read() -> None:
    """One reconcile, pinned: its status write conflicts (another writer changed the
    status since the cache's copy) and is merged onto a fresh read, both changes kept.
    No follow-up runs, so a dropped Conflict would leave the status unwritten."""
    world = harness(cronjob())
    world.reconcile_at(FIRST_RUN)
    world.finish(job_name(NAME, FIRST_RUN), at=FIRST_RUN + timedelta(minutes=1))
    cached = world.cronjob()  # what the reconcile reads: from before the other write
    world.edit_status(lambda status: status.update(lastHandledRunRequest="theirs"))
    writes = world.status_writes()
    result = world.reconcile_stale_at(FIRST_RUN + timedelta(minutes=2), cached)
    assert not result.follow_up
    assert world.status_writes() == writes + 2, "the conflicting write, then the merged one"
    status = world.status()
    assert status["lastSuccessfulTime"] == rfc3339(FIRST_RUN + timedelta(minutes=1))  # ours
    assert status.get("active") in (None, ())
    assert status["lastHandledRunRequest"] == "theirs"


def test_job_of_someone_else_with_our_name_is_left_alone() -> None:
    stranger = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(NAME, FIRST_RUN), "namespace": NS},
        "spec": {},
    }
    world = harness(cronjob(), stranger)
    world.reconcile_at(FIRST_RUN)
    assert "UnexpectedJob" in world.recorder.reasons()
    assert objects.controller_ref(world.jobs()[job_name(NAME, FIRST_RUN)]) is None


def test_deleted_cronjob_is_done() -> None:
    world = harness()
    assert world.reconcile_at(FIRST_RUN) == Result()
    assert world.client.writes == []


def test_active_job_that_is_gone_is_dropped_from_status() -> None:
    world = harness(cronjob())
    world.reconcile_at(FIRST_RUN)
    world.client.delete(JOB, job_name(NAME, FIRST_RUN), namespace=NS)
    world.reconcile_at(FIRST_RUN + timedelta(minutes=1))
    assert world.status().get("active") in (None, ())
    assert "MissingJob" in world.recorder.reasons()


def test_run_created_but_never_recorded_is_recorded_not_rerun() -> None:
    world = harness(cronjob())
    world.reconcile_at(FIRST_RUN)
    crashed = objects.thaw(world.cronjob())
    del crashed["status"]["lastScheduleTime"]  # as if the status write was lost in a crash
    world.client.update_status(CRONJOB, crashed)
    world.reconcile_at(FIRST_RUN + timedelta(seconds=30))
    assert len(world.client.writes_of("create", JOB)) == 1  # no second attempt
    assert world.status()["lastScheduleTime"] == rfc3339(FIRST_RUN)


def test_status_records_the_generation_it_saw() -> None:
    world = harness(cronjob())
    world.reconcile_at(FIRST_RUN)
    body = objects.thaw(world.cronjob())
    body["spec"]["schedule"] = "*/10 * * * *"
    world.client.update(CRONJOB, body)
    world.reconcile_at(FIRST_RUN + timedelta(minutes=1))
    assert world.status()["observedGeneration"] == 2
    assert world.condition("Available")["observedGeneration"] == 2


def test_cronjob_being_deleted_starts_no_run() -> None:
    doomed = cronjob()
    doomed["metadata"]["finalizers"] = ["example.com/hold"]
    world = harness(doomed)
    world.client.delete(CRONJOB, NAME, namespace=NS)
    world.reconcile_at(FIRST_RUN)
    assert world.jobs() == {}


def test_a_run_listed_active_that_the_cache_lags_is_recorded_not_created_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """status.active names the due run's Job but lastScheduleTime does not (a record lost
    halfway), and the cache has not seen the Job yet: the API server has it, so the run
    is recorded and nothing is created again."""
    world = harness(cronjob())
    world.reconcile_once_at(FIRST_RUN)  # creates the Job; its status write follows later
    job = world.jobs()[job_name(NAME, FIRST_RUN)]

    def record_lost_halfway(status: dict[str, Any]) -> None:
        status["active"] = [job_reference(job)]
        status.pop("lastScheduleTime", None)

    world.edit_status(record_lost_halfway)
    creates = len(world.client.writes_of("create", JOB))
    monkeypatch.setattr(world.client, "list", lambda *args, **kwargs: [])  # the cache lags
    world.reconcile_once_at(FIRST_RUN + timedelta(seconds=1))
    assert world.client.writes_of("create", JOB)[creates:] == []
    assert world.status()["lastScheduleTime"] == rfc3339(FIRST_RUN)
    assert [ref["name"] for ref in world.status()["active"]] == [objects.name_of(job)]


def test_the_follow_up_of_a_create_the_cache_lags_records_the_run_and_creates_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The follow-up of a create runs at once, before the watch brings the new Job into
    the cache (low load): the reconciler remembers the Job it created, so the follow-up
    records the run with one status write instead of creating the Job again (a 409
    AlreadyExists, a live read and one more follow-up)."""
    world = harness(cronjob())
    world.reconcile_at(CREATED + timedelta(seconds=1))  # the status before any run
    writes = world.status_writes()
    monkeypatch.setattr(world.client, "list", lambda *args, **kwargs: [])  # the cache lags
    assert world.reconcile_once_at(FIRST_RUN).follow_up, "Jobs first: the create follows up"
    assert world.status_writes() == writes
    follow_up = world.reconcile_once_at(FIRST_RUN + timedelta(seconds=1))
    assert len(world.client.writes_of("create", JOB)) == 1
    assert world.status_writes() == writes + 1
    assert not follow_up.follow_up
    assert world.status()["lastScheduleTime"] == rfc3339(FIRST_RUN)
    assert [ref["name"] for ref in world.status()["active"]] == [job_name(NAME, FIRST_RUN)]
    assert world.client.reads_of("get", JOB) == [], "the remembered Job is not read live"


def test_a_created_job_the_cache_never_showed_is_remembered_for_one_reconcile_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Job is deleted before the cache ever lists it: the follow-up records the run
    from what the reconciler remembers, and the next reconcile asks the API server about
    the active entry, finds it gone, and keeps no run alive from memory."""
    world = harness(cronjob())
    monkeypatch.setattr(world.client, "list", lambda *args, **kwargs: [])  # the cache lags
    world.reconcile_once_at(FIRST_RUN)
    job = job_name(NAME, FIRST_RUN)
    world.client.delete(JOB, job, namespace=NS)
    world.reconcile_once_at(FIRST_RUN + timedelta(seconds=1))  # the follow-up
    assert [ref["name"] for ref in world.status()["active"]] == [job]
    world.reconcile_once_at(FIRST_RUN + timedelta(seconds=2))
    assert not world.status().get("active")
    assert world.status()["lastScheduleTime"] == rfc3339(FIRST_RUN)
    assert len(world.client.writes_of("create", JOB)) == 1


def test_a_job_event_before_the_echo_of_our_status_write_writes_nothing() -> None:
    """The follow-up records the run; the Job's watch event comes before the echo of
    that write, so the next reconcile's cache holds the CronJob as it was before the
    write: the reconciler decides from the object its write returned, and writes
    nothing (not the same status again, to a 409 Conflict and a fresh read)."""
    world = harness(cronjob())
    world.reconcile_at(CREATED + timedelta(seconds=1))
    assert world.reconcile_once_at(FIRST_RUN).follow_up
    before_write = world.cronjob()
    world.reconcile_once_at(FIRST_RUN + timedelta(seconds=1))  # the follow-up records it
    writes, reads = world.status_writes(), len(world.client.reads_of("get", CRONJOB))
    world.reconcile_lagging_at(FIRST_RUN + timedelta(seconds=2), before_write)
    assert world.status_writes() == writes
    assert len(world.client.reads_of("get", CRONJOB)) == reads, "no fresh read either"
    assert world.status()["lastScheduleTime"] == rfc3339(FIRST_RUN)


def test_our_last_write_is_kept_only_until_its_echo_reaches_the_cache() -> None:
    """The object our status write returned is kept while the cache holds the copy the
    write was decided from; the update that brings the write (or any later version)
    drops it, so the reconciler holds one object per write in flight, not per CronJob."""
    world = harness(cronjob())
    world.reconcile_at(CREATED + timedelta(seconds=1))
    assert world.reconcile_once_at(FIRST_RUN).follow_up
    before_write = world.cronjob()
    world.reconcile_once_at(FIRST_RUN + timedelta(seconds=1))  # the follow-up writes
    key = (world.namespace, world.name)
    assert key in world.reconciler._written  # the echo is still on its way
    update = skip_status_echoes(world.reconciler.echoes, world.reconciler.cache_moved).update
    update(before_write, before_write)  # a resync of the old copy: still on its way
    assert key in world.reconciler._written
    update(before_write, world.cronjob())  # the echo
    assert key not in world.reconciler._written


def test_the_scheduled_time_annotation_is_in_the_cronjobs_time_zone() -> None:
    world = harness(cronjob(timeZone="Europe/Berlin"))
    world.reconcile_at(FIRST_RUN)
    (job,) = world.jobs().values()
    # 00:05 UTC is 01:05 in Berlin (CET) on the day of CREATED.
    assert job["metadata"]["annotations"][SCHEDULED_AT_ANNOTATION] == "2026-01-01T01:05:00+01:00"
