"""The batch/v1 API's constants that need no model: the CronJob's and the
ConcurrencyGroup's ``Kind``, the CronJob's annotations, and the bounds its schema and its
rules share.

They are ``batch_v1``'s (which re-exports them and builds its schema with them), kept
apart from its pydantic models so that the rules (``cronjob_rules``), the admission
webhook and ``kubectl cjt`` read them without importing pydantic: ``kubectl cjt next``
needs a schedule and these names, not the models.
"""

from __future__ import annotations

from cronjob_operator.runtime.kinds import Kind

__all__ = [
    "BACKFILL_ANNOTATION",
    "CONCURRENCY_GROUP",
    "CRONJOB",
    "MAX_BACKFILL",
    "MAX_EXCLUDED_DATES",
    "MAX_RUN_START_TIMEOUT_SECONDS",
    "MAX_RUN_TOKEN_LENGTH",
    "MAX_SCHEDULES",
    "MAX_SCHEDULE_LENGTH",
    "MAX_STAGGER_SECONDS",
    "MIN_RUN_START_TIMEOUT_SECONDS",
    "RUN_ANNOTATION",
]

CRONJOB = Kind("batch.tutorial.kubebuilder.io", "v1", "CronJob", "cronjobs")
CONCURRENCY_GROUP = Kind(
    "batch.tutorial.kubebuilder.io", "v1", "ConcurrencyGroup", "concurrencygroups"
)

RUN_ANNOTATION = "batch.tutorial.kubebuilder.io/run-requested-at"
"""On a CronJob: a request token (any string, conventionally the time of the request)
asking for one manual run, or a JSON request with a token and that run's overrides
(``api.run_overrides``); ``status.lastHandledRunRequest`` records the last token handled."""
MAX_RUN_TOKEN_LENGTH = 256
"""The longest run request token accepted."""

BACKFILL_ANNOTATION = "batch.tutorial.kubebuilder.io/backfill"
"""On a CronJob: a backfill request, JSON ``{"token": ..., "from": T1, "to": T2}`` (RFC 3339
times), asking to run every scheduled time in [T1, T2) once; ``status.backfill`` shows
its progress. A new token starts a new backfill; removing the annotation cancels one."""
MAX_BACKFILL = 1000
"""The most scheduled times one backfill request may cover."""

MAX_STAGGER_SECONDS = 3600
"""The largest staggerSeconds the schema accepts (an hour)."""

MAX_SCHEDULES = 10
"""The most schedules spec.schedules, and spec.exclusions.schedules, list."""
MAX_SCHEDULE_LENGTH = 1024
"""Longer schedules are refused before parsing (a built-in difference: robfig accepts a
list of any length, but parsing and quoting megabytes per review costs hundreds of MiB)."""
MAX_EXCLUDED_DATES = 366
"""The most dates spec.exclusions.dates lists (a year of days)."""

MIN_RUN_START_TIMEOUT_SECONDS = 10
"""The smallest runStartTimeoutSeconds the schema accepts: creating, scheduling and
starting a healthy Pod takes the Job controller, the scheduler and the kubelet a few
seconds, and a shorter timeout would end runs that were about to start."""
MAX_RUN_START_TIMEOUT_SECONDS = 604800
"""The largest runStartTimeoutSeconds the schema accepts (7 days): a run that may wait
longer than a week to start is better left to activeDeadlineSeconds."""
