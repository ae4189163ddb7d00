"""Due runs: the schedule in effect, since when, and which scheduled times have run.

* The schedule of the typed spec is ``api.cronjob_rules.schedule_of``.
* ``observe_schedule`` keeps ``status.observedSchedule``: the schedule and time zone in
  effect and since when. Runs are never created for a time at or before ``since``, so
  editing either never starts a catch-up run for a time before the edit.
* ``ran``: the scheduled times that ran (their Jobs exist, or the latest is recorded);
  ``active_since``: when the oldest active run began.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from cronjob_operator.api.batch_v1 import CronJobSettings
from cronjob_operator.controllers.cronjob.jobs import JobSets, scheduled_time
from cronjob_operator.controllers.cronjob.status import CronJobStatus, ObservedSchedule
from cronjob_operator.controllers.cronjob.view import stamp, time_at
from cronjob_operator.runtime import objects

__all__ = ["active_since", "observe_schedule", "ran", "went_missing"]


def observe_schedule(
    status: CronJobStatus, spec: CronJobSettings, *, created: datetime, now: datetime
) -> datetime:
    """Bring ``status.observedSchedule`` in line with ``spec``; return its ``since``.

    First sight (a new CronJob, or one from before this field existed): ``since`` is the
    creation time, so nothing changes for it. An edit of ``schedule``, ``schedules`` (kept
    joined by ``"; "``, as the SCHEDULES column shows them) or ``timeZone`` since the
    record: ``since`` becomes ``now``, the first reconcile that sees the edit (later than
    the edit itself, never earlier: a time between the two is not run).
    """
    if spec.schedule is None and spec.schedules is not None:
        current: ObservedSchedule = {"schedules": "; ".join(spec.schedules)}
    else:
        current = {"schedule": spec.schedule or ""}
    if spec.time_zone is not None:
        current["timeZone"] = spec.time_zone
    recorded = status.get("observedSchedule") or {}
    since = time_at(recorded, "since")
    if since is not None and {k: v for k, v in recorded.items() if k != "since"} == current:
        return since
    since = created if not recorded else now
    status["observedSchedule"] = {**current, "since": stamp(since)}
    return since.replace(microsecond=0)


def ran(cronjob_name: str, jobs: JobSets, status: Mapping[str, Any]) -> set[datetime]:
    """The scheduled times that ran: their Jobs exist (in the cache, or in
    ``status.active``, where this reconcile lists the Jobs it created), or the latest is
    recorded."""
    names = [objects.name_of(job) for job in jobs.owned()]
    names += [str(ref.get("name")) for ref in status.get("active") or ()]
    times = {moment for name in names if (moment := scheduled_time(cronjob_name, name)) is not None}
    last = time_at(status, "lastScheduleTime")
    return times if last is None else {*times, last}


def went_missing(
    cronjob_name: str, stored: Mapping[str, Any], missing: Collection[str]
) -> set[datetime]:
    """The scheduled times of the runs the stored ``status.active`` recorded whose Jobs
    someone else deleted (``missing``: their uids, confirmed gone): they ran."""
    return {
        moment
        for ref in stored.get("active") or ()
        if ref.get("uid") in missing
        and (moment := scheduled_time(cronjob_name, str(ref.get("name")))) is not None
    }


def active_since(
    cronjob_name: str, status: Mapping[str, Any], created: Mapping[str, datetime | None]
) -> datetime | None:
    """When the oldest active run began: its scheduled time (a manual run's creation,
    ``created`` by Job name); None when no run is active, the minimum time when one's
    start is unknown."""
    starts = []
    for ref in status.get("active") or ():
        name = str(ref.get("name"))
        start = scheduled_time(cronjob_name, name) or created.get(name)
        starts.append(start or datetime.min.replace(tzinfo=UTC))
    return min(starts, default=None)
