"""The per-CronJob run metrics: which notices count a finished run, and the gauge's life.

The counters move in the reconciler when ``sync_status`` reports a run that left
``status.active``; here the pure part (the notice says how the run ended, once) and the
removal of every series of a deleted CronJob (on the reconciler, for 1,000 of them).
tests/e2e/test_observability.py reads the same
series through a real Prometheus.
"""

from __future__ import annotations

from datetime import timedelta

from prometheus_client import CollectorRegistry

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers.cronjob.history import sync_status
from cronjob_operator.controllers.cronjob.jobs import JobSets, classify, job_name, job_reference
from cronjob_operator.controllers.cronjob.status import CronJobStatus
from cronjob_operator.controllers.cronjob.view import job_times_of
from cronjob_operator.controllers.metrics import CronJobMetrics
from cronjob_operator.runtime.controller import Request
from cronjob_operator.runtime.fake import DEFAULT_START
from tests.unit import cronjob_harness
from tests.unit.test_cronjob_history import job


def test_a_run_leaving_active_says_how_it_finished_once() -> None:
    failed, complete = job("f", finished="Failed"), job("c", finished="Complete")
    status: CronJobStatus = {"active": [job_reference(failed), job_reference(complete)]}
    sets = classify([failed, complete])
    times = job_times_of([failed, complete])
    assert [n.finished for n in sync_status(status, sets, times)] == ["Failed", "Complete"]
    assert [n.finished for n in sync_status(status, sets, times)] == []  # counted once


def test_missing_runs_are_not_counted_as_finished() -> None:
    status: CronJobStatus = {"active": [{"name": "gone", "uid": "uid-gone"}]}
    notices = sync_status(status, JobSets(), {}, confirmed_missing=["uid-gone"])
    assert [(n.reason, n.finished) for n in notices] == [("MissingJob", None)]


def test_forget_drops_the_active_gauge_of_a_deleted_cronjob() -> None:
    registry = CollectorRegistry()
    metrics = CronJobMetrics(registry)
    labels = {"namespace": "unit-metrics", "cronjob": "deleted"}
    metrics.active_jobs.labels(*labels.values()).set(2)
    assert registry.get_sample_value("cronjob_operator_active_jobs", labels) == 2
    metrics.forget_cronjob(*labels.values())
    metrics.forget_cronjob(*labels.values())  # twice is fine
    assert registry.get_sample_value("cronjob_operator_active_jobs", labels) is None


def test_two_registries_keep_separate_counts() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    CronJobMetrics(first).jobs_created.labels("ns", "a").inc()
    CronJobMetrics(second)
    labels = {"namespace": "ns", "cronjob": "a"}
    assert first.get_sample_value("cronjob_operator_jobs_created_total", labels) == 1
    assert second.get_sample_value("cronjob_operator_jobs_created_total", labels) is None


def series_of(registry: CollectorRegistry, namespace: str) -> list[tuple[str, dict[str, str]]]:
    """Every sample in ``registry`` labelled with ``namespace``."""
    return [
        (sample.name, sample.labels)
        for family in registry.collect()
        for sample in family.samples
        if sample.labels.get("namespace") == namespace
    ]


def test_every_series_of_a_deleted_cronjob_goes_with_it() -> None:
    """1,000 CronJobs run (created, finished both ways, active), then are deleted: the
    registry keeps no series of theirs, so its size is bounded by the CronJobs that exist."""
    namespace, first = "churn", DEFAULT_START + timedelta(minutes=5)
    names = [f"cj-{n}" for n in range(1000)]
    bodies = [
        cronjob_harness.cronjob(
            name, namespace, created=DEFAULT_START, spec={"schedule": "*/5 * * * *"}
        )
        for name in names
    ]
    world = cronjob_harness.Harness(*bodies, start=DEFAULT_START, namespace=namespace, name="")
    world.clock.set(first + timedelta(seconds=1))
    for n, name in enumerate(names):
        request = Request(namespace, name)
        world.reconciler.reconcile(request)  # creates the run
        if n % 3:
            world.finish(job_name(name, first), "Complete" if n % 3 == 1 else "Failed")
        world.reconciler.reconcile(request)  # records it (and sees it finished)
    samples = {sample for sample, _labels in series_of(world.registry, namespace)}
    assert {
        "cronjob_operator_jobs_created_total",
        "cronjob_operator_jobs_finished_total",
        "cronjob_operator_active_jobs",
    } <= samples
    for name in names:
        world.client.delete(CRONJOB, name, namespace=namespace)
        world.reconciler.reconcile(Request(namespace, name))
    assert series_of(world.registry, namespace) == []
