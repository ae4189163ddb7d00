"""The runtime's Prometheus metrics, named as controller-runtime and client-go name them.

A ``Metrics`` is one registry with every metric of the runtime in it. Each manager owns
one (``manager.metrics``), so two managers in one process never share a counter, and its
/metrics endpoint serves exactly that registry. The parts a manager builds (controllers,
their work queues, the REST client it counts through, the leader elector) are handed the
manager's ``Metrics``; used on their own they count into ``DEFAULT``. An application
adds its own metrics to ``metrics.registry``. Each metric is defined here once.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["DEFAULT", "Metrics"]

_DURATION_BUCKETS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0)
_RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15,
    20, 25, 30, 40, 50, 60,
)  # fmt: skip


class Metrics:
    """Every runtime metric, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=self.registry,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=self.registry,
        )
        self.reconcile_panics = Counter(
            "controller_runtime_reconcile_panics_total",
            "Total number of reconciliation panics (uncaught exceptions) per controller",
            ["controller"],
            registry=self.registry,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=_RECONCILE_BUCKETS,
            registry=self.registry,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=self.registry,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=self.registry,
        )

        self.workqueue_depth = Gauge(
            "workqueue_depth",
            "Current depth of workqueue",
            ["name", "controller"],
            registry=self.registry,
        )
        self.workqueue_adds = Counter(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            ["name", "controller"],
            registry=self.registry,
        )
        self.workqueue_retries = Counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            ["name", "controller"],
            registry=self.registry,
        )
        self.workqueue_queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            ["name", "controller"],
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.workqueue_work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            ["name", "controller"],
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.workqueue_unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed "
            "by work_duration. Large values indicate stuck threads.",
            ["name", "controller"],
            registry=self.registry,
        )
        self.workqueue_longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            ["name", "controller"],
            registry=self.registry,
        )

        self.rest_client_requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=self.registry,
        )
        self.rest_client_rate_limiter_duration = Histogram(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
            registry=self.registry,
        )
        self.metrics_auth_shed = Counter(
            "metrics_auth_requests_shed_total",
            "Requests to /metrics answered 429 at once because the token reviews in flight "
            "were at their bound (overall or for the client's address).",
            registry=self.registry,
        )
        self.informer_objects_skipped = Counter(
            "informer_objects_skipped_total",
            "Objects an informer could not decode and skipped (logged with their key), by kind.",
            ["kind"],
            registry=self.registry,
        )
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=self.registry,
        )


DEFAULT = Metrics()
"""Where parts used outside a manager count (benchmarks, standalone informers, tests)."""
