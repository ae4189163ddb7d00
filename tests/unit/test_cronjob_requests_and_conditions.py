"""Beyond the built-in CronJob: next run, run now, failure pause, stagger (issue 14).

The pure rules of run requests (``controllers/cronjob/requests.py``, ``jobs.py``) and of
the failure pause (``history.py``, ``conditions.py``; stagger's are
test_cronjob_stagger.py), then the reconciler on the runtime's fake client
(through ``cronjob_harness``) with an injected clock: every time in these tests is
chosen, none read.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.api import batch_v1
from cronjob_operator.api.batch_v1 import CRONJOB, RUN_ANNOTATION
from cronjob_operator.api.cronjob_rules import (
    INSTANTIATE_ANNOTATION,
    PAUSE_FIELD,
    TOKEN_FIELD,
    manual_job_name,
    stagger_offset,
    token_problem,
)
from cronjob_operator.controllers.cronjob.conditions import (
    PAUSED_REASON,
    paused,
    resume_on_new_generation,
)
from cronjob_operator.controllers.cronjob.history import counted, record_failures
from cronjob_operator.controllers.cronjob.jobs import SCHEDULED_AT_ANNOTATION, job_name
from cronjob_operator.controllers.cronjob.status import CronJobStatus
from cronjob_operator.controllers.cronjob.view import (
    JobTimes,
    api_status,
    job_times_of,
    status_of,
)
from cronjob_operator.runtime.controllerutil import find_condition, rfc3339
from cronjob_operator.runtime.objects import freeze, thaw
from cronjob_operator.webhooks import conversion
from cronjob_operator.webhooks import cronjob as webhook
from tests.unit import cronjob_harness
from tests.unit.cronjob_harness import Harness

CREATED = datetime(2016, 5, 19, 9, 59, tzinfo=UTC)
HOUR = timedelta(hours=1)


# --- pure rules -----------------------------------------------------------------------


def test_manual_job_names_are_deterministic_fit_63_and_never_look_scheduled() -> None:
    longest = "x" * batch_v1.MAX_NAME_LENGTH
    name = manual_job_name(longest, "2026-12-02T10:00:00Z")
    assert name == manual_job_name(longest, "2026-12-02T10:00:00Z")
    assert len(name) <= 63
    assert len(name) == len(job_name(longest, CREATED))
    suffix = name.rpartition("-")[2]
    assert suffix.startswith("m")
    assert not suffix.isdigit()
    assert manual_job_name("a", "t1") != manual_job_name("a", "t2")


def test_manual_job_names_are_valid_object_names() -> None:
    """Lower case only: the API server rejects a Job name with capitals (DNS-1123)."""
    for token in ("t", "2026-12-02T10:00:00Z", "x" * 256):
        assert re.fullmatch(r"cj-m[a-z2-7]{9}", manual_job_name("cj", token)), token


def test_token_problem_names_the_annotation_and_the_limit() -> None:
    assert token_problem("x" * batch_v1.MAX_RUN_TOKEN_LENGTH) is None
    problem = token_problem("x" * 300)
    assert problem is not None
    assert RUN_ANNOTATION in problem
    assert "300" in problem
    assert "256" in problem


def failed_job(name: str, at: str) -> Any:
    return freeze(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "status": {
                "conditions": [{"type": "Failed", "status": "True", "lastTransitionTime": at}]
            },
        }
    )


def test_a_failure_is_timed_by_its_failed_condition_else_by_the_jobs_creation() -> None:
    target = {"type": "FailureTarget", "status": "True", "lastTransitionTime": rfc3339(CREATED)}
    failed = {"type": "Failed", "status": "True", "lastTransitionTime": rfc3339(CREATED + HOUR)}
    job = freeze({"metadata": {"name": "a"}, "status": {"conditions": [target, failed]}})
    assert JobTimes(job).failed == CREATED + HOUR
    untimed = freeze(
        {
            "metadata": {"name": "b", "creationTimestamp": rfc3339(CREATED)},
            "status": {"conditions": [{"type": "Failed", "status": "True"}]},
        }
    )
    assert JobTimes(untimed).failed == CREATED


def test_each_failed_job_counts_once_and_a_success_resets() -> None:
    status: CronJobStatus = {}
    first = failed_job("a", rfc3339(CREATED))
    second = failed_job("b", rfc3339(CREATED + HOUR))
    third = failed_job("c", rfc3339(CREATED + 3 * HOUR))
    times = job_times_of([first, second, third])
    assert record_failures(status, [first], times) == ["a"]
    assert record_failures(status, [first], times) == []  # a repeat reconcile
    assert record_failures(status, [second, first], times) == ["b"]
    assert api_status(status) == {
        "consecutiveFailures": 2,
        "lastFailureTime": rfc3339(CREATED + HOUR),
    }
    # Pruned: the Job is gone, the count stays.
    assert record_failures(status, [], times) == []
    assert status["consecutiveFailures"] == 2
    status["lastSuccessfulTime"] = CREATED + 2 * HOUR
    record_failures(status, [first, second], times)
    assert status["consecutiveFailures"] == 0
    record_failures(status, [first, second, third], times)
    assert status["consecutiveFailures"] == 1


def test_only_counted_failures_may_be_pruned() -> None:
    old, new = failed_job("a", rfc3339(CREATED)), failed_job("b", rfc3339(CREATED + HOUR))
    times = job_times_of([old, new])
    assert counted([old, new], {}, times) == []
    assert counted([old, new], status_of({"lastFailureTime": rfc3339(CREATED)}), times) == [old]


def test_pause_and_resume_on_a_new_generation() -> None:
    spec = batch_v1.settings_of({"failurePolicy": {"pauseAfterConsecutiveFailures": 2}})
    assert not paused(spec, {"consecutiveFailures": 1})
    assert paused(spec, {"consecutiveFailures": 2})
    never = batch_v1.settings_of({"failurePolicy": {"pauseAfterConsecutiveFailures": 0}})
    assert not paused(never, {})
    status: CronJobStatus = {
        "consecutiveFailures": 2,
        "observedGeneration": 1,
        "conditions": [{"type": "Available", "reason": PAUSED_REASON}],
    }
    assert not resume_on_new_generation(status, 1)
    assert resume_on_new_generation(status, 2)
    assert status["consecutiveFailures"] == 0


# --- the reconciler with an injected clock --------------------------------------------


@pytest.fixture
def cluster() -> Harness:
    """The reconciler of ``ns/cj`` on the fake client, its clock at ``CREATED``."""
    return Harness(start=CREATED, namespace="ns", name="cj")


def add_cronjob(cluster: Harness, **spec: Any) -> None:
    cluster.client.add(
        CRONJOB,
        cronjob_harness.cronjob(
            cluster.name,
            cluster.namespace,
            created=CREATED,
            spec={"schedule": "0 * * * *", **spec},
            annotations={},
        ),
    )


def reconcile(cluster: Harness, now: datetime) -> dict[str, Any]:
    """One reconcile at ``now``, plus the follow-up the work queue would run after a create."""
    cluster.reconcile_at(now)
    return thaw(cluster.status())


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    found = find_condition(status.get("conditions") or [], type_)
    assert found is not None
    return found


def request_run(cluster: Harness, token: str) -> None:
    cluster.edit(lambda cronjob: cronjob["metadata"]["annotations"].update({RUN_ANNOTATION: token}))


def test_next_schedule_time_is_written_once_and_cleared_when_suspended(
    cluster: Harness,
) -> None:
    add_cronjob(cluster)
    status = reconcile(cluster, CREATED)
    assert status["nextScheduleTime"] == "2016-05-19T10:00:00Z"
    writes = cluster.status_writes()
    reconcile(cluster, CREATED + timedelta(seconds=30))
    assert cluster.status_writes() == writes, "a no-op reconcile writes nothing"
    status = reconcile(cluster, CREATED + timedelta(minutes=2))  # 10:01: the 10:00 run
    assert status["nextScheduleTime"] == "2016-05-19T11:00:00Z"
    assert status["consecutiveFailures"] == 0
    cluster.edit(lambda cronjob: cronjob["spec"].update(suspend=True))
    assert "nextScheduleTime" not in reconcile(cluster, CREATED + timedelta(minutes=3))


def test_next_schedule_time_is_absent_for_a_schedule_that_never_fires(
    cluster: Harness,
) -> None:
    add_cronjob(cluster, schedule="59 23 31 2 *")
    status = reconcile(cluster, CREATED)
    assert "nextScheduleTime" not in status
    assert condition(status, "Degraded")["reason"] == "InvalidSchedule"


def test_a_run_request_creates_one_manual_job_even_when_suspended(cluster: Harness) -> None:
    add_cronjob(cluster, suspend=True)
    reconcile(cluster, CREATED)
    request_run(cluster, "token-1")
    status = reconcile(cluster, CREATED + timedelta(seconds=5))
    name = manual_job_name("cj", "token-1")
    job = cluster.jobs()[name]
    assert job["metadata"]["annotations"][INSTANTIATE_ANNOTATION] == "manual"
    assert SCHEDULED_AT_ANNOTATION not in job["metadata"]["annotations"]
    assert status["lastHandledRunRequest"] == "token-1"
    assert [ref["name"] for ref in status["active"]] == [name]
    assert "lastScheduleTime" not in status
    # The same token again (a retry, a second replica): no second Job.
    cluster.edit_status(lambda status: status.pop("lastHandledRunRequest"))
    reconcile(cluster, CREATED + timedelta(seconds=6))
    assert list(cluster.jobs()) == [name]
    assert cluster.recorder.reasons().count("SuccessfulCreate") == 1


def test_a_run_request_waits_under_forbid_and_runs_when_the_active_job_ends(
    cluster: Harness,
) -> None:
    add_cronjob(cluster, concurrencyPolicy="Forbid")
    ten = CREATED + timedelta(minutes=1)
    status = reconcile(cluster, ten + timedelta(seconds=1))
    scheduled = job_name("cj", ten)
    assert [ref["name"] for ref in status["active"]] == [scheduled]
    request_run(cluster, "now")
    status = reconcile(cluster, ten + timedelta(seconds=2))
    assert status["pendingRunRequest"] == "now"
    assert "lastHandledRunRequest" not in status
    assert cluster.recorder.reasons().count("RunRequestPending") == 1
    reconcile(cluster, ten + timedelta(seconds=3))
    assert cluster.recorder.reasons().count("RunRequestPending") == 1, "one event per pending token"
    cluster.finish(scheduled, "Complete", at=ten + timedelta(seconds=30))
    status = reconcile(cluster, ten + timedelta(seconds=31))
    manual = manual_job_name("cj", "now")
    assert manual in cluster.jobs()
    assert "pendingRunRequest" not in status
    assert status["lastHandledRunRequest"] == "now"
    assert status["lastScheduleTime"] == rfc3339(ten), "a manual run leaves it alone"


def test_an_oversized_token_stored_past_validation_is_degraded_not_run(
    cluster: Harness,
) -> None:
    add_cronjob(cluster)
    request_run(cluster, "x" * 300)
    status = reconcile(cluster, CREATED)
    assert condition(status, "Degraded")["reason"] == "InvalidRunRequest"
    assert condition(status, "Available")["status"] == "True", "scheduled runs go on"
    assert cluster.jobs() == {}
    assert "InvalidRunRequest" in cluster.recorder.reasons()


def fail_runs(cluster: Harness, first: datetime, count: int) -> datetime:
    """Let ``count`` hourly runs from ``first`` start and fail; returns the next hour."""
    moment = first
    for _ in range(count):
        reconcile(cluster, moment + timedelta(seconds=1))
        cluster.finish(job_name("cj", moment), "Failed", at=moment + timedelta(seconds=10))
        moment += HOUR
    return moment


def test_pause_after_consecutive_failures_and_resume_on_a_spec_edit(cluster: Harness) -> None:
    add_cronjob(
        cluster,
        failurePolicy={"pauseAfterConsecutiveFailures": 2},
        failedJobsHistoryLimit=1,
    )
    ten = CREATED + timedelta(minutes=1)
    after = fail_runs(cluster, ten, 2)
    status = reconcile(cluster, after - HOUR + timedelta(seconds=20))
    assert status["consecutiveFailures"] == 2
    assert status["lastFailureTime"] == rfc3339(ten + HOUR + timedelta(seconds=10))
    available = condition(status, "Available")
    assert (available["status"], available["reason"]) == ("False", PAUSED_REASON)
    assert "kubectl cjt run cj" in available["message"]
    assert "nextScheduleTime" not in status
    assert cluster.recorder.reasons().count(PAUSED_REASON) == 1
    jobs_before = set(cluster.jobs())
    status = reconcile(cluster, after + timedelta(seconds=1))
    assert set(cluster.jobs()) <= jobs_before, "no scheduled run while paused"
    assert cluster.recorder.reasons().count(PAUSED_REASON) == 1, "the Warning is not repeated"
    cluster.edit(lambda cronjob: cronjob["spec"].update(startingDeadlineSeconds=600))
    status = reconcile(cluster, after + timedelta(seconds=2))
    assert status["consecutiveFailures"] == 0
    assert condition(status, "Available")["status"] == "True"
    assert job_name("cj", after) in cluster.jobs(), "the due run starts again"
    (resumed,) = [event for event in cluster.recorder.events if event.reason == "Resumed"]
    assert resumed.type == "Normal"
    assert resumed.message.startswith("spec changed (generation 2): scheduled runs resume")


def test_failures_are_counted_once_even_when_pruned(cluster: Harness) -> None:
    add_cronjob(cluster, failedJobsHistoryLimit=0)
    ten = CREATED + timedelta(minutes=1)
    after = fail_runs(cluster, ten, 3)
    for n in range(3):  # the count lands before the prune, then the Job goes
        status = reconcile(cluster, after - HOUR + timedelta(seconds=20 + n))
    assert status["consecutiveFailures"] == 3
    assert cluster.jobs() == {}


def test_a_successful_manual_run_resumes_a_paused_cronjob(cluster: Harness) -> None:
    add_cronjob(cluster, failurePolicy={"pauseAfterConsecutiveFailures": 1})
    ten = CREATED + timedelta(minutes=1)
    after = fail_runs(cluster, ten, 1)
    status = reconcile(cluster, ten + timedelta(seconds=20))
    assert condition(status, "Available")["reason"] == PAUSED_REASON
    request_run(cluster, "fixed")
    reconcile(cluster, ten + timedelta(seconds=30))
    manual = manual_job_name("cj", "fixed")
    cluster.finish(manual, "Complete", at=ten + timedelta(seconds=40))
    status = reconcile(cluster, ten + timedelta(seconds=41))
    assert status["consecutiveFailures"] == 0
    assert condition(status, "Available")["status"] == "True"
    assert status["nextScheduleTime"] == rfc3339(after)


def test_a_bad_pause_count_stored_past_validation_is_degraded(cluster: Harness) -> None:
    add_cronjob(cluster, failurePolicy={"pauseAfterConsecutiveFailures": 0})
    status = reconcile(cluster, CREATED)
    degraded = condition(status, "Degraded")
    assert degraded["reason"] == "InvalidFailurePolicy"
    assert PAUSE_FIELD in degraded["message"]
    assert condition(status, "Available")["status"] == "True"


def test_stagger_runs_late_keeps_the_nominal_name_and_counts_the_deadline_from_it(
    cluster: Harness,
) -> None:
    add_cronjob(cluster, staggerSeconds=600, startingDeadlineSeconds=30)
    offset = stagger_offset("ns", "cj", 600)
    assert offset > timedelta(seconds=30), "the test needs an offset beyond the deadline"
    ten = CREATED + timedelta(minutes=1)
    status = reconcile(cluster, ten + timedelta(seconds=1))
    assert cluster.jobs() == {}, "not before the staggered time"
    assert status["nextScheduleTime"] == rfc3339(ten + offset)
    reconcile(cluster, ten + offset + timedelta(seconds=5))
    assert list(cluster.jobs()) == [job_name("cj", ten)]
    status = thaw(cluster.status())
    assert status["lastScheduleTime"] == rfc3339(ten)
    assert status["nextScheduleTime"] == rfc3339(ten + HOUR + offset)


def test_stagger_on_a_dst_day_shifts_each_wall_clock_run(cluster: Harness) -> None:
    # 2016-03-13, America/New_York springs forward at 02:00: the daily 03:30 is 07:30Z.
    add_cronjob(cluster, schedule="30 3 * * *", timeZone="America/New_York", staggerSeconds=900)
    offset = stagger_offset("ns", "cj", 900)
    status = reconcile(cluster, datetime(2016, 3, 13, 6, 0, tzinfo=UTC))
    assert status["nextScheduleTime"] == rfc3339(datetime(2016, 3, 13, 7, 30, tzinfo=UTC) + offset)


def test_stagger_with_every(cluster: Harness) -> None:
    add_cronjob(cluster, schedule="@every 1h", staggerSeconds=120)
    offset = stagger_offset("ns", "cj", 120)
    status = reconcile(cluster, CREATED)
    # @every anchors at the (staggered) creation time: runs at creation + k hours.
    assert status["nextScheduleTime"] == rfc3339(CREATED + HOUR)
    reconcile(cluster, CREATED + HOUR + timedelta(seconds=1))
    assert list(cluster.jobs()) == [job_name("cj", CREATED - offset + HOUR)]


def test_a_stagger_stored_past_validation_is_degraded_without_runs(cluster: Harness) -> None:
    add_cronjob(cluster, schedule="*/5 * * * *", staggerSeconds=300)
    status = reconcile(cluster, CREATED + HOUR)
    degraded = condition(status, "Degraded")
    assert degraded["reason"] == "InvalidStagger"
    assert "(300 seconds)" in degraded["message"]
    assert "use at most 299" in degraded["message"]
    assert cluster.jobs() == {}
    assert "nextScheduleTime" not in status


# --- admission and conversion ---------------------------------------------------------


def spec(**fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {"name": "cj", "namespace": "ns", "annotations": {}},
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox"}],
                        }
                    }
                }
            },
            **fields,
        },
    }


def messages(obj: dict[str, Any]) -> list[str]:
    return [f"{e.field}: {e.detail}" for e in webhook.validate_create(obj)]


def test_webhook_rejects_bad_new_fields_naming_field_and_fix() -> None:
    good = spec(staggerSeconds=299, failurePolicy={"pauseAfterConsecutiveFailures": 3})
    assert messages(good) == []
    (stagger,) = messages(spec(staggerSeconds=300))
    assert stagger.startswith("spec.staggerSeconds")
    assert "(300 seconds)" in stagger
    (negative,) = messages(spec(staggerSeconds=-1))
    assert "between 0 and 3600" in negative
    (pause,) = messages(spec(failurePolicy={"pauseAfterConsecutiveFailures": 0}))
    assert pause.startswith(PAUSE_FIELD)
    assert "at least 1" in pause
    obj = spec()
    obj["metadata"]["annotations"][RUN_ANNOTATION] = "x" * 257
    (token,) = messages(obj)
    assert token.startswith(TOKEN_FIELD)
    assert "256" in token


def test_new_fields_survive_v1_v2_v1_conversion() -> None:
    obj = spec(staggerSeconds=60, failurePolicy={"pauseAfterConsecutiveFailures": 3})
    obj["metadata"]["annotations"][RUN_ANNOTATION] = "t"
    obj["status"] = {
        "nextScheduleTime": "2026-01-01T00:05:00Z",
        "lastHandledRunRequest": "t",
        "pendingRunRequest": "u",
        "lastFailureTime": "2026-01-01T00:00:00Z",
        "consecutiveFailures": 2,
    }
    v2 = conversion.convert(obj, "batch.tutorial.kubebuilder.io/v2")
    assert v2["spec"]["staggerSeconds"] == 60
    assert v2["status"] == obj["status"]
    assert conversion.convert(v2, CRONJOB.api_version) == obj


def test_models_accept_the_new_fields_and_reject_bad_ones() -> None:
    good = spec(staggerSeconds=10, failurePolicy={"pauseAfterConsecutiveFailures": 1})
    batch_v1.CronJob.model_validate(good)
    with pytest.raises(ValueError, match="staggerSeconds"):
        batch_v1.CronJob.model_validate(spec(staggerSeconds=3601))
    with pytest.raises(ValueError, match="pauseAfterConsecutiveFailures"):
        batch_v1.CronJob.model_validate(spec(failurePolicy={"pauseAfterConsecutiveFailures": 0}))
