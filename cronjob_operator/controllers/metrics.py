"""Metrics of our controllers, beside the runtime's.

The skew histogram is named as the built-in CronJob controller names it, so dashboards
made for the built-in read ours. The per-CronJob series (runs created, runs finished by
outcome, runs skipped by reason, active runs) are what the CronJob dashboard and the
alerts in config/grafana and config/prometheus read; the built-in has no equivalent, so they carry
our prefix. Their labels are the CronJob's namespace and name, as kube-state-metrics
labels its CronJob series.

Each is built into a registry the caller gives (the manager's, from ``setup``), so two
managers in one process keep separate counts. Every series of a CronJob goes when the
reconciler finds it deleted (``forget_cronjob``): the registry holds series only for
CronJobs that exist, however many come and go. A counter that disappears and comes back
(a CronJob re-created with the same name) starts at 0, which Prometheus's ``rate`` and
``increase`` read as a counter reset.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from cronjob_operator.api.batch_v1 import SkipReason
from cronjob_operator.controllers.cronjob.jobs import FINISHED_CONDITIONS

__all__ = [
    "GROUP_IN_USE",
    "GROUP_LIMIT",
    "GROUP_SLOT_STATES",
    "CronJobMetrics",
    "job_creation_skew",
]


def job_creation_skew(registry: CollectorRegistry | None) -> Histogram:
    """How late Jobs are created after their scheduled time (unregistered when None)."""
    return Histogram(
        "cronjob_controller_job_creation_skew_duration_seconds",
        "Time between when a cronjob is scheduled to be run, and when the corresponding job "
        "is created",
        buckets=tuple(float(2**power) for power in range(10)),  # 1 .. 512 seconds
        registry=registry,
    )


_CRONJOB_LABELS = ("namespace", "cronjob")
GROUP_IN_USE = "inUse"
GROUP_LIMIT = "limit"
GROUP_SLOT_STATES = (GROUP_IN_USE, GROUP_LIMIT)
"""The ``state`` label values of cronjob_operator_concurrency_group_slots."""


class CronJobMetrics:
    """The CronJob controller's metrics, in the given registry (unregistered when None)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self._shown_groups: set[tuple[str, str]] = set()
        self.job_creation_skew = job_creation_skew(registry)
        self.jobs_created = Counter(
            "cronjob_operator_jobs_created_total",
            "Jobs the CronJob controller created, per CronJob",
            _CRONJOB_LABELS,
            registry=registry,
        )
        self.jobs_finished = Counter(
            "cronjob_operator_jobs_finished_total",
            "Jobs of a CronJob seen finished (leaving status.active), per CronJob and "
            "condition (Complete or Failed)",
            (*_CRONJOB_LABELS, "condition"),  # one of FINISHED_CONDITIONS
            registry=registry,
        )
        self.runs_skipped = Counter(
            "cronjob_operator_runs_skipped_total",
            "Scheduled times of a CronJob that did not run, per CronJob and reason "
            "(status.skippedRuns has the same counts)",
            (*_CRONJOB_LABELS, "reason"),  # one of SkipReason
            registry=registry,
        )
        self.active_jobs = Gauge(
            "cronjob_operator_active_jobs",
            "Jobs a CronJob's status lists as active, as of its last reconcile",
            _CRONJOB_LABELS,
            registry=registry,
        )

        self.group_slots = Gauge(
            "cronjob_operator_concurrency_group_slots",
            "A ConcurrencyGroup's slots as this replica last read, wrote or saw them: state "
            "inUse (held by Jobs) or limit (spec.limit)",
            ("namespace", "group", "state"),  # state: one of GROUP_SLOT_STATES
            registry=registry,
        )

    def show_group(self, namespace: str, group: str, in_use: int, limit: int) -> None:
        """Set the slot series of the ConcurrencyGroup ``namespace/group``, one this
        replica's CronJobs use (it claimed or released a slot of it)."""
        self._shown_groups.add((namespace, group))
        self.group_slots.labels(namespace, group, GROUP_IN_USE).set(in_use)
        self.group_slots.labels(namespace, group, GROUP_LIMIT).set(limit)

    def refresh_group(self, namespace: str, group: str, in_use: int, limit: int) -> None:
        """As ``show_group``, for a group's change seen by the watch (the ConcurrencyGroup
        controller freed a slot, another replica claimed one), but only for a group this
        replica already shows: each replica keeps the series of the groups it uses."""
        if (namespace, group) in self._shown_groups:
            self.show_group(namespace, group, in_use, limit)

    def forget_group(self, namespace: str, group: str) -> None:
        """Remove the series of the ConcurrencyGroup ``namespace/group`` (found deleted)."""
        self._shown_groups.discard((namespace, group))
        for state in GROUP_SLOT_STATES:
            with contextlib.suppress(KeyError):  # never set
                self.group_slots.remove(namespace, group, state)

    def forget_cronjob(self, namespace: str, name: str) -> None:
        """Remove every series of the deleted CronJob ``namespace/name`` (a few dict
        deletions, whatever the number of CronJobs); one without series is fine."""
        series = [
            (self.jobs_created, (namespace, name)),
            (self.active_jobs, (namespace, name)),
            *((self.jobs_finished, (namespace, name, end)) for end in FINISHED_CONDITIONS),
            *((self.runs_skipped, (namespace, name, reason)) for reason in SkipReason),
        ]
        for metric, labels in series:
            with contextlib.suppress(KeyError):  # never set
                metric.remove(*labels)
