"""Our CronJob beside the built-in batch/v1 CronJob, same schedule and template, same cluster.

Both controllers run on the wall clock for a few minutes (the built-in one cannot take
a fake clock); the test then checks that they created Jobs for the same scheduled
times and reached the same status. It polls with deadlines sized for a `*/1` schedule.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from cronjob_operator.controllers import cronjob
from cronjob_operator.envtest import RUN_DURATION_ANNOTATION, ControlPlane, wait_for
from cronjob_operator.runtime.conditions import parse_time, rfc3339
from cronjob_operator.runtime.manager import Options
from tests.integration.support import RunningManager, apply, install_crds, running_manager

RUNS = 2
OURS_ANNOTATION = "batch.tutorial.kubebuilder.io/scheduled-at"
BUILTIN_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"


@pytest.fixture
def operator(control_plane: ControlPlane, namespace: str) -> Iterator[RunningManager]:
    install_crds(control_plane)
    options = Options(namespace=namespace, health_probe_bind_address="0")
    with running_manager(control_plane, {"cronjob": cronjob.setup}, options=options) as running:
        yield running


def spec() -> dict[str, Any]:
    return {
        "schedule": "*/1 * * * *",
        "concurrencyPolicy": "Forbid",
        "successfulJobsHistoryLimit": 5,
        "jobTemplate": {
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"annotations": {RUN_DURATION_ANNOTATION: "1s"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox"}],
                    },
                },
            }
        },
    }


def scheduled_times(control_plane: ControlPlane, namespace: str, owner_kind: str) -> set[datetime]:
    jobs = control_plane.kubectl_json("get", "jobs", "-n", namespace)["items"]
    times = set()
    for job in jobs:
        owners = job["metadata"].get("ownerReferences") or []
        if not any(ref["kind"] == "CronJob" and ref["apiVersion"] == owner_kind for ref in owners):
            continue
        annotations = job["metadata"].get("annotations") or {}
        stamp = parse_time(annotations.get(OURS_ANNOTATION) or annotations.get(BUILTIN_ANNOTATION))
        assert stamp is not None, f"job {job['metadata']['name']} has no scheduled-time annotation"
        times.add(stamp)
    return times


def test_same_runs_and_status_as_the_builtin_controller(
    operator: RunningManager, control_plane: ControlPlane, namespace: str
) -> None:
    ours = {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {"name": "twin", "namespace": namespace},
        "spec": spec(),
    }
    builtin = copy.deepcopy(ours) | {"apiVersion": "batch/v1"}
    apply(control_plane, ours)
    apply(control_plane, builtin)
    created = max(
        parse_time(
            control_plane.kubectl_json("get", kind, "twin", "-n", namespace)["metadata"][
                "creationTimestamp"
            ]
        )
        for kind in ("cronjobs.batch.tutorial.kubebuilder.io", "cronjobs.batch")
    )
    assert created is not None

    def common_times() -> set[datetime]:
        mine = {
            t for t in scheduled_times(control_plane, namespace, ours["apiVersion"]) if t > created
        }
        theirs = {t for t in scheduled_times(control_plane, namespace, "batch/v1") if t > created}
        return mine & theirs if len(mine & theirs) >= RUNS else set()

    times = wait_for(common_times, 60 * (RUNS + 1) + 30, interval=2, message=f"{RUNS} runs of both")
    mine = {t for t in scheduled_times(control_plane, namespace, ours["apiVersion"]) if t > created}
    theirs = {t for t in scheduled_times(control_plane, namespace, "batch/v1") if t > created}
    assert mine == theirs, "both controllers ran exactly the same scheduled times"
    assert len(times) >= RUNS

    def settled_statuses() -> tuple[dict[str, Any], dict[str, Any]] | None:
        a = control_plane.kubectl_json(
            "get", "cronjobs.batch.tutorial.kubebuilder.io", "twin", "-n", namespace
        )
        b = control_plane.kubectl_json("get", "cronjobs.batch", "twin", "-n", namespace)
        sa, sb = a.get("status") or {}, b.get("status") or {}
        if (
            sa.get("active")
            or sb.get("active")
            or sa.get("lastScheduleTime") != sb.get("lastScheduleTime")
        ):
            return None
        if not sa.get("lastSuccessfulTime") or not sb.get("lastSuccessfulTime"):
            return None
        return sa, sb

    sa, sb = wait_for(
        settled_statuses, 90, interval=1, message="both statuses settle on the same run"
    )
    assert sa["lastScheduleTime"] == rfc3339(max(times)) or parse_time(
        sa["lastScheduleTime"]
    ) >= max(times)
    assert (
        abs(
            (
                parse_time(sa["lastSuccessfulTime"]) - parse_time(sb["lastSuccessfulTime"])
            ).total_seconds()
        )
        < 60
    )  # type: ignore[operator]
