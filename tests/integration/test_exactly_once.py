"""Each scheduled run is created once, on the real control plane, under a burst.

Many CronJobs are due at the same minute with ``successfulJobsHistoryLimit: 0`` and Jobs
that finish at once. The reconcile that creates a Job leaves its status write to a
follow-up queued behind every other due run (Jobs first), so many Jobs finish before
their run is recorded: the window in which a run used to be pruned and created again.
The manager runs in-process with one worker and a fake clock moved one minute per
round; a watch of the namespace's Jobs from a resourceVersion taken before the CronJobs
exist counts the distinct uids per Job name (tests/integration/creations.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.controllers import cronjob
from cronjob_operator.envtest import RUN_DURATION_ANNOTATION, ControlPlane, wait_for
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controllerutil import parse_time, rfc3339
from cronjob_operator.runtime.manager import Options
from tests.integration.creations import caught_up, watching_creations
from tests.integration.support import RunningManager, apply, install_crds, running_manager

CRONJOBS = 60
ROUNDS = 4
CRD = "cronjobs.batch.tutorial.kubebuilder.io"
DEADLINE = 120.0


@pytest.fixture(scope="module", autouse=True)
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


def minutely(name: str, namespace: str) -> dict[str, Any]:
    """A CronJob due every minute that keeps no finished Jobs; its Jobs finish at once."""
    return {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedule": "*/1 * * * *",
            "successfulJobsHistoryLimit": 0,
            "failedJobsHistoryLimit": 0,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {"annotations": {RUN_DURATION_ANNOTATION: "0s"}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox"}],
                        },
                    },
                }
            },
        },
    }


def sentinel_job(namespace: str, name: str) -> dict[str, Any]:
    """A suspended Job no CronJob owns: only the watch cares about it."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
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


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def operator(
    control_plane: ControlPlane, namespace: str, clock: FakeClock
) -> Iterator[RunningManager]:
    setups = {"cronjob": lambda mgr: cronjob.setup(mgr, clock=clock)}
    options = Options(namespace=namespace, health_probe_bind_address="0")
    with running_manager(control_plane, setups, options=options) as running:
        yield running


def test_a_burst_of_runs_that_finish_before_they_are_recorded_creates_each_once(
    control_plane: ControlPlane, namespace: str, clock: FakeClock, operator: RunningManager
) -> None:
    names = [f"burst-{n}" for n in range(CRONJOBS)]

    def cronjobs() -> dict[str, dict[str, Any]]:
        items = control_plane.kubectl_json("get", CRD, "-n", namespace)["items"]
        return {item["metadata"]["name"]: item for item in items}

    def jobs() -> list[str]:
        items = control_plane.kubectl_json("get", "jobs", "-n", namespace)["items"]
        return [job["metadata"]["name"] for job in items]

    def recorded(moment: datetime) -> int:
        stamp = rfc3339(moment)
        return sum(
            (c.get("status") or {}).get("lastScheduleTime") == stamp for c in cronjobs().values()
        )

    path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    with watching_creations(control_plane, path) as creations:
        apply(control_plane, {"apiVersion": "v1", "kind": "List", "items": [
            minutely(name, namespace) for name in names
        ]})  # fmt: skip
        wait_for(
            lambda: (
                sum("observedSchedule" in (c.get("status") or {}) for c in cronjobs().values())
                == CRONJOBS
            ),
            DEADLINE,
            interval=1.0,
            message="every CronJob reconciled once",
        )
        newest = max(
            parse_time(c["metadata"]["creationTimestamp"]) or clock() for c in cronjobs().values()
        )
        first = newest.replace(second=0, microsecond=0) + timedelta(minutes=1)
        rounds = [first + timedelta(minutes=n) for n in range(ROUNDS)]
        for moment in rounds:
            clock.set(moment + timedelta(seconds=1))
            for name in names:
                operator.kick("cronjob", namespace, name)
            wait_for(
                lambda m=moment: recorded(m) == CRONJOBS,  # type: ignore[misc]
                DEADLINE,
                interval=1.0,
                message=f"every CronJob recorded its {rfc3339(moment)} run",
                detail=lambda m=moment: f"{recorded(m)} of {CRONJOBS}",  # type: ignore[misc]
            )
        # History 0: every Job goes, once the status that records its run is stored.
        wait_for(
            lambda: jobs() == [],
            DEADLINE,
            interval=1.0,
            message="every finished Job pruned",
            detail=jobs,
        )
        sentinel = caught_up(
            creations, lambda name: apply(control_plane, sentinel_job(namespace, name))
        )
        counts = creations.counts()
    expected = {f"{name}-{int(moment.timestamp())}" for name in names for moment in rounds}
    runs = {name: count for name, count in counts.items() if name != sentinel}
    duplicated = {name: count for name, count in runs.items() if count > 1}
    assert duplicated == {}, f"{len(duplicated)} of {len(expected)} runs were created twice"
    assert set(runs) == expected
