"""The CronJob controller on the real local control plane, with a fake clock.

Jobs really run (kwok completes or fails their pods) and garbage collection really
cascades; only the controller's notion of "now" is injected, and a reconcile is kicked
after moving it, so no test waits for a wall-clock minute or depends on timing luck.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers import cronjob
from cronjob_operator.envtest import FAIL_LABEL, RUN_DURATION_ANNOTATION, ControlPlane, wait_for
from cronjob_operator.runtime.cache import Transform
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import Controller, Request
from cronjob_operator.runtime.controllerutil import parse_time, rfc3339
from cronjob_operator.runtime.kinds import JOB, Kind
from cronjob_operator.runtime.manager import Manager, Options
from cronjob_operator.schedule import parse_schedule
from tests.integration.support import (
    ReconcileWitness,
    RunningManager,
    apply,
    install_crds,
    policy_denying,
    running_manager,
)

FIVE_MINUTES = timedelta(minutes=5)
CRONJOBS = "cronjobs.batch.tutorial.kubebuilder.io"


@pytest.fixture(scope="module", autouse=True)
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def operator(control_plane: ControlPlane, clock: FakeClock) -> Iterator[RunningManager]:
    setups = {"cronjob": lambda mgr: cronjob.setup(mgr, clock=clock)}
    options = Options(health_probe_bind_address="0")
    with running_manager(control_plane, setups, options=options) as running:
        yield running


def cronjob_object(
    name: str,
    namespace: str,
    *,
    schedule: str = "*/5 * * * *",
    run: str = "200ms",
    fail: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    pod_labels = {FAIL_LABEL: "true"} if fail else {}
    return {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "metadata": {"labels": {"example": name}},
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {
                            "labels": pod_labels,
                            "annotations": {RUN_DURATION_ANNOTATION: run},
                        },
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox"}],
                        },
                    },
                },
            },
            **spec,
        },
    }


class World:
    """What a test reads back from the cluster, through kubectl as a user would."""

    def __init__(self, control_plane: ControlPlane, namespace: str) -> None:
        self.cp = control_plane
        self.ns = namespace

    def cronjob(self, name: str) -> dict[str, Any]:
        return self.cp.kubectl_json(
            "get", "cronjobs.batch.tutorial.kubebuilder.io", name, "-n", self.ns
        )  # type: ignore[no-any-return]

    def status(self, name: str) -> dict[str, Any]:
        return self.cronjob(name).get("status") or {}

    def jobs(self, namespace: str | None = None) -> dict[str, dict[str, Any]]:
        items = self.cp.kubectl_json("get", "jobs", "-n", namespace or self.ns)["items"]
        return {
            job["metadata"]["name"]: job
            for job in items
            if not job["metadata"].get("deletionTimestamp")
        }

    def event_reasons(self, name: str) -> list[str]:
        items = self.cp.kubectl_json(
            "get", "events", "-n", self.ns, "--field-selector", f"involvedObject.name={name}"
        )["items"]
        return [event["reason"] for event in items]

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        return next(
            (c for c in self.status(name).get("conditions") or [] if c["type"] == type_), None
        )

    def job_finished(self, job_name: str, state: str) -> bool:
        job = self.jobs().get(job_name) or {}
        return any(
            c["type"] == state and c["status"] == "True"
            for c in (job.get("status") or {}).get("conditions") or []
        )


@pytest.fixture
def world(control_plane: ControlPlane, namespace: str) -> World:
    return World(control_plane, namespace)


def created_at(world: World, name: str) -> datetime:
    stamp = parse_time(world.cronjob(name)["metadata"]["creationTimestamp"])
    assert stamp is not None
    return stamp


def tick_after(moment: datetime, n: int = 1) -> datetime:
    """The n-th */5 schedule time strictly after ``moment``."""
    base = moment.replace(second=0, microsecond=0)
    base -= timedelta(minutes=base.minute % 5)
    return base + n * FIVE_MINUTES


def run_at(
    operator: RunningManager, clock: FakeClock, world: World, name: str, moment: datetime
) -> str:
    """Move the clock just past ``moment``, reconcile, and return the Job name it implies."""
    clock.set(moment + timedelta(seconds=1))
    operator.kick("cronjob", world.ns, name)
    return f"{name}-{int(moment.timestamp())}"


def test_creates_job_on_schedule_and_tracks_status(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(world.cp, cronjob_object("hello", world.ns, run="2s"))
    wait_for(lambda: world.condition("hello", "Available"), 30, message="first reconcile")
    assert world.jobs() == {}, "nothing is due before the first schedule time"

    first = tick_after(created_at(world, "hello"))
    job_name = run_at(operator, clock, world, "hello", first)
    wait_for(lambda: job_name in world.jobs(), 30, message=f"job {job_name}")
    job = world.jobs()[job_name]
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert job["metadata"]["labels"]["example"] == "hello"
    assert (
        parse_time(job["metadata"]["annotations"]["batch.tutorial.kubebuilder.io/scheduled-at"])
        == first
    )

    wait_for(
        lambda: [ref["name"] for ref in world.status("hello").get("active") or []] == [job_name],
        30,
        message="status.active lists the running job",
    )
    assert world.status("hello")["lastScheduleTime"] == rfc3339(first)
    assert world.condition("hello", "Progressing")["status"] == "True"  # type: ignore[index]

    wait_for(lambda: world.job_finished(job_name, "Complete"), 60, message="job completes")
    wait_for(lambda: not world.status("hello").get("active"), 30, message="active emptied")
    status = world.status("hello")
    assert status["lastSuccessfulTime"] == world.jobs()[job_name]["status"]["completionTime"]
    assert status["observedGeneration"] == world.cronjob("hello")["metadata"]["generation"]
    wait_for(
        lambda: {"SuccessfulCreate", "SawCompletedJob"} <= set(world.event_reasons("hello")),
        30,
        message="events recorded",
    )

    operator.kick_and_wait("cronjob", world.ns, "hello")  # same time again: no second run
    assert list(world.jobs()) == [job_name]


def test_history_is_pruned_to_its_limits(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(world.cp, cronjob_object("ok", world.ns, successfulJobsHistoryLimit=1))
    apply(world.cp, cronjob_object("bad", world.ns, fail=True, failedJobsHistoryLimit=1))
    start = tick_after(max(created_at(world, "ok"), created_at(world, "bad")))
    for n in range(3):
        for name, state in (("ok", "Complete"), ("bad", "Failed")):
            job_name = run_at(operator, clock, world, name, start + n * FIVE_MINUTES)
            wait_for(
                lambda j=job_name, s=state: world.job_finished(j, s),  # type: ignore[misc]
                60,
                message=f"{job_name} {state}",
            )
    for name in ("ok", "bad"):
        operator.kick("cronjob", world.ns, name)
    last = int((start + 2 * FIVE_MINUTES).timestamp())
    wait_for(
        lambda: sorted(world.jobs()) == [f"bad-{last}", f"ok-{last}"],
        60,
        message="only the newest job of each kind is kept",
    )
    assert "SuccessfulDelete" in world.event_reasons("ok")


@pytest.mark.parametrize("policy", ["Forbid", "Replace", "Allow"])
def test_concurrency_policies(
    operator: RunningManager, clock: FakeClock, world: World, policy: str
) -> None:
    apply(world.cp, cronjob_object("busy", world.ns, run="10m", concurrencyPolicy=policy))
    first = tick_after(created_at(world, "busy"))
    job1 = run_at(operator, clock, world, "busy", first)
    wait_for(
        lambda: job1 in world.jobs() and world.status("busy").get("active"), 30, message="first run"
    )
    job2 = run_at(operator, clock, world, "busy", first + FIVE_MINUTES)

    def active_names() -> list[str]:
        return sorted(ref["name"] for ref in world.status("busy").get("active") or [])

    if policy == "Forbid":
        wait_for(
            lambda: "JobAlreadyActive" in world.event_reasons("busy"),
            30,
            message="JobAlreadyActive",
        )
        assert sorted(world.jobs()) == [job1]
        assert active_names() == [job1]
    elif policy == "Replace":
        wait_for(lambda: sorted(world.jobs()) == [job2], 60, message="old job replaced")
        wait_for(lambda: active_names() == [job2], 30, message="active holds the new job")
    else:
        wait_for(lambda: active_names() == sorted([job1, job2]), 30, message="both jobs active")
        assert sorted(world.jobs()) == sorted([job1, job2])


def test_suspend_stops_new_runs(operator: RunningManager, clock: FakeClock, world: World) -> None:
    apply(world.cp, cronjob_object("paused", world.ns, suspend=True))
    wait_for(
        lambda: (world.condition("paused", "Available") or {}).get("reason") == "Suspended",
        30,
        message="Available=False/Suspended",
    )
    due = tick_after(created_at(world, "paused"))
    clock.set(due + timedelta(seconds=1))
    operator.kick_and_wait("cronjob", world.ns, "paused")  # a reconcile at the due time
    assert world.jobs() == {}
    assert "lastScheduleTime" not in world.status("paused")
    # The same reconcile unsuspended does run: the suspension is what stopped it.
    world.cp.kubectl(
        "patch", CRONJOBS, "paused", "-n", world.ns, "--type=merge",
        "-p", '{"spec": {"suspend": false}}', check=True,
    )  # fmt: skip
    job_name = f"paused-{int(due.timestamp())}"
    wait_for(lambda: job_name in world.jobs(), 30, message=f"{job_name} once unsuspended")


@contextlib.contextmanager
def other_namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = f"other-{uuid.uuid4().hex[:8]}"
    control_plane.kubectl("create", "namespace", name, check=True)
    try:
        yield name
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false")


def foreign_job(name: str, namespace: str, owner: str, owner_uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "batch.tutorial.kubebuilder.io/v1",
                    "kind": "CronJob",
                    "name": owner,
                    "uid": owner_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            },
        },
    }


def test_jobs_of_other_owners_are_never_counted(
    operator: RunningManager, clock: FakeClock, world: World, control_plane: ControlPlane
) -> None:
    with other_namespace(control_plane) as elsewhere:
        apply(world.cp, cronjob_object("same", world.ns))
        apply(world.cp, cronjob_object("same", elsewhere))
        twin_uid = control_plane.kubectl_json(
            "get", "cronjobs.batch.tutorial.kubebuilder.io", "same", "-n", elsewhere
        )["metadata"]["uid"]
        apply(world.cp, foreign_job("twin-job", elsewhere, "same", twin_uid))
        apply(world.cp, foreign_job("stale-job", world.ns, "same", str(uuid.uuid4())))
        wait_for(
            lambda: (
                [
                    r["name"]
                    for r in World(control_plane, elsewhere).status("same").get("active") or []
                ]
                == ["twin-job"]
            ),
            30,
            message="the twin's own job is active for the twin",
        )
        operator.kick_and_wait("cronjob", world.ns, "same")
        assert world.condition("same", "Available"), "reconciled and wrote its status"
        assert not world.status("same").get("active"), (
            "a job from an earlier same-named CronJob is not ours"
        )


def test_deleting_the_cronjob_garbage_collects_its_jobs(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(world.cp, cronjob_object("doomed", world.ns, run="10m"))
    job_name = run_at(operator, clock, world, "doomed", tick_after(created_at(world, "doomed")))
    wait_for(lambda: job_name in world.jobs(), 30, message="job created")
    world.cp.kubectl(
        "delete", "cronjobs.batch.tutorial.kubebuilder.io", "doomed", "-n", world.ns, check=True
    )
    wait_for(lambda: world.jobs() == {}, 60, message="jobs garbage-collected")


def test_unparseable_schedule_is_reported_without_a_hot_loop(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(world.cp, cronjob_object("broken", world.ns, schedule="obvious error schedule"))
    degraded = wait_for(
        lambda: (
            (world.condition("broken", "Degraded") or {}).get("status") == "True"
            and world.condition("broken", "Degraded")
        ),
        30,
        message="Degraded condition",
    )
    assert degraded["reason"] == "UnparseableSchedule"
    assert "spec.schedule" in degraded["message"]
    wait_for(
        lambda: "UnparseableSchedule" in world.event_reasons("broken"), 30, message="warning event"
    )
    queue = operator.controllers["cronjob"].queue
    wait_for(lambda: len(queue) == 0, 10, message="queue idle")
    assert queue.num_requeues(Request(world.ns, "broken")) == 0

    cj = world.cronjob("broken")
    cj["spec"]["schedule"] = "*/5 * * * *"
    apply(world.cp, cj)
    wait_for(
        lambda: (world.condition("broken", "Degraded") or {}).get("status") == "False",
        30,
        message="Degraded cleared once the schedule is fixed",
    )


# --- Replace when the old Job cannot be deleted ----------------------------------------


def job_deletes_denied(namespace: str) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy (and its binding) that makes the API server refuse every
    Job DELETE in ``namespace``: a real failed delete, from the real API server."""
    return deletes_denied(namespace, "batch", "jobs")


def deletes_denied(namespace: str, group: str, resource: str) -> list[dict[str, Any]]:
    """The policy and binding that refuse every DELETE of ``resource`` in ``namespace``."""
    rule = {"apiGroups": [group], "apiVersions": ["*"], "operations": ["DELETE"]}
    return policy_denying(
        f"deny-{resource}-delete-{namespace}",
        namespace,
        rule | {"resources": [resource]},
        expression="false",
        message=f"{resource} deletes are denied",
    )


def delete_is_denied(world: World, job_name: str) -> bool:
    """Whether the API server refuses to delete ``job_name`` (a server-side dry run)."""
    result = world.cp.kubectl("delete", "job", job_name, "-n", world.ns, "--dry-run=server")
    return result.returncode != 0 and "jobs deletes are denied" in result.stderr


@contextlib.contextmanager
def denying_job_deletes(world: World, probe_job: str) -> Iterator[None]:
    """Job deletes in the test namespace fail for the length of the block.

    The policy takes effect asynchronously; ``probe_job`` (an existing Job) is used to
    wait until it does, and until it no longer does after removal."""
    policy = job_deletes_denied(world.ns)
    for obj in policy:
        apply(world.cp, obj)
    try:
        wait_for(lambda: delete_is_denied(world, probe_job), 30, message="policy in force")
        yield
    finally:
        for obj in reversed(policy):
            world.cp.kubectl("delete", obj["kind"], obj["metadata"]["name"], "--wait=true")
    wait_for(lambda: not delete_is_denied(world, probe_job), 30, message="policy removed")


def test_replace_never_runs_two_jobs_when_the_delete_fails(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(world.cp, cronjob_object("swap", world.ns, run="10m", concurrencyPolicy="Replace"))
    first = tick_after(created_at(world, "swap"))
    job1 = run_at(operator, clock, world, "swap", first)
    wait_for(
        lambda: [r["name"] for r in world.status("swap").get("active") or []] == [job1],
        30,
        message="first run active",
    )
    request = Request(world.ns, "swap")
    queue = operator.controllers["cronjob"].queue
    with denying_job_deletes(world, job1):
        job2 = run_at(operator, clock, world, "swap", first + FIVE_MINUTES)
        wait_for(lambda: "FailedDelete" in world.event_reasons("swap"), 30, message="FailedDelete")
        # The reconcile that failed to delete ends in an error and is retried with backoff
        # (a reconcile that went on to create the new Job would have succeeded).
        wait_for(lambda: queue.num_requeues(request) >= 2, 30, message="retried with backoff")
        assert sorted(world.jobs()) == [job1], "the new run must wait for the old to go"
        assert [r["name"] for r in world.status("swap").get("active") or []] == [job1]
    operator.kick("cronjob", world.ns, "swap")
    wait_for(lambda: sorted(world.jobs()) == [job2], 60, message="old job replaced once allowed")
    wait_for(
        lambda: [r["name"] for r in world.status("swap").get("active") or []] == [job2],
        30,
        message="active holds only the new job",
    )


# --- Available says whether runs start ---------------------------------------------------


def available_after(world: World, name: str, reason: str) -> dict[str, Any]:
    """The Available condition, once a reconcile has set it with ``reason``."""
    found: dict[str, Any] = wait_for(
        lambda: (
            (world.condition(name, "Available") or {}).get("reason") == reason
            and world.condition(name, "Available")
        ),
        30,
        message=f"Available reason {reason}",
    )
    return found


def test_a_cronjob_being_deleted_is_not_available(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    held = cronjob_object("held", world.ns)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    apply(world.cp, held)
    assert available_after(world, "held", "Scheduling")["status"] == "True"
    world.cp.kubectl(
        "delete", "cronjobs.batch.tutorial.kubebuilder.io", "held", "-n", world.ns, "--wait=false"
    )
    try:
        available = available_after(world, "held", "Terminating")
        assert available["status"] == "False"
        assert "example.com/hold" in available["message"]
    finally:
        world.cp.kubectl(
            "patch",
            "cronjobs.batch.tutorial.kubebuilder.io",
            "held",
            "-n",
            world.ns,
            "--type=merge",
            "-p",
            '{"metadata":{"finalizers":null}}',
        )


def test_a_job_template_the_api_server_rejects_is_not_available(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    bad = cronjob_object("rejected", world.ns)
    bad["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["name"] = "Bad_Name"
    apply(world.cp, bad)
    run_at(operator, clock, world, "rejected", tick_after(created_at(world, "rejected")))
    available = available_after(world, "rejected", "InvalidJobTemplate")
    assert available["status"] == "False"
    assert "spec.jobTemplate" in available["message"]
    # Events are posted by the recorder's own thread, after the reconcile: wait for it.
    wait_for(
        lambda: "FailedCreate" in world.event_reasons("rejected"),
        30,
        message="the FailedCreate warning posted",
        detail=lambda: world.event_reasons("rejected"),
    )


# --- editing the schedule ------------------------------------------------------------------


def test_a_schedule_edit_never_runs_a_time_before_the_edit(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(world.cp, cronjob_object("edited", world.ns))
    first = tick_after(created_at(world, "edited"))
    job1 = run_at(operator, clock, world, "edited", first)
    wait_for(lambda: world.status("edited").get("lastScheduleTime") == rfc3339(first), 30)

    # At first+4m the schedule becomes hourly at first+2m's minute: that time has passed
    # since the last run, but it is before the edit, so it must not run.
    clock.set(first + timedelta(minutes=4))
    missed = first + timedelta(minutes=2)
    edited = world.cronjob("edited")
    edited["spec"]["schedule"] = f"{missed.minute} * * * *"
    apply(world.cp, edited)
    wait_for(
        lambda: (
            (world.status("edited").get("observedSchedule") or {}).get("schedule")
            == edited["spec"]["schedule"]
        ),
        30,
        message="a reconcile after the edit recorded the new schedule",
    )
    assert f"edited-{int(missed.timestamp())}" not in world.jobs()
    assert world.status("edited")["lastScheduleTime"] == rfc3339(first)

    # The next time of the new schedule runs.
    job2 = run_at(operator, clock, world, "edited", missed + timedelta(hours=1))
    wait_for(lambda: job2 in world.jobs(), 30, message="the new schedule's next run")
    assert sorted(world.jobs()) == sorted([job1, job2])


# --- the namespace is being deleted ----------------------------------------------------------


def create_refused_as_terminating(control_plane: ControlPlane, namespace: str) -> bool:
    result = control_plane.kubectl(
        "create", "job", "probe", "--image=busybox", "-n", namespace, "--dry-run=server"
    )
    return result.returncode != 0 and "being terminated" in result.stderr


def test_a_create_in_a_terminating_namespace_warns_nothing_and_is_not_retried(
    control_plane: ControlPlane, clock: FakeClock
) -> None:
    """The namespace is deleted while the CronJob still exists, not itself being deleted
    (a policy refuses the namespace controller's delete of it, which keeps the namespace
    Terminating): its run's create is refused with the NamespaceTerminating cause."""
    setups = {"cronjob": lambda mgr: cronjob.setup(mgr, clock=clock)}
    namespace = f"ending-{uuid.uuid4().hex[:8]}"
    control_plane.kubectl("create", "namespace", namespace, check=True)
    world = World(control_plane, namespace)
    policy = deletes_denied(namespace, "batch.tutorial.kubebuilder.io", "cronjobs")
    options = Options(namespace=namespace, health_probe_bind_address="0")
    try:
        for obj in policy:
            apply(world.cp, obj)
        with running_manager(control_plane, setups, options=options) as operator:
            apply(world.cp, cronjob_object("doomed", namespace))
            assert available_after(world, "doomed", "Scheduling")["status"] == "True"
            wait_for(
                lambda: world.cp.kubectl(
                    "delete", CRONJOBS, "doomed", "-n", namespace, "--dry-run=server"
                ).returncode != 0,
                30,
                message="the policy refuses deleting the CronJob",
            )  # fmt: skip
            world.cp.kubectl("delete", "namespace", namespace, "--wait=false", check=True)
            wait_for(
                lambda: create_refused_as_terminating(control_plane, namespace),
                30,
                message=f"namespace {namespace} terminating",
            )
            assert "deletionTimestamp" not in world.cronjob("doomed")["metadata"]
            request = Request(namespace, "doomed")
            witness = operator.controllers["cronjob"].reconciler
            assert isinstance(witness, ReconcileWitness)
            queue = operator.controllers["cronjob"].queue

            run_at(operator, clock, world, "doomed", tick_after(created_at(world, "doomed")))
            available = available_after(world, "doomed", "NamespaceTerminating")
            assert available["status"] == "False"
            assert f"metadata.namespace: {namespace}" in available["message"]

            def stored() -> dict[tuple[str, str], str]:
                version = world.cronjob("doomed")["metadata"]["resourceVersion"]
                return {(namespace, "doomed"): version}

            operator.settle("cronjob", CRONJOB, stored)
            assert queue.num_requeues(request) == 0, "retried with backoff"
            # Another event (here a kick): one reconcile, one refused create, nothing more.
            before = witness.started(request)
            operator.kick_and_wait("cronjob", namespace, "doomed")
            operator.settle("cronjob", CRONJOB, stored)
            assert witness.started(request) - before == 1
            assert queue.num_requeues(request) == 0
            assert witness.started(request) <= 6, "a handful of reconciles in all"
            assert ("doomed", "Warning", "FailedCreate") not in operator.events.asked()
            assert world.jobs() == {}
    finally:
        for obj in reversed(policy):
            world.cp.kubectl("delete", obj["kind"], obj["metadata"]["name"], "--wait=true")
        world.cp.kubectl("delete", "namespace", namespace, "--wait=false")


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scheduled-time-env.yaml"
SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"


def test_the_example_reads_the_builtins_scheduled_timestamp_through_the_downward_api(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    """examples/scheduled-time-env.yaml applied as written: its Job carries the built-in's
    annotation in the CronJob's zone, and so does the Pod the Job controller makes, whose
    env var names it (the kubelet resolves the fieldRef from the Pod's own annotations)."""
    world.cp.kubectl("apply", "-n", world.ns, "-f", str(EXAMPLE), check=True)
    example = yaml.safe_load(EXAMPLE.read_text())
    name, spec = example["metadata"]["name"], example["spec"]
    wait_for(lambda: world.condition(name, "Available"), 30, message="first reconcile")
    due = parse_schedule(spec["schedule"], spec["timeZone"]).next_after(created_at(world, name))
    assert due is not None
    job_name = run_at(operator, clock, world, name, due)
    wait_for(lambda: job_name in world.jobs(), 30, message=f"job {job_name}")
    job = world.jobs()[job_name]
    stamp = job["metadata"]["annotations"][SCHEDULED_TIMESTAMP]
    assert stamp == due.astimezone(ZoneInfo(spec["timeZone"])).isoformat()  # whole seconds
    assert parse_time(stamp) == due
    (env,) = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == (
        f"metadata.annotations['{SCHEDULED_TIMESTAMP}']"
    )

    def pod_annotations() -> dict[str, str] | None:
        pods = world.cp.kubectl_json("get", "pods", "-n", world.ns, "-l", f"job-name={job_name}")
        return pods["items"][0]["metadata"].get("annotations") if pods["items"] else None

    annotations = wait_for(pod_annotations, 30, message=f"a pod of {job_name}")
    assert annotations[SCHEDULED_TIMESTAMP] == stamp


def job_posts(control_plane: ControlPlane) -> Counter[str]:
    """The API server's Job creates so far, by response code (``apiserver_request_total``;
    the operator under test is the only client that creates Jobs on this plane)."""
    posts: Counter[str] = Counter()
    for family in text_string_to_metric_families(control_plane.apiserver_metrics()):
        for sample in family.samples:
            labels = sample.labels
            request = (labels.get("verb"), labels.get("resource"), labels.get("subresource"))
            if sample.name == "apiserver_request_total" and request == ("POST", "jobs", ""):
                posts[labels["code"]] += int(sample.value)
    return posts


def test_a_run_is_created_with_one_post_though_its_follow_up_outruns_the_cache(
    control_plane: ControlPlane, clock: FakeClock, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jobs first: the reconcile that creates a run's Job leaves its status to a follow-up
    that runs at once when nothing else is queued, often before the watch brings the Job
    into the cache. Here the cache is held until that follow-up is done (the Job
    informer's transform waits for it): the reconciler remembers the Job it created, so
    the follow-up records the run instead of posting the Job again (409 AlreadyExists)."""
    follow_up_done = threading.Event()

    def held_until_the_follow_up(transform: Transform) -> Transform:
        def held(job: dict[str, Any]) -> dict[str, Any]:
            if job["metadata"]["namespace"] == world.ns:
                follow_up_done.wait(30)
            return transform(job)

        return held

    def setup(manager: Manager) -> Controller:
        set_transform = manager.cache.set_transform

        def set_held_transform(kind: Kind, transform: Transform) -> None:
            set_transform(kind, held_until_the_follow_up(transform) if kind == JOB else transform)

        monkeypatch.setattr(manager.cache, "set_transform", set_held_transform)
        return cronjob.setup(manager, clock=clock)

    options = Options(namespace=world.ns, health_probe_bind_address="0")
    with running_manager(control_plane, {"cronjob": setup}, options=options) as operator:
        apply(world.cp, cronjob_object("once", world.ns, run="60s"))
        wait_for(lambda: world.condition("once", "Available"), 30, message="first reconcile")
        operator.settle("cronjob", CRONJOB, lambda: stored_version(world, "once"))
        witness = operator.controllers["cronjob"].reconciler
        assert isinstance(witness, ReconcileWitness)
        request = Request(world.ns, "once")
        before, posts = witness.started(request), job_posts(world.cp)
        first = tick_after(created_at(world, "once"))
        job_name = run_at(operator, clock, world, "once", first)
        try:
            wait_for(
                lambda: witness.finished_since(request, before + 1),
                30,
                message="the create's reconcile and its follow-up done",
            )
        finally:
            follow_up_done.set()
        operator.settle("cronjob", CRONJOB, lambda: stored_version(world, "once"))
        assert world.status("once")["lastScheduleTime"] == rfc3339(first)
        assert [ref["name"] for ref in world.status("once")["active"]] == [job_name]
        assert job_posts(world.cp) - posts == Counter({"201": 1}), "one POST, no 409"


def stored_version(world: World, name: str) -> dict[tuple[str, str], str]:
    """The CronJob's resourceVersion on the API server, for ``RunningManager.settle``."""
    return {(world.ns, name): world.cronjob(name)["metadata"]["resourceVersion"]}
