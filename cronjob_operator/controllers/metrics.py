"""Metrics of our controllers, beside the runtime's; named as the built-in controller names them.

Each is built into a registry the caller gives (the manager's, from ``setup``), so two
managers in one process keep separate counts.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram

__all__ = ["job_creation_skew"]


def job_creation_skew(registry: CollectorRegistry | None) -> Histogram:
    """How late Jobs are created after their scheduled time (unregistered when None)."""
    return Histogram(
        "cronjob_controller_job_creation_skew_duration_seconds",
        "Time between when a cronjob is scheduled to be run, and when the corresponding job "
        "is created",
        buckets=tuple(float(2**power) for power in range(10)),  # 1 .. 512 seconds
        registry=registry,
    )
