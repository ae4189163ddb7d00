"""The CronJob controller's pure logic: classify child Jobs, sync status, choose prunes, build Jobs.

Nothing here does I/O or reads the clock, so every rule of the reconcile (steps 2-4 and
9 of docs/cronjob-semantics.md) is unit-tested without a cluster; ``cronjob.py`` does the
reads, writes and events around it.

* A Job is finished when it has the condition ``Complete=True`` (succeeded) or
  ``Failed=True`` (failed); otherwise it is active.
* ``sync_status`` brings ``status.active`` and ``status.lastSuccessfulTime`` in line with
  the owned Jobs: finished Jobs leave ``active`` (``SawCompletedJob``), entries whose Job
  is confirmed gone leave it (``MissingJob``), unfinished owned Jobs missing from it are
  added, and ``lastSuccessfulTime`` only ever moves forward.
* ``to_prune`` picks the oldest finished Jobs beyond a history limit, ordered by
  ``status.startTime`` (unset last, ties by name), as the built-in controller does.
* Job names are ``<cronjob>-<scheduled Unix seconds>``: deterministic, so a retry, a
  restart or a second manager can never create the same run twice while its Job exists.
  ``scheduled_time`` reads the time back from a name (the Job cache keeps no
  annotations).
* Exactly once past the Job's life: ``advance_last_schedule_time`` moves
  ``status.lastScheduleTime`` forward to the newest scheduled time among the Jobs that
  exist, so a run is recorded before anything else is decided; ``recorded_by`` keeps
  only the Jobs the stored status has recorded (scheduled at or before its
  ``lastScheduleTime``), the only ones pruning may delete. A Job is therefore deleted
  only after the status write that records its run, and a run's time, once recorded, is
  never due again.
* ``observe_schedule`` keeps ``status.observedSchedule``: the schedule and time zone in
  effect and since when. Runs are never created for a time at or before ``since``, so
  editing either never starts a catch-up run for a time before the edit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from cronjob_operator.runtime import controllerutil, objects
from cronjob_operator.runtime.controllerutil import parse_time, rfc3339

__all__ = [
    "FINISHED_CONDITIONS",
    "SCHEDULED_AT_ANNOTATION",
    "JobSets",
    "Notice",
    "advance_last_schedule_time",
    "build_job",
    "classify",
    "job_from_template",
    "job_name",
    "job_reference",
    "observe_schedule",
    "recorded_by",
    "scheduled_time",
    "sync_status",
    "to_prune",
    "unconfirmed_active",
]

SCHEDULED_AT_ANNOTATION = "batch.tutorial.kubebuilder.io/scheduled-at"
FINISHED_CONDITIONS = ("Complete", "Failed")
"""The Job conditions that end a run (when True): succeeded, failed."""


@dataclass(frozen=True, slots=True)
class Notice:
    """An event the reconciler should record about the CronJob."""

    type: str
    reason: str
    message: str
    finished: str | None = None  # "Complete" or "Failed" when a run left status.active


@dataclass(slots=True)
class JobSets:
    """Owned Jobs by state."""

    active: list[objects.Obj] = field(default_factory=list)
    successful: list[objects.Obj] = field(default_factory=list)
    failed: list[objects.Obj] = field(default_factory=list)


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def finished_state(job: objects.Obj) -> str | None:
    """ "Complete" or "Failed" for a finished Job, None while it runs."""
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("type") in FINISHED_CONDITIONS and condition.get("status") == "True":
            return str(condition["type"])
    return None


def classify(jobs: Iterable[objects.Obj]) -> JobSets:
    """Split Jobs into active, successful and failed."""
    sets = JobSets()
    for job in jobs:
        state = finished_state(job)
        if state == "Complete":
            sets.successful.append(job)
        elif state == "Failed":
            sets.failed.append(job)
        else:
            sets.active.append(job)
    return sets


def job_reference(job: Mapping[str, Any]) -> dict[str, str]:
    """The ObjectReference ``status.active`` holds for ``job``."""
    metadata = job.get("metadata") or {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "namespace": str(metadata.get("namespace") or ""),
        "name": str(metadata.get("name") or ""),
        "uid": str(metadata.get("uid") or ""),
        "resourceVersion": str(metadata.get("resourceVersion") or ""),
    }


def unconfirmed_active(
    status: Mapping[str, Any], owned: Sequence[objects.Obj]
) -> list[dict[str, Any]]:
    """Entries of ``status.active`` whose Job the cache does not have (maybe gone, maybe lag)."""
    present = {_uid(job) for job in owned}
    return [dict(ref) for ref in status.get("active") or () if ref.get("uid") not in present]


def sync_status(
    status: dict[str, Any], jobs: JobSets, *, confirmed_missing: Iterable[str] = ()
) -> list[Notice]:
    """Update ``status`` (active, lastSuccessfulTime) in place from the owned Jobs.

    ``confirmed_missing`` holds the uids of active entries that the API server confirmed
    are gone; an entry the cache lacks but the server still has is left alone.
    """
    notices: list[Notice] = []
    finished = {_uid(job): job for job in (*jobs.successful, *jobs.failed)}
    missing = set(confirmed_missing)
    active: list[dict[str, Any]] = []
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
            active.append(dict(ref))
    listed = {ref.get("uid") for ref in active}
    active.extend(job_reference(job) for job in jobs.active if _uid(job) not in listed)
    status["active"] = active
    _advance_last_successful(status, jobs.successful)
    return notices


def _advance_last_successful(status: dict[str, Any], successful: Iterable[objects.Obj]) -> None:
    latest = parse_time(status.get("lastSuccessfulTime"))
    for job in successful:
        completed = parse_time((job.get("status") or {}).get("completionTime"))
        if completed is not None and (latest is None or completed > latest):
            latest = completed
    if latest is not None:
        status["lastSuccessfulTime"] = rfc3339(latest)


def to_prune(finished: Sequence[objects.Obj], limit: int | None) -> list[objects.Obj]:
    """The oldest finished Jobs beyond ``limit`` (None keeps everything)."""
    if limit is None or len(finished) <= limit:
        return []

    def age(job: objects.Obj) -> tuple[int, str, str]:
        start = (job.get("status") or {}).get("startTime")
        return (0 if start else 1, str(parse_time(start) or ""), objects.name_of(job))

    ordered = sorted(finished, key=age)
    return ordered[: len(ordered) - limit]


def job_name(cronjob_name: str, scheduled: datetime) -> str:
    """``<cronjob>-<scheduled time as Unix seconds>``."""
    return f"{cronjob_name}-{int(scheduled.timestamp())}"


def scheduled_time(cronjob_name: str, name: str) -> datetime | None:
    """The scheduled time a Job name of ``job_name``'s form encodes; None for any other
    name (a manual run's, say)."""
    prefix = f"{cronjob_name}-"
    seconds = name[len(prefix) :] if name.startswith(prefix) else ""
    if not (seconds.isascii() and seconds.isdigit()):
        return None
    return datetime.fromtimestamp(int(seconds), UTC)


def advance_last_schedule_time(
    status: dict[str, Any], cronjob_name: str, owned: Iterable[objects.Obj]
) -> None:
    """Move ``status.lastScheduleTime`` forward (never back) to the newest scheduled time
    among the ``owned`` Jobs: a run whose Job exists is recorded, even when the write
    that should have recorded it has not happened yet (Jobs first) or was lost."""
    latest = parse_time(status.get("lastScheduleTime"))
    for job in owned:
        moment = scheduled_time(cronjob_name, objects.name_of(job))
        if moment is not None and (latest is None or moment > latest):
            latest = moment
    if latest is not None:
        status["lastScheduleTime"] = rfc3339(latest)


def recorded_by(
    stored_status: Mapping[str, Any], cronjob_name: str, jobs: Iterable[objects.Obj]
) -> list[objects.Obj]:
    """The ``jobs`` whose scheduled run the stored status has recorded: scheduled at or
    before its ``lastScheduleTime``. Jobs of other names (manual runs) are not judged
    here."""
    recorded = parse_time(stored_status.get("lastScheduleTime"))
    kept = []
    for job in jobs:
        moment = scheduled_time(cronjob_name, objects.name_of(job))
        if moment is None or (recorded is not None and moment <= recorded):
            kept.append(job)
    return kept


def build_job(cronjob: objects.Obj, scheduled: datetime, zone: ZoneInfo) -> dict[str, Any]:
    """The Job to create for the run scheduled at ``scheduled``."""
    return job_from_template(
        cronjob,
        name=job_name(cronjob["metadata"]["name"], scheduled),
        annotations={SCHEDULED_AT_ANNOTATION: scheduled.astimezone(zone).isoformat()},
    )


def job_from_template(
    cronjob: objects.Obj, *, name: str, annotations: Mapping[str, str]
) -> dict[str, Any]:
    """A Job named ``name`` from the CronJob's template, owned by it, with ``annotations``
    added to the template's."""
    metadata = cronjob["metadata"]
    template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    merged = dict(objects.thaw(template_meta.get("annotations") or {}))
    merged.update(annotations)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": metadata["namespace"],
            "labels": objects.thaw(template_meta.get("labels") or {}),
            "annotations": merged,
            "ownerReferences": [controllerutil.controller_reference(cronjob)],
        },
        "spec": objects.thaw(template.get("spec") or {}),
    }


def observe_schedule(
    status: dict[str, Any], spec: Mapping[str, Any], *, created: datetime, now: datetime
) -> datetime:
    """Bring ``status.observedSchedule`` in line with ``spec``; return its ``since``.

    First sight (a new CronJob, or one from before this field existed): ``since`` is the
    creation time, so nothing changes for it. An edit of ``schedule``, ``schedules`` (kept
    joined by ``"; "``, as the SCHEDULES column shows them) or ``timeZone`` since the
    record: ``since`` becomes ``now``, the first reconcile that sees the edit (later than
    the edit itself, never earlier: a time between the two is not run).
    """
    many = spec.get("schedules")
    if spec.get("schedule") is None and isinstance(many, (list, tuple)):
        current: dict[str, Any] = {"schedules": "; ".join(str(entry) for entry in many)}
    else:
        current = {"schedule": str(spec.get("schedule") or "")}
    if spec.get("timeZone") is not None:
        current["timeZone"] = spec["timeZone"]
    recorded = status.get("observedSchedule") or {}
    since = parse_time(recorded.get("since"))
    if since is not None and {k: v for k, v in recorded.items() if k != "since"} == current:
        return since
    since = created if not recorded else now
    status["observedSchedule"] = {**current, "since": rfc3339(since)}
    return since.replace(microsecond=0)
