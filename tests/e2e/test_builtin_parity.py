"""Our CronJob beside the built-in batch/v1 CronJob, same schedule and template, same cluster.

Both controllers run on the wall clock for a few minutes (the built-in one cannot take
a fake clock); the test then checks that they created Jobs for the same scheduled
times (up to the newest time both have run, so a minute boundary cannot race the
comparison) and reached the same status, each ``lastSuccessfulTime`` being the completion
of its own last run. It polls with deadlines sized for a `*/1` schedule.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from cronjob_operator.controllers import cronjob
from cronjob_operator.envtest import RUN_DURATION_ANNOTATION, ControlPlane, wait_for
from cronjob_operator.runtime.controllerutil import parse_time
from cronjob_operator.runtime.manager import Options
from tests.integration.support import RunningManager, apply, install_crds, running_manager

RUNS = 2
OURS_ANNOTATION = "batch.tutorial.kubebuilder.io/scheduled-at"
BUILTIN_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
OURS_KIND = "cronjobs.batch.tutorial.kubebuilder.io"


@pytest.fixture
def operator(control_plane: ControlPlane, namespace: str) -> Iterator[RunningManager]:
    install_crds(control_plane)
    options = Options(namespace=namespace, health_probe_bind_address="0")
    with running_manager(control_plane, {"cronjob": cronjob.setup}, options=options) as running:
        yield running


def spec() -> dict[str, Any]:
    return {
        "schedule": "*/1 * * * *",
        "timeZone": "Asia/Kolkata",  # +05:30: the scheduled-timestamp annotation shows its zone
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


def jobs_by_time(
    control_plane: ControlPlane, namespace: str, owner_kind: str
) -> dict[datetime, dict[str, Any]]:
    """The Jobs of the CronJob of ``owner_kind`` (an apiVersion), by scheduled time."""
    jobs = control_plane.kubectl_json("get", "jobs", "-n", namespace)["items"]
    by_time = {}
    for job in jobs:
        owners = job["metadata"].get("ownerReferences") or []
        if not any(ref["kind"] == "CronJob" and ref["apiVersion"] == owner_kind for ref in owners):
            continue
        annotations = job["metadata"].get("annotations") or {}
        stamp = parse_time(annotations.get(OURS_ANNOTATION) or annotations.get(BUILTIN_ANNOTATION))
        assert stamp is not None, f"job {job['metadata']['name']} has no scheduled-time annotation"
        by_time[stamp] = job
    return by_time


def test_same_runs_and_status_as_the_builtin_controller(
    operator: RunningManager, control_plane: ControlPlane, namespace: str
) -> None:
    ours: dict[str, Any] = {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {"name": "twin", "namespace": namespace},
        "spec": spec(),
    }
    builtin = copy.deepcopy(ours) | {"apiVersion": "batch/v1"}
    kinds: dict[str, str] = {ours["apiVersion"]: OURS_KIND, "batch/v1": "cronjobs.batch"}
    apply(control_plane, ours)
    apply(control_plane, builtin)
    created = max(
        parse_time(
            control_plane.kubectl_json("get", kind, "twin", "-n", namespace)["metadata"][
                "creationTimestamp"
            ]
        )
        for kind in kinds.values()
    )
    assert created is not None

    def runs() -> dict[str, set[datetime]]:
        return {
            api: {t for t in jobs_by_time(control_plane, namespace, api) if t > created}
            for api in kinds
        }

    def enough_common_runs() -> tuple[datetime, dict[str, set[datetime]]] | None:
        seen = runs()
        common = set.intersection(*seen.values())
        return (max(common), seen) if len(common) >= RUNS else None

    cutoff, seen = wait_for(
        enough_common_runs, 60 * (RUNS + 1) + 30, interval=2, message=f"{RUNS} runs of both"
    )
    # Both controllers create runs in time order, so each has already decided every time
    # up to the newest one both created; a later minute may be in flight for one of them
    # only, so the comparison stops at the cut-off.
    mine, theirs = ({t for t in times if t <= cutoff} for times in seen.values())
    assert mine == theirs, "both controllers ran exactly the same scheduled times"
    assert len(mine) >= RUNS
    ours_jobs, builtin_jobs = (jobs_by_time(control_plane, namespace, api) for api in kinds)
    for t in mine:
        stamps = [
            jobs[t]["metadata"]["annotations"][BUILTIN_ANNOTATION]
            for jobs in (ours_jobs, builtin_jobs)
        ]
        assert stamps[0] == stamps[1], f"the same {BUILTIN_ANNOTATION} for the run of {t}"

    def settled_statuses() -> dict[str, dict[str, Any]] | None:
        statuses = {
            api: control_plane.kubectl_json("get", kind, "twin", "-n", namespace).get("status")
            or {}
            for api, kind in kinds.items()
        }
        a, b = statuses.values()
        if a.get("active") or b.get("active"):
            return None
        if a.get("lastScheduleTime") != b.get("lastScheduleTime"):
            return None
        if not a.get("lastSuccessfulTime") or not b.get("lastSuccessfulTime"):
            return None
        return statuses

    statuses = wait_for(
        settled_statuses, 90, interval=1, message="both statuses settle on the same run"
    )
    for api, status in statuses.items():
        last = parse_time(status["lastScheduleTime"])
        assert last is not None
        assert last >= cutoff, f"{api}: lastScheduleTime is at least the last common run"
        # Nothing active: the run of lastScheduleTime finished, and it is the latest success.
        job = jobs_by_time(control_plane, namespace, api)[last]
        assert status["lastSuccessfulTime"] == job["status"]["completionTime"], api
