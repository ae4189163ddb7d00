"""Metrics of our controllers, beside the runtime's.

The skew histogram is named as the built-in CronJob controller names it, so dashboards
made for the built-in read ours. The per-CronJob series (runs created, runs finished by
outcome, active runs) are what the CronJob dashboard and the failing-CronJob alert in
config/grafana and config/prometheus read; the built-in has no equivalent, so they carry
our prefix. Their labels are the CronJob's namespace and name, as kube-state-metrics
labels its CronJob series.
"""

from __future__ import annotations

import contextlib

from prometheus_client import Counter, Gauge, Histogram

from cronjob_operator.runtime.metrics import REGISTRY

__all__ = [
    "ACTIVE_JOBS",
    "JOBS_CREATED",
    "JOBS_FINISHED",
    "JOB_CREATION_SKEW",
    "forget_cronjob",
]

JOB_CREATION_SKEW = Histogram(
    "cronjob_controller_job_creation_skew_duration_seconds",
    "Time between when a cronjob is scheduled to be run, and when the corresponding job is created",
    buckets=tuple(float(2**power) for power in range(10)),  # 1 .. 512 seconds
    registry=REGISTRY,
)
JOBS_CREATED = Counter(
    "cronjob_operator_jobs_created_total",
    "Jobs the CronJob controller created, per CronJob",
    ["namespace", "cronjob"],
    registry=REGISTRY,
)
JOBS_FINISHED = Counter(
    "cronjob_operator_jobs_finished_total",
    "Jobs of a CronJob seen finished (leaving status.active), per CronJob and "
    "condition (Complete or Failed)",
    ["namespace", "cronjob", "condition"],
    registry=REGISTRY,
)
ACTIVE_JOBS = Gauge(
    "cronjob_operator_active_jobs",
    "Jobs a CronJob's status lists as active, as of its last reconcile",
    ["namespace", "cronjob"],
    registry=REGISTRY,
)


def forget_cronjob(namespace: str, name: str) -> None:
    """Drop the gauge of a deleted CronJob (its counters stay: they only ever grow)."""
    with contextlib.suppress(KeyError):
        ACTIVE_JOBS.remove(namespace, name)
