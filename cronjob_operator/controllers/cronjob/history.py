"""History and pruning: status.active, lastSuccessfulTime, failures, and which Jobs may go.

Pure rules over the owned Jobs and the status (steps 2-4 and 9 of
docs/cronjob-semantics.md, and the failure count of docs/beyond-builtin.md):

* ``sync_status`` brings ``status.active`` and ``status.lastSuccessfulTime`` in line with
  the owned Jobs: finished Jobs leave ``active`` (``SawCompletedJob``), entries whose Job
  is confirmed gone leave it (``MissingJob``), unfinished owned Jobs missing from it are
  added, and ``lastSuccessfulTime`` only ever moves forward.
* Failure awareness: ``record_failures`` counts each failed Job once, by the time its
  ``Failed`` condition became true, against a watermark (``status.lastFailureTime``)
  written in the same status update as the count; ``count_failed_run`` counts a run
  that failed without a failed Job (ended by its start timeout).
* Exactly once past the Job's life: ``advance_last_schedule_time`` moves
  ``status.lastScheduleTime`` forward to the newest scheduled time among the Jobs that
  exist, so a run is recorded before anything else is decided. ``prunable`` deletes only
  Jobs the *stored* status has recorded (``recorded_by``: scheduled at or before its
  ``lastScheduleTime``; ``counted``: a failure its watermark has counted), never the
  manual Job of a run request it has not handled, nor one a running backfill still has
  to reach. A Job is therefore deleted only after the status write that records its run.
* ``to_prune`` picks the oldest finished Jobs beyond a history limit, ordered by
  ``status.startTime`` (unset last, ties by name), as the built-in controller does. A
  limit above ``MAX_HISTORY_LIMIT`` (or none) keeps that many (the webhook refuses more;
  ``capped_limits`` says when the cap prunes what the stored limit would keep).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from cronjob_operator.api.batch_v1 import CronJobSettings
from cronjob_operator.api.cronjob_rules import HISTORY_LIMITS, MAX_HISTORY_LIMIT
from cronjob_operator.controllers.cronjob import backfill
from cronjob_operator.controllers.cronjob.jobs import (
    JobSets,
    finished_state,
    job_reference,
    job_uid,
    scheduled_time,
)
from cronjob_operator.controllers.cronjob.status import CronJobStatus, JobReference
from cronjob_operator.controllers.cronjob.view import JobTimes, stamp, time_at
from cronjob_operator.runtime import objects

__all__ = [
    "Notice",
    "advance_last_schedule_time",
    "capped_limits",
    "count_failed_run",
    "counted",
    "prunable",
    "record_failures",
    "recorded_by",
    "records",
    "sync_status",
    "to_prune",
    "unconfirmed_active",
]


@dataclass(frozen=True, slots=True)
class Notice:
    """An event the reconciler should record about the CronJob."""

    type: str
    reason: str
    message: str
    finished: str | None = None  # "Complete" or "Failed" when a run left status.active


def unconfirmed_active(
    status: Mapping[str, Any], owned: Sequence[objects.Obj]
) -> list[dict[str, Any]]:
    """Entries of ``status.active`` whose Job the cache does not have (maybe gone, maybe lag)."""
    present = {job_uid(job) for job in owned}
    return [dict(ref) for ref in status.get("active") or () if ref.get("uid") not in present]


def sync_status(
    status: CronJobStatus,
    jobs: JobSets,
    times: Mapping[str, JobTimes],
    *,
    confirmed_missing: Iterable[str] = (),
) -> list[Notice]:
    """Update ``status`` (active, lastSuccessfulTime) in place from the owned Jobs (their
    ``times`` by uid).

    ``confirmed_missing`` holds the uids of active entries that the API server confirmed
    are gone; an entry the cache lacks but the server still has is left alone.
    """
    notices: list[Notice] = []
    finished = {job_uid(job): job for job in (*jobs.successful, *jobs.failed)}
    missing = set(confirmed_missing)
    active: list[JobReference] = []
    seen: set[Any] = set()
    for ref in status.get("active") or ():
        uid = ref.get("uid")
        if uid in seen:
            continue  # a repeated entry (stored by some other writer): one per Job
        seen.add(uid)
        if uid in finished:
            state = finished_state(finished[uid])
            notices.append(
                Notice(
                    "Normal",
                    "SawCompletedJob",
                    f"Saw completed job: {ref.get('name')}, status: {state}",
                    finished=state,
                )
            )
        elif uid in missing:
            notices.append(
                Notice("Normal", "MissingJob", f"Active job went missing: {ref.get('name')}")
            )
        else:
            active.append(ref.copy())
    listed = {ref.get("uid") for ref in active}
    active.extend(job_reference(job) for job in jobs.active if job_uid(job) not in listed)
    status["active"] = active
    _advance_last_successful(status, jobs.successful, times)
    return notices


_Moment = Literal["lastScheduleTime", "lastSuccessfulTime", "lastFailureTime"]
"""A time of the status that only moves forward."""


def _advance(status: CronJobStatus, field: _Moment, moments: Iterable[datetime | None]) -> None:
    """Move ``status[field]`` forward (never back) to the newest of ``moments``."""
    latest = time_at(status, field)
    for moment in moments:
        if moment is not None and (latest is None or moment > latest):
            latest = moment
    if latest is not None:
        status[field] = stamp(latest)


def _advance_last_successful(
    status: CronJobStatus, successful: Iterable[objects.Obj], times: Mapping[str, JobTimes]
) -> None:
    _advance(status, "lastSuccessfulTime", (times[job_uid(job)].completed for job in successful))


def advance_last_schedule_time(
    status: CronJobStatus, cronjob_name: str, owned: Iterable[objects.Obj]
) -> None:
    """Move ``status.lastScheduleTime`` forward (never back) to the newest scheduled time
    among the ``owned`` Jobs: a run whose Job exists is recorded, even when the write
    that should have recorded it has not happened yet (Jobs first) or was lost."""
    moments = (scheduled_time(cronjob_name, objects.name_of(job)) for job in owned)
    _advance(status, "lastScheduleTime", moments)


def recorded_by(
    stored_status: Mapping[str, Any], cronjob_name: str, jobs: Iterable[objects.Obj]
) -> list[objects.Obj]:
    """The ``jobs`` whose scheduled run the stored status has recorded (``_records_time``:
    ``lastScheduleTime`` and the run limit's count). Jobs of other names (manual runs) are
    not judged here."""
    kept = []
    for job in jobs:
        moment = scheduled_time(cronjob_name, objects.name_of(job))
        if moment is None or _records_time(stored_status, moment):
            kept.append(job)
    return kept


def records(
    status: Mapping[str, Any],
    cronjob_name: str,
    job_name: str,
    *,
    unhandled_manual_job: str | None,
) -> bool:
    """Whether ``status`` records the run of Job ``job_name``, so that deleting the Job
    loses nothing: a scheduled or backfill Job whose time it records (``_records_time``)
    and that a running backfill has no longer to reach (``backfill.protected``), or a
    manual Job other than the one of the request ``status`` has not handled."""
    moment = scheduled_time(cronjob_name, job_name)
    if moment is None:
        return job_name != unhandled_manual_job
    return _records_time(status, moment) and not backfill.protected(status, moment)


def _records_time(status: Mapping[str, Any], moment: datetime) -> bool:
    """Whether ``status`` records the scheduled time ``moment``: at or before
    ``lastScheduleTime`` and, while ``maxScheduledRuns`` counts (``scheduledRuns``), at or
    before the newest time it counted, so deleting its Job loses neither."""
    last = time_at(status, "lastScheduleTime")
    if last is None or moment > last:
        return False
    if "scheduledRuns" not in status:
        return True
    counted = time_at(status["scheduledRuns"], "countedThrough")
    return counted is not None and moment <= counted


def to_prune(
    finished: Sequence[objects.Obj], limit: int | None, times: Mapping[str, JobTimes]
) -> list[objects.Obj]:
    """The oldest finished Jobs beyond ``limit`` (at most ``MAX_HISTORY_LIMIT``, also when
    None), by their start in ``times``."""
    limit = _capped(limit)
    if len(finished) <= limit:
        return []

    def age(job: objects.Obj) -> tuple[int, str, str]:
        start = times[job_uid(job)].started
        return (0 if start else 1, str(start or ""), objects.name_of(job))

    ordered = sorted(finished, key=age)
    return ordered[: len(ordered) - limit]


def _capped(limit: int | None) -> int:
    return MAX_HISTORY_LIMIT if limit is None else min(limit, MAX_HISTORY_LIMIT)


def capped_limits(spec: CronJobSettings, jobs: JobSets) -> list[str]:
    """A message per history limit whose cap prunes Jobs the stored limit would keep."""
    limits = (spec.successful_jobs_history_limit, spec.failed_jobs_history_limit)
    finished = zip(HISTORY_LIMITS, limits, (jobs.successful, jobs.failed), strict=True)
    return [
        f"spec.{field}: {limit!r}: at most {MAX_HISTORY_LIMIT} finished Jobs are "
        f"kept, older ones are deleted; set a limit of at most {MAX_HISTORY_LIMIT}"
        for field, limit, kept in finished
        if len(kept) > MAX_HISTORY_LIMIT and _capped(limit) != limit
    ]


def _failure_time(job: objects.Obj, times: Mapping[str, JobTimes]) -> datetime | None:
    return times[job_uid(job)].failed


def record_failures(
    status: CronJobStatus, failed: Iterable[objects.Obj], times: Mapping[str, JobTimes]
) -> list[str]:
    """Count the failed Jobs not counted yet (when each failed: ``times`` by uid);
    returns their names, oldest first.

    A failure counts when it is newer than ``status.lastFailureTime`` (the watermark); a
    success newer than the watermark (``status.lastSuccessfulTime``, already advanced)
    resets the count, and only failures after it count. Two failures in the same second
    seen by different reconciles count once (the watermark has second precision).
    """
    watermark = time_at(status, "lastFailureTime")
    last_success = time_at(status, "lastSuccessfulTime")
    fresh = sorted(
        (when, objects.name_of(job))
        for job in failed
        if (when := _failure_time(job, times)) is not None
        and (watermark is None or when > watermark)
    )
    count = int(status.get("consecutiveFailures") or 0)
    if last_success is not None and (watermark is None or last_success > watermark):
        count = 0
    count += sum(1 for when, _ in fresh if last_success is None or when > last_success)
    status["consecutiveFailures"] = count
    if fresh:
        status["lastFailureTime"] = stamp(fresh[-1][0])
    return [name for _, name in fresh]


def count_failed_run(status: CronJobStatus, when: datetime) -> None:
    """Count one failed run that leaves no failed Job to count (a run ended by its start
    timeout, its Job deleted), at ``when``. The watermark moves to ``when``, and never
    behind ``lastSuccessfulTime``: ``record_failures`` would reset the count otherwise."""
    status["consecutiveFailures"] = int(status.get("consecutiveFailures") or 0) + 1
    _advance(status, "lastFailureTime", (when, time_at(status, "lastSuccessfulTime")))


def counted(
    failed: Iterable[objects.Obj], stored_status: Mapping[str, Any], times: Mapping[str, JobTimes]
) -> list[objects.Obj]:
    """The failed Jobs the stored status has counted already: only these may be pruned."""
    watermark = time_at(stored_status, "lastFailureTime")
    if watermark is None:
        return []
    return [
        job
        for job in failed
        if (when := _failure_time(job, times)) is not None and when <= watermark
    ]


def prunable(
    spec: CronJobSettings,
    cronjob_name: str,
    jobs: JobSets,
    stored: Mapping[str, Any],
    times: Mapping[str, JobTimes],
    *,
    unrecorded: str | None,
) -> list[objects.Obj]:
    """The finished Jobs to delete now: beyond their history limit, and only those the
    stored status has recorded (a failed one only once it is counted); never
    ``unrecorded`` (the manual Job of an unhandled run request) nor a Job a running
    backfill still has to reach."""

    def recorded(finished: list[objects.Obj]) -> list[objects.Obj]:
        kept = recorded_by(stored, cronjob_name, finished)
        return [
            job
            for job in kept
            if objects.name_of(job) != unrecorded and not _backfill_keeps(stored, cronjob_name, job)
        ]

    return [
        *to_prune(recorded(jobs.successful), spec.successful_jobs_history_limit, times),
        *to_prune(
            counted(recorded(jobs.failed), stored, times), spec.failed_jobs_history_limit, times
        ),
    ]


def _backfill_keeps(stored: Mapping[str, Any], cronjob_name: str, job: objects.Obj) -> bool:
    moment = scheduled_time(cronjob_name, objects.name_of(job))
    return moment is not None and backfill.protected(stored, moment)
