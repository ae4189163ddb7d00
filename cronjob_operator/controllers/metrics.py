"""Metrics of our controllers, beside the runtime's; named as the built-in controller names them."""

from __future__ import annotations

from prometheus_client import Histogram

from cronjob_operator.runtime.metrics import REGISTRY

__all__ = ["JOB_CREATION_SKEW"]

JOB_CREATION_SKEW = Histogram(
    "cronjob_controller_job_creation_skew_duration_seconds",
    "Time between when a cronjob is scheduled to be run, and when the corresponding job is created",
    buckets=tuple(float(2**power) for power in range(10)),  # 1 .. 512 seconds
    registry=REGISTRY,
)
