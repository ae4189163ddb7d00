"""The CronJob controller, as observe, decide, act.

``reconciler`` observes (the CronJob and its Jobs, read into ``view``), asks ``decide``
for the Plan (``plan``) and applies it. The rules, by concept: ``history`` (status.active,
failures, pruning), ``requests`` (run now) and ``backfill``, ``runs``, ``policies``,
``concurrency`` and ``stagger`` (due runs), ``conditions`` (conditions and next time),
``jobs`` (names and the Jobs to create). docs/architecture.md has the map.
"""

from cronjob_operator.controllers.cronjob.jobs import JOB_OWNER_INDEX, job_owner_index, slim_job
from cronjob_operator.controllers.cronjob.reconciler import CronJobReconciler, observe_skew, setup

__all__ = [
    "JOB_OWNER_INDEX",
    "CronJobReconciler",
    "job_owner_index",
    "observe_skew",
    "setup",
    "slim_job",
]
