"""The per-CronJob run metrics: which notices count a finished run, and the gauge's life.

The counters move in the reconciler when ``sync_status`` reports a run that left
``status.active``; here the pure part (the notice says how the run ended, once) and the
gauge's removal for a deleted CronJob. tests/e2e/test_observability.py reads the same
series through a real Prometheus.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from cronjob_operator.controllers import cronjob_state as state
from cronjob_operator.controllers.metrics import CronJobMetrics
from tests.unit.test_cronjob_state import job


def test_a_run_leaving_active_says_how_it_finished_once() -> None:
    failed, complete = job("f", finished="Failed"), job("c", finished="Complete")
    status: dict[str, Any] = {
        "active": [state.job_reference(failed), state.job_reference(complete)]
    }
    sets = state.classify([failed, complete])
    assert [n.finished for n in state.sync_status(status, sets)] == ["Failed", "Complete"]
    assert [n.finished for n in state.sync_status(status, sets)] == []  # counted once


def test_missing_runs_are_not_counted_as_finished() -> None:
    status: dict[str, Any] = {"active": [{"name": "gone", "uid": "uid-gone"}]}
    notices = state.sync_status(status, state.JobSets(), confirmed_missing=["uid-gone"])
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
