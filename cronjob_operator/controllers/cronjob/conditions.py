"""Conditions and next time: Available, Degraded, Progressing, the failure pause, nextScheduleTime.

Pure rules over the CronJob and the status the decision has built:

* ``status.nextScheduleTime`` is the next time a scheduled run is due (after stagger), an
  RFC 3339 string; absent when none will start (suspended, paused, being deleted, bad
  schedule, never fires).
* Failure pause (``spec.failurePolicy.pauseAfterConsecutiveFailures``): scheduled runs
  stop once the consecutive failure count reaches the threshold (``paused``); a spec
  edit (a new generation) resets the count (``resume_on_new_generation``).
* ``availability`` says whether runs really start on schedule, naming what keeps them
  from starting, most fundamental first.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from cronjob_operator.api.batch_v1 import CronJobSettings
from cronjob_operator.controllers.cronjob.status import CronJobStatus
from cronjob_operator.controllers.cronjob.view import CronJobView, shown, stamp
from cronjob_operator.runtime.controllerutil import find_condition

if TYPE_CHECKING:
    from cronjob_operator.controllers.cronjob.plan import Problem

__all__ = [
    "PAUSED_REASON",
    "Availability",
    "availability",
    "paused",
    "resume_on_new_generation",
    "set_next_schedule_time",
]

PAUSED_REASON: Final = "PausedAfterFailures"


def paused(spec: CronJobSettings, status: Mapping[str, Any]) -> bool:
    """Whether scheduled runs are paused: the failure count reached a valid threshold."""
    threshold = spec.pause_after_failures
    if threshold is None:
        return False
    return int(status.get("consecutiveFailures") or 0) >= threshold


def resume_on_new_generation(status: CronJobStatus, generation: int) -> bool:
    """Reset the count of a CronJob paused at an older generation; True if it did.

    A spec edit (any change bumps ``metadata.generation``) is the user's "try again": the
    count restarts, so the pause needs as many new failures as the threshold says.
    """
    available = find_condition(status.get("conditions") or [], "Available") or {}
    observed = status.get("observedGeneration")
    if available.get("reason") != PAUSED_REASON or observed is None or observed == generation:
        return False
    status["consecutiveFailures"] = 0
    return True


def set_next_schedule_time(status: CronJobStatus, moment: datetime | None) -> None:
    """Set ``status.nextScheduleTime`` to ``moment``, or remove it when None."""
    if moment is None:
        status.pop("nextScheduleTime", None)
    else:
        status["nextScheduleTime"] = stamp(moment)


def _pause_message(view: CronJobView, status: CronJobStatus) -> str:
    threshold = view.spec.pause_after_failures
    return (
        f"{status.get('consecutiveFailures')} consecutive failed runs (the last at "
        f"{shown(status.get('lastFailureTime'))}) reached spec.failurePolicy."
        f"pauseAfterConsecutiveFailures={threshold}: no scheduled run starts. To resume, fix "
        "the job template and edit the spec, or start a manual run "
        f"(kubectl cjt run {view.name}) that succeeds"
    )


class Availability(NamedTuple):
    """The Available condition: ``available`` True only when runs really start on
    schedule; else ``reason`` names what keeps them from starting."""

    available: bool
    reason: str
    message: str


def availability(view: CronJobView, status: CronJobStatus, problem: Problem | None) -> Availability:
    """The Available condition, True only when runs really start on schedule.

    The reason names what keeps runs from starting, most fundamental first: the CronJob
    is being deleted, suspended, has a problem that stops scheduled runs (which includes a
    Job template that the API server rejects: every run would fail to start), or is paused
    after consecutive failures (spec.failurePolicy)."""
    if view.deleting:
        finalizers = ", ".join(view.obj["metadata"].get("finalizers") or ()) or "none"
        return Availability(
            False,
            "Terminating",
            "metadata.deletionTimestamp is set: no new runs start; the CronJob is removed "
            f"once its finalizers are gone ({finalizers})",
        )
    if view.spec.suspend:
        return Availability(False, "Suspended", "spec.suspend is true: no new runs start")
    if problem is not None and problem.stops_schedule:
        return Availability(False, problem.reason, problem.message)
    if paused(view.spec, status):
        return Availability(False, PAUSED_REASON, _pause_message(view, status))
    return Availability(True, "Scheduling", "runs start on schedule")
