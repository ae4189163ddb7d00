"""spec.runStartTimeoutSeconds (issue 40 item 3): a run whose Pods never start is ended.

The reconciler on the runtime's fake client (``cronjob_harness``) with an injected clock:
the Job controller's status writes and the Pods' states are written by the test. Each
test checks what a user sees: the Job gone or kept, status.active and
consecutiveFailures, the RunStartTimeout event and its cause, and the next run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from cronjob_operator.api import batch_v1, batch_v2
from cronjob_operator.api.batch_v1_settings import settings_of
from cronjob_operator.controllers.cronjob import start_timeout
from cronjob_operator.controllers.cronjob.jobs import job_name
from cronjob_operator.controllers.cronjob.plan import Delete, Deleted, Steps
from cronjob_operator.controllers.cronjob.status import CronJobStatus
from cronjob_operator.controllers.cronjob.view import StartReport
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.client import Propagation
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.kinds import JOB, POD
from cronjob_operator.webhooks import conversion
from cronjob_operator.webhooks import cronjob as cronjob_webhook
from tests.unit import cronjob_harness
from tests.unit.cronjob_harness import Harness
from tests.unit.test_webhooks import a_cronjob

NS, NAME = "default", "report"
CREATED = datetime(2016, 5, 19, 0, 0, tzinfo=UTC)
TIMEOUT = 60
UNSCHEDULABLE = (
    "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
)


def at(hours: float, seconds: float = 0) -> datetime:
    return CREATED + timedelta(hours=hours, seconds=seconds)


def world_of(**spec: Any) -> Harness:
    """An hourly CronJob created at CREATED, Forbid and a 60 s start timeout unless
    ``spec`` says otherwise."""
    body = cronjob_harness.cronjob(
        NAME,
        NS,
        created=CREATED,
        spec={
            "schedule": "0 * * * *",
            "concurrencyPolicy": "Forbid",
            "runStartTimeoutSeconds": TIMEOUT,
            **spec,
        },
    )
    return Harness(body, start=CREATED, namespace=NS, name=NAME)


def first_run(world: Harness, **counts: int) -> str:
    """Reconcile at the first scheduled time; the Job controller starts its Job then
    (``status.startTime``, ``counts`` such as ready=1). Returns the Job's name."""
    return run(world, 1, **counts)


def run(world: Harness, hours: int, **counts: int) -> str:
    """Reconcile at the scheduled time ``at(hours)`` and start its Job then, as
    ``first_run`` does; returns the Job's name."""
    world.reconcile_at(at(hours))
    name = job_name(NAME, at(hours))
    job = objects.thaw(world.client.get(JOB, name, NS))
    job["status"] = {"startTime": rfc3339(at(hours)), "active": 1, **counts}
    world.client.update_status(JOB, job)
    return name


def add_pod(world: Harness, job: str, status: dict[str, Any], suffix: str = "abcde") -> None:
    """A Pod of ``job`` as the Job controller labels it, in ``status``."""
    uid = world.client.get(JOB, job, NS)["metadata"]["uid"]
    world.client.add(
        POD,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{job}-{suffix}",
                "namespace": NS,
                "labels": {start_timeout.CONTROLLER_UID_LABEL: uid},
            },
            "status": status,
        },
    )


def unschedulable() -> dict[str, Any]:
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": UNSCHEDULABLE,
    }
    return {"phase": "Pending", "conditions": [condition]}


def image_pull_failing() -> dict[str, Any]:
    waiting = {"reason": "ErrImagePull", "message": 'pull "busybox:nope": not found'}
    return {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "main", "state": {"waiting": waiting}}],
    }


def timeout_events(world: Harness) -> list[str]:
    """The messages of the RunStartTimeout events, each a Warning."""
    events = [e for e in world.recorder.events if e.reason == start_timeout.REASON]
    assert all(e.type == "Warning" for e in events)
    return [e.message for e in events]


def pod_lists(world: Harness) -> int:
    return len(world.client.reads_of("list", POD))


def test_an_unschedulable_run_ends_at_its_timeout_and_the_next_run_starts() -> None:
    world = world_of()
    job = first_run(world)
    add_pod(world, job, unschedulable())

    result = world.reconcile_at(at(1, TIMEOUT - 1))
    assert job in world.jobs()
    assert result.requeue_after == 1, "the next look is at the timeout, not sooner"
    assert pod_lists(world) == 0, "no Pod is read before the timeout"

    world.reconcile_at(at(1, TIMEOUT))
    assert job not in world.jobs()
    (delete,) = world.client.writes_of("delete", JOB)
    assert delete.body == Propagation.BACKGROUND
    status = world.status()
    assert not status.get("active")
    assert status["consecutiveFailures"] == 1
    assert status["lastFailureTime"] == rfc3339(at(1, TIMEOUT))
    (message,) = timeout_events(world)
    assert message.startswith(f"Job {job}: no Pod started within spec.runStartTimeoutSeconds")
    assert f"Pod {job}-abcde: Unschedulable: 0/1 nodes are available" in message
    labels = {"namespace": NS, "cronjob": NAME, "condition": "Failed"}
    assert world.sample("cronjob_operator_jobs_finished_total", **labels) == 1

    world.reconcile_at(at(2))
    assert job_name(NAME, at(2)) in world.jobs(), "Forbid no longer blocks the next run"


def test_an_overdue_run_reads_one_small_page_of_its_pods_whatever_their_number() -> None:
    """Issue 47: the reconciler listed every Pod of the Job, all pages, each decoded
    whole: a hostile Job's Pods made a 49 MiB body that needed +98 MiB to decode. Now
    each LIST asks the server for a few Pods at most."""
    world = world_of()
    job = first_run(world)
    for index in range(600):
        add_pod(world, job, unschedulable(), suffix=f"{index:04}")
    world.reconcile_at(at(1, TIMEOUT))
    lists = world.client.reads_of("list", POD)
    assert lists, "the Pods were read"
    limits = [action.body.get("limit") for action in lists]
    assert all(limit is not None and limit <= start_timeout.PODS_READ for limit in limits)
    (message,) = timeout_events(world)
    assert f"Pod {job}-0000: Unschedulable: 0/1 nodes are available" in message
    assert job not in world.jobs()


def test_one_started_pod_among_hundreds_pending_keeps_its_run() -> None:
    world = world_of()
    job = first_run(world)
    for index in range(600):
        add_pod(world, job, unschedulable(), suffix=f"{index:04}")
    add_pod(world, job, {"phase": "Running"}, suffix="zzzz")  # listed last by name
    world.reconcile_at(at(1, TIMEOUT))
    assert job in world.jobs()
    assert timeout_events(world) == []


def test_the_event_names_a_container_that_cannot_pull_its_image() -> None:
    world = world_of()
    job = first_run(world)
    add_pod(world, job, image_pull_failing())
    world.reconcile_at(at(1, TIMEOUT))
    (message,) = timeout_events(world)
    assert message.endswith(f'Pod {job}-abcde: ErrImagePull: pull "busybox:nope": not found')


def test_a_run_without_pods_says_so() -> None:
    world = world_of()
    first_run(world)
    world.reconcile_at(at(1, TIMEOUT))
    (message,) = timeout_events(world)
    assert "no Pod exists" in message


def test_a_run_whose_pod_is_ready_is_never_ended_nor_its_pods_read() -> None:
    world = world_of()
    job = first_run(world, ready=1)
    gets = len(world.client.reads_of("get", JOB))  # the test's own
    result = world.reconcile_at(at(1, TIMEOUT - 10))
    assert result.requeue_after > TIMEOUT, "no timer for a run that started"
    world.reconcile_at(at(1, TIMEOUT * 10))
    assert job in world.jobs()
    assert pod_lists(world) == 0
    assert len(world.client.reads_of("get", JOB)) == gets, "the cached status sufficed"
    assert timeout_events(world) == []


def test_a_running_pod_not_ready_yet_keeps_its_run_without_a_hot_requeue() -> None:
    world = world_of()
    job = first_run(world)
    add_pod(world, job, {"phase": "Running"})
    result = world.reconcile_at(at(1, TIMEOUT))
    assert job in world.jobs()
    assert timeout_events(world) == []
    assert result.requeue_after >= (at(2) - at(1, TIMEOUT)).total_seconds(), "the next run"
    assert pod_lists(world) == 1
    gets = len(world.client.reads_of("get", JOB))

    world.reconcile_at(at(1, TIMEOUT * 2))
    assert job in world.jobs()
    assert pod_lists(world) == 1, "a run found started is not read again"
    assert len(world.client.reads_of("get", JOB)) == gets
    world.restart()
    world.reconcile_at(at(1, TIMEOUT * 3))
    assert pod_lists(world) == 2, "a restarted operator reads it once more"
    assert job in world.jobs()
    assert timeout_events(world) == []


def test_a_job_not_started_by_the_job_controller_is_not_timed() -> None:
    """No status.startTime (a suspended Job, queued by Kueue): its timeout has not begun."""
    world = world_of()
    world.reconcile_at(at(1))
    job = job_name(NAME, at(1))
    world.reconcile_at(at(1, TIMEOUT * 10))
    assert job in world.jobs()
    assert timeout_events(world) == []


def test_without_the_field_a_run_waits_for_ever() -> None:
    world = world_of(runStartTimeoutSeconds=None)
    job = first_run(world)
    add_pod(world, job, unschedulable())
    world.reconcile_at(at(1, 3000))
    assert job in world.jobs()
    assert pod_lists(world) == 0
    world.reconcile_at(at(2))
    assert job_name(NAME, at(2)) not in world.jobs()


def test_the_ended_run_feeds_the_failure_policy() -> None:
    world = world_of(failurePolicy={"pauseAfterConsecutiveFailures": 1})
    first_run(world)
    world.reconcile_at(at(1, TIMEOUT))
    assert world.condition("Available")["reason"] == "PausedAfterFailures"
    world.reconcile_at(at(2))
    assert job_name(NAME, at(2)) not in world.jobs()


def test_the_failure_counts_once_after_a_success() -> None:
    """The watermark moves with the count: a later reconcile, which sees the earlier
    success newer than the old watermark, must not reset it."""
    world = world_of()
    earlier = first_run(world, ready=1)
    world.finish(earlier, at=at(1, 30))
    world.reconcile_at(at(1, 30))
    run(world, 2)
    world.reconcile_at(at(2, TIMEOUT))
    world.reconcile_at(at(2, TIMEOUT + 5))
    assert world.status()["consecutiveFailures"] == 1
    assert len(timeout_events(world)) == 1


def test_a_failed_delete_counts_nothing_and_retries() -> None:
    world = world_of()
    job = first_run(world)
    world.client.prepend_reactor("delete", JOB, lambda _: errors.api_error(500, {}))
    try:
        world.reconcile_at(at(1, TIMEOUT))
    except errors.ApiError:
        pass
    else:
        raise AssertionError("the failed delete must fail the reconcile (backoff retry)")
    assert job in world.jobs()
    assert int(world.status().get("consecutiveFailures") or 0) == 0
    assert timeout_events(world) == []


def test_a_long_cause_is_cut_so_the_event_keeps_its_message() -> None:
    pod = {"metadata": {"name": "p"}, "status": unschedulable()}
    pod["status"]["conditions"][0]["message"] = "x" * 5000
    report = start_timeout.report_of([pod])
    assert report.started is False
    assert len(report.cause) == 600
    assert report.cause.endswith("...")


def test_an_init_container_waiting_is_the_cause() -> None:
    waiting = {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}
    pod = {
        "metadata": {"name": "p"},
        "status": {
            "phase": "Pending",
            "initContainerStatuses": [{"name": "init", "state": {"waiting": waiting}}],
        },
    }
    assert start_timeout.report_of([pod]).cause == (
        "Pod p: ImagePullBackOff: Back-off pulling image"
    )


@pytest.mark.parametrize("value", [9, 604801, "60", 1.5, True])
def test_the_webhook_refuses_a_timeout_out_of_range_naming_the_field(value: Any) -> None:
    (error,) = cronjob_webhook.validate_create(a_cronjob(runStartTimeoutSeconds=value))
    assert str(error).startswith("spec.runStartTimeoutSeconds: Invalid value: ")
    assert "must be a whole number of seconds from 10 to 604800" in str(error)


@pytest.mark.parametrize("value", [9, 604801])
def test_the_schema_refuses_a_timeout_out_of_range(value: int) -> None:
    with pytest.raises(ValidationError, match=r"run_?[sS]tart_?[tT]imeout_?[sS]econds"):
        batch_v1.CronJob.model_validate(a_cronjob(runStartTimeoutSeconds=value))


@pytest.mark.parametrize("value", [10, 604800])
def test_the_bounds_are_admitted(value: int) -> None:
    assert cronjob_webhook.validate_create(a_cronjob(runStartTimeoutSeconds=value)) == []
    batch_v1.CronJob.model_validate(a_cronjob(runStartTimeoutSeconds=value))


def test_the_timeout_survives_a_round_trip_through_v2() -> None:
    v1 = a_cronjob(runStartTimeoutSeconds=300)
    v2 = conversion.convert(v1, batch_v2.CRONJOB.api_version)
    assert v2["spec"]["runStartTimeoutSeconds"] == 300
    batch_v2.CronJob.model_validate(v2)
    assert conversion.convert(v2, batch_v1.CRONJOB.api_version) == v1


def test_a_job_the_server_no_longer_has_is_not_ended_again() -> None:
    """The cache lags a delete (an earlier reconcile ended the run): the live read finds
    the Job gone, so nothing is deleted or counted a second time."""
    world = world_of()
    first_run(world)
    world.client.prepend_reactor("get", JOB, lambda _: errors.api_error(404, {}))
    world.reconcile_at(at(1, TIMEOUT))
    assert world.client.writes_of("delete", JOB) == []
    assert int(world.status().get("consecutiveFailures") or 0) == 0
    assert timeout_events(world) == []


def pending_pod(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "status": {"phase": "Pending", **status}}


def test_a_cause_of_600_characters_is_kept_whole() -> None:
    prefix = "Pod p: Unschedulable: "
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    condition["message"] = "x" * (600 - len(prefix))
    assert start_timeout.report_of([pending_pod(conditions=[condition])]).cause == (
        prefix + condition["message"]
    )


def test_only_a_false_pod_scheduled_condition_is_a_cause() -> None:
    conditions = [
        {"type": "Initialized", "status": "False", "reason": "Other"},
        {"type": "PodScheduled", "status": "True", "reason": "Scheduled"},
    ]
    report = start_timeout.report_of([pending_pod(conditions=conditions)])
    assert report == StartReport(started=False, cause="Pod p is Pending and gives no reason")


def test_a_reason_without_a_message_is_named_alone() -> None:
    container = {"name": "main", "state": {"waiting": {"reason": "ContainerCreating"}}}
    report = start_timeout.report_of([pending_pod(containerStatuses=[container])])
    assert report.cause == "Pod p: ContainerCreating"


def test_a_started_run_does_not_shield_a_later_one_that_never_started() -> None:
    """Allow: two runs active; the first started (its Job counts a ready Pod), the second
    never did: the second alone is ended."""
    world = world_of(concurrencyPolicy="Allow")
    started = first_run(world, ready=1)
    stuck = run(world, 2)
    world.reconcile_at(at(2, TIMEOUT))
    assert started in world.jobs()
    assert stuck not in world.jobs()
    assert [ref["name"] for ref in world.status()["active"]] == [started]


def test_a_run_status_does_not_record_yet_waits_and_the_others_end_now() -> None:
    """Rule 3: an overdue run whose Job is the only evidence of its run (``recorded``
    false) is left for the write that records it; the recorded ones beside it are
    ended in the same reconcile."""
    unstarted = StartReport(started=False, cause="no Pod exists")
    view = SimpleNamespace(
        spec=settings_of({"schedule": "0 * * * *", "runStartTimeoutSeconds": TIMEOUT}),
        start_reports={"uid-a": unstarted, "uid-b": unstarted},
    )
    status: CronJobStatus = {
        "active": [{"name": "a", "uid": "uid-a"}, {"name": "b", "uid": "uid-b"}]
    }
    deleted: list[Delete] = []

    def perform(_: object, step: Any) -> Deleted:
        deleted.append(step)
        return Deleted()

    notices: list[Any] = []
    unrecorded = start_timeout.end_overdue(
        view,  # type: ignore[arg-type]
        status,
        Steps({}, perform),
        at(2),
        notices,
        recorded=lambda name: name == "b",
    )
    assert unrecorded == ["a"]
    assert deleted == [Delete("b", "uid-b", replace=True)]  # only that Job, its outcome needed
    assert status["active"] == [{"name": "a", "uid": "uid-a"}]
    assert len(notices) == 1
