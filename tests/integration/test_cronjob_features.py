"""Beyond the built-in CronJob (issue 14) end to end on the local control plane.

The controller runs with a fake clock (moved, then kicked, as in
test_cronjob_controller); Jobs really run under kwok. The plugin is driven as a user
would: ``kubectl cjt ...`` through kubectl's plugin lookup on PATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION, RUN_ANNOTATION
from cronjob_operator.api.cronjob_rules import manual_job_name, stagger_offset
from cronjob_operator.controllers import cronjob
from cronjob_operator.controllers.cronjob import start_timeout
from cronjob_operator.controllers.cronjob.conditions import PAUSED_REASON
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.client import LiveReader, RestClient, load_configuration
from cronjob_operator.runtime.clock import FakeClock, utc_now
from cronjob_operator.runtime.controllerutil import parse_time, rfc3339
from cronjob_operator.runtime.kinds import POD
from cronjob_operator.runtime.manager import Options
from tests.integration.support import RunningManager, apply, install_crds
from tests.integration.support import running_manager as start_manager
from tests.integration.test_cronjob_controller import (
    FIVE_MINUTES,
    World,
    created_at,
    cronjob_object,
    run_at,
    tick_after,
)
from tests.unit.test_cronjob_backfill_cost import count_backfill_walks

CJT = "cronjobs.batch.tutorial.kubebuilder.io"


@pytest.fixture(scope="module", autouse=True)
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def operator(control_plane: ControlPlane, clock: FakeClock) -> Iterator[RunningManager]:
    setups = {"cronjob": lambda mgr: cronjob.setup(mgr, clock=clock)}
    with start_manager(
        control_plane, setups, options=Options(health_probe_bind_address="0")
    ) as running:
        yield running


@pytest.fixture
def world(control_plane: ControlPlane, namespace: str) -> World:
    return World(control_plane, namespace)


def annotate(world: World, name: str, token: str) -> None:
    world.cp.kubectl(
        "annotate",
        CJT,
        name,
        "-n",
        world.ns,
        f"{RUN_ANNOTATION}={token}",
        "--overwrite",
        check=True,
    )


def test_next_schedule_time_advances_as_runs_happen_and_shows_in_kubectl_get(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(world.cp, cronjob_object("nxt", world.ns))
    first = tick_after(created_at(world, "nxt"))
    wait_for(
        lambda: world.status("nxt").get("nextScheduleTime") == rfc3339(first),
        30,
        message="nextScheduleTime is the first tick",
    )
    job = run_at(operator, clock, world, "nxt", first)
    wait_for(lambda: job in world.jobs(), 30, message=f"job {job}")
    wait_for(
        lambda: world.status("nxt").get("nextScheduleTime") == rfc3339(first + FIVE_MINUTES),
        30,
        message="nextScheduleTime moved on",
    )
    table = world.cp.kubectl("get", "cjt", "nxt", "-n", world.ns, check=True).stdout
    header, row = table.splitlines()
    assert "NEXT SCHEDULE" in header
    assert "FAILURES" in header
    # The column shows the time itself (LAST SCHEDULE, a date column, shows <invalid>
    # here: the fake clock ran ahead of the real one, so that time is in the future).
    assert row[header.index("NEXT SCHEDULE") :].split()[0] == rfc3339(first + FIVE_MINUTES)


def test_a_run_request_token_creates_one_manual_job(operator: RunningManager, world: World) -> None:
    apply(world.cp, cronjob_object("manual", world.ns, suspend=True))
    wait_for(lambda: world.condition("manual", "Available"), 30, message="first reconcile")
    annotate(world, "manual", "first")
    job_name = manual_job_name("manual", "first")
    wait_for(lambda: job_name in world.jobs(), 30, message="the manual job")
    wait_for(
        lambda: world.status("manual").get("lastHandledRunRequest") == "first",
        30,
        message="the token is recorded as handled",
    )
    job = world.jobs()[job_name]
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    # The same token again, with a reconcile after it: still one Job.
    world.cp.kubectl(
        "label", CJT, "manual", "-n", world.ns, "touched=yes", "--overwrite", check=True
    )
    annotate(world, "manual", "first")
    wait_for(
        lambda: world.cronjob("manual")["metadata"]["labels"].get("touched") == "yes",
        10,
        message="edit stored",
    )
    operator.kick("cronjob", world.ns, "manual")
    wait_for(lambda: world.job_finished(job_name, "Complete"), 60, message="manual job completes")
    assert list(world.jobs()) == [job_name]
    assert "lastScheduleTime" not in world.status("manual")


def test_under_replace_a_run_request_due_with_a_scheduled_run_runs_each_once(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    """The request and the scheduled run are due in one reconcile: the request's Job is
    made, then deleted to make room for the scheduled run; the requested run is not made
    again and the scheduled run is kept (docs/beyond-builtin.md, 2)."""
    apply(world.cp, cronjob_object("both", world.ns, run="5s", concurrencyPolicy="Replace"))
    wait_for(lambda: world.condition("both", "Available"), 30, message="first reconcile")
    first = tick_after(created_at(world, "both"))
    clock.set(first + timedelta(seconds=1))  # no kick: the annotation's event reconciles
    annotate(world, "both", "now")
    scheduled = f"both-{int(first.timestamp())}"
    wait_for(
        lambda: world.status("both").get("lastHandledRunRequest") == "now",
        30,
        message="the request is recorded as handled",
    )
    assert [ref["name"] for ref in world.status("both")["active"]] == [scheduled]
    uid = world.jobs()[scheduled]["metadata"]["uid"]
    wait_for(lambda: world.job_finished(scheduled, "Complete"), 60, message="scheduled run ends")
    wait_for(lambda: not world.status("both").get("active"), 30, message="its end recorded")
    assert {name: job["metadata"]["uid"] for name, job in world.jobs().items()} == {scheduled: uid}


def test_failing_runs_pause_after_n_and_resume_on_a_spec_edit(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(
        world.cp,
        cronjob_object(
            "flaky",
            world.ns,
            fail=True,
            failurePolicy={"pauseAfterConsecutiveFailures": 2},
            failedJobsHistoryLimit=5,
        ),
    )
    first = tick_after(created_at(world, "flaky"))
    for n in range(2):
        job = run_at(operator, clock, world, "flaky", first + n * FIVE_MINUTES)
        wait_for(lambda j=job: world.job_finished(j, "Failed"), 60, message=f"{job} fails")  # type: ignore[misc]
        operator.kick("cronjob", world.ns, "flaky")
        wait_for(
            lambda n=n: world.status("flaky").get("consecutiveFailures") == n + 1,  # type: ignore[misc]
            30,
            message=f"{n + 1} failure(s) counted",
        )
    available = wait_for(
        lambda: (
            (world.condition("flaky", "Available") or {}).get("reason") == PAUSED_REASON
            and world.condition("flaky", "Available")
        ),
        30,
        message="paused",
    )
    assert available["status"] == "False"
    assert "edit the spec" in available["message"]
    assert "nextScheduleTime" not in world.status("flaky")
    wait_for(
        lambda: PAUSED_REASON in world.event_reasons("flaky"),
        30,
        message="Warning event",
    )
    third = first + 2 * FIVE_MINUTES
    clock.set(third + timedelta(seconds=1))
    operator.kick_and_wait("cronjob", world.ns, "flaky")
    skipped = f"flaky-{int(third.timestamp())}"
    assert skipped not in world.jobs(), "no scheduled run while paused"

    cj = world.cronjob("flaky")
    cj["spec"]["startingDeadlineSeconds"] = 3600
    apply(world.cp, cj)
    wait_for(
        lambda: (world.condition("flaky", "Available") or {}).get("status") == "True",
        30,
        message="resumed by the spec edit",
    )
    assert world.status("flaky")["consecutiveFailures"] == 0
    wait_for(lambda: skipped in world.jobs(), 30, message="the due run starts again")


START_TIMEOUT = timedelta(seconds=900)
"""Longer than the first tick can be ahead of the real time the Job starts (at most ten
minutes), so the fake clock at that tick is still within the timeout."""


def unschedulable(world: World, job: str) -> dict[str, Any] | None:
    """The PodScheduled=False condition of the Job's Pod, once the scheduler wrote it."""
    pods = world.cp.kubectl_json(
        "get", "pods", "-n", world.ns, "-l", f"batch.kubernetes.io/job-name={job}"
    )["items"]
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if condition["type"] == "PodScheduled" and condition["status"] == "False":
                return condition  # type: ignore[no-any-return]
    return None


def event_messages(world: World, name: str, reason: str) -> list[str]:
    items = world.cp.kubectl_json(
        "get", "events", "-n", world.ns, "--field-selector", f"involvedObject.name={name}"
    )["items"]
    return [event["message"] for event in items if event["reason"] == reason]


def start_of(world: World, job: str) -> datetime | None:
    return parse_time(((world.jobs().get(job) or {}).get("status") or {}).get("startTime"))


def test_a_run_whose_pod_stays_pending_is_ended_and_the_next_run_starts(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    """spec.runStartTimeoutSeconds (issue 40): a Pod the real scheduler cannot place (a
    nodeSelector no kwok node matches) stays Pending under Forbid; on the fake clock moved
    past the timeout, measured from the Job's real status.startTime, the run is ended,
    counted failed, its event names the scheduler's reason, and the next run starts."""
    body = cronjob_object(
        "stuck",
        world.ns,
        concurrencyPolicy="Forbid",
        runStartTimeoutSeconds=int(START_TIMEOUT.total_seconds()),
    )
    body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["nodeSelector"] = {
        "example.com/no-node-has-this": "true"
    }
    apply(world.cp, body)
    wait_for(lambda: world.condition("stuck", "Available"), 30, message="first reconcile")
    first = run_at(operator, clock, world, "stuck", tick_after(created_at(world, "stuck")))
    wait_for(lambda: start_of(world, first), 30, message="the Job controller started the Job")
    wait_for(lambda: unschedulable(world, first), 60, message="the scheduler gave up on the Pod")
    started = start_of(world, first)
    assert started is not None

    second = timedelta(seconds=1)
    clock.set(started + START_TIMEOUT - second)
    operator.kick_and_wait("cronjob", world.ns, "stuck")
    assert first in world.jobs(), "a second before its timeout the run waits"

    # The fake clock stays at started + START_TIMEOUT + second, while the Job controller
    # stamps the next run's startTime (whole seconds) from the real clock: a next run
    # stamped within that second of the first (the scheduler gives up at once) would be
    # past its own timeout as it starts, and be ended and counted as well. Created from
    # two seconds after the first's start on, it is stamped at least that late.
    wait_for(lambda: utc_now() >= started + 2 * second, 10, message="the first start 2s old")
    clock.set(started + START_TIMEOUT + second)
    nextrun = f"stuck-{int(tick_after(clock(), 0).timestamp())}"
    operator.kick("cronjob", world.ns, "stuck")
    wait_for(lambda: nextrun in world.jobs(), 30, message="the next scheduled run started")
    wait_for(  # written by the reconcile after the one that created the Job
        lambda: [ref["name"] for ref in world.status("stuck").get("active") or ()] == [nextrun],
        30,
        message="the next run recorded in status.active",
    )
    assert first not in world.jobs()
    assert world.status("stuck")["consecutiveFailures"] == 1
    (message,) = event_messages(world, "stuck", "RunStartTimeout")
    assert message.startswith(f"Job {first}: no Pod started within spec.runStartTimeoutSeconds")
    assert "Unschedulable: 0/" in message
    assert "didn't match Pod's node affinity/selector" in message


def test_an_overdue_runs_pods_are_read_one_small_page_at_a_time(world: World) -> None:
    """Issue 47: the reconciler listed every Pod of an overdue run, every page, each whole.
    On the real API server: a Pod past Pending is found by the server's field selector
    with one Pod's metadata at most, and the cause is read from the first few Pods only."""
    uid = "0b0b0b0b-0000-4000-8000-00000000beef"
    own = {start_timeout.CONTROLLER_UID_LABEL: uid}
    for index in range(5):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"hostile-{index}", "namespace": world.ns, "labels": own},
            "spec": {  # bound to a node nothing runs: it stays Pending
                "nodeName": "no-such-node",
                "containers": [{"name": "main", "image": "busybox"}],
            },
        }
        apply(world.cp, pod)
    rest = RestClient(load_configuration(str(world.cp.kubeconfig)))
    live = LiveReader(rest)

    def started() -> list[Any]:
        return live.list_page(
            POD,
            limit=1,
            namespace=world.ns,
            label_selector=own,
            field_selector=start_timeout.STARTED_PODS,
            metadata_only=True,
        )

    assert started() == []
    page = live.list_page(
        POD, limit=start_timeout.PODS_READ, namespace=world.ns, label_selector=own
    )
    assert [p["metadata"]["name"] for p in page] == ["hostile-0", "hostile-1", "hostile-2"]
    running = world.cp.kubectl(
        "patch", "pod", "hostile-4", "-n", world.ns, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"phase": "Running"}}),
    )  # fmt: skip
    assert running.returncode == 0, running.stderr
    (found,) = started()
    assert (found["kind"], found["metadata"]["name"]) == ("Pod", "hostile-4")
    assert "spec" not in found, "metadata only"
    rest.close()


def test_stagger_delays_the_run_and_keeps_the_nominal_name(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    apply(world.cp, cronjob_object("spread", world.ns, staggerSeconds=240))
    offset = stagger_offset(world.ns, "spread", 240)
    first = tick_after(created_at(world, "spread") - offset)  # first staggered time after creation
    wait_for(
        lambda: world.status("spread").get("nextScheduleTime") == rfc3339(first + offset),
        30,
        message="nextScheduleTime is the staggered time",
    )
    if offset >= timedelta(seconds=2):
        clock.set(first + offset - timedelta(seconds=1))
        operator.kick_and_wait("cronjob", world.ns, "spread")
        assert world.jobs() == {}, "not before the staggered time"
    clock.set(first + offset + timedelta(seconds=1))
    operator.kick("cronjob", world.ns, "spread")
    nominal = f"spread-{int(first.timestamp())}"
    wait_for(lambda: nominal in world.jobs(), 30, message="the job, named for the nominal time")
    wait_for(
        lambda: world.status("spread").get("lastScheduleTime") == rfc3339(first),
        30,
        message="lastScheduleTime is the nominal time",
    )


def test_webhook_free_install_still_reports_a_bad_stagger(
    operator: RunningManager, world: World
) -> None:
    apply(world.cp, cronjob_object("tight", world.ns, schedule="*/1 * * * *", staggerSeconds=60))
    degraded = wait_for(
        lambda: (
            (world.condition("tight", "Degraded") or {}).get("status") == "True"
            and world.condition("tight", "Degraded")
        ),
        30,
        message="Degraded",
    )
    assert degraded["reason"] == "InvalidStagger"
    assert "(60 seconds)" in degraded["message"]


# --- the plugin, as a user runs it ----------------------------------------------------


def kubectl_cjt(world: World, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl cjt ARGS`` with the plugin found on PATH, as a user's shell would."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    argv = [
        str(world.cp.bin_dir / "kubectl"),
        "cjt",
        *args,
        "--kubeconfig",
        str(world.cp.kubeconfig),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)


def test_the_plugin_drives_a_cronjob(operator: RunningManager, world: World) -> None:
    apply(
        world.cp, cronjob_object("plug", world.ns, schedule="0 9 * * *", timeZone="Europe/Berlin")
    )
    wait_for(lambda: world.condition("plug", "Available"), 30, message="first reconcile")

    ran = kubectl_cjt(world, "run", "plug", "-n", world.ns)
    assert ran.returncode == 0, ran.stderr
    (printed,) = ran.stdout.splitlines()
    job_name = printed.removeprefix("job.batch/")
    assert job_name in world.jobs()
    wait_for(lambda: world.job_finished(job_name, "Complete"), 60, message="the run completes")

    nxt = kubectl_cjt(world, "next", "plug", "-n", world.ns, "--count", "2")
    assert nxt.returncode == 0, nxt.stderr
    assert len(nxt.stdout.splitlines()) == 2
    assert all("T09:00:00+0" in line for line in nxt.stdout.splitlines())

    assert kubectl_cjt(world, "suspend", "plug", "-n", world.ns).returncode == 0
    assert world.cronjob("plug")["spec"]["suspend"] is True
    assert kubectl_cjt(world, "resume", "plug", "-n", world.ns).returncode == 0
    assert world.cronjob("plug")["spec"]["suspend"] is False

    wait_for(
        lambda: not world.status("plug").get("active"), 30, message="the finished run leaves active"
    )
    history = kubectl_cjt(world, "history", "plug", "-n", world.ns)
    assert history.returncode == 0, history.stderr
    header, row = history.stdout.splitlines()
    assert header.split()[:4] == ["NAMESPACE", "JOB", "KIND", "OUTCOME"]
    assert row.split()[1:4] == [job_name, "manual", "Complete"]

    everywhere = kubectl_cjt(world, "next", "-A")
    assert everywhere.returncode == 0, everywhere.stderr
    header, *rows = everywhere.stdout.splitlines()
    assert header.split()[-1] == "SHARD"  # which replica owns it with --sharded
    mine = [row.split() for row in rows if row.split()[:2] == [world.ns, "plug"]]
    assert [row[-1] for row in mine] == ["<none>"]  # this manager is not sharded


def test_the_plugin_fails_with_one_line(world: World) -> None:
    missing = kubectl_cjt(world, "run", "nope", "-n", world.ns)
    assert missing.returncode == 1
    assert missing.stdout == ""
    (line,) = missing.stderr.strip().splitlines()
    assert "nope" in line
    assert "not found" in line
    wrong_context = kubectl_cjt(world, "history", "x", "--context", "no-such-context")
    assert wrong_context.returncode == 1
    assert "no-such-context" in wrong_context.stderr


def test_a_completed_backfill_keeps_being_reconciled_without_evaluating_its_range(
    operator: RunningManager, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The annotation of a finished backfill stays; later reconciles of its CronJob must
    not walk the range again (before: every reconcile did, 73 ms for 1,000 times)."""
    walks = count_backfill_walks(monkeypatch)
    apply(world.cp, cronjob_object("filled", world.ns, schedule="0 * * * *", suspend=True))
    wait_for(lambda: world.condition("filled", "Available"), 30, message="first reconcile")
    request = {"token": "t1", "from": "2020-01-01T00:00:00Z", "to": "2020-01-01T03:00:00Z"}
    annotation = f"{BACKFILL_ANNOTATION}={json.dumps(request)}"
    world.cp.kubectl("annotate", CJT, "filled", "-n", world.ns, annotation, check=True)
    wait_for(
        lambda: (world.status("filled").get("backfill") or {}).get("state") == "Complete",
        60,
        message="the backfill completes",
    )
    assert sorted(world.jobs()) == [f"filled-{1577836800 + 3600 * h}" for h in range(3)]
    assert len(walks) >= 1, "the probe sees the backfill's own evaluation"
    rules._remembered_times.cache_clear()  # nothing remembered: the state must say it
    counted = len(walks)
    for touch in range(5):
        world.cp.kubectl(
            "label", CJT, "filled", "-n", world.ns, f"touched={touch}", "--overwrite", check=True
        )
        operator.kick_and_wait("cronjob", world.ns, "filled")
    assert len(walks) == counted, f"{len(walks) - counted} walks of a completed backfill"
    assert (world.status("filled").get("backfill") or {}).get("state") == "Complete"
