"""The CronJob's Jobs: their names, their state, the Jobs to create, the cache's view of them.

One place for what a Job of a CronJob is, read by the view (``view.py``) and built by
the decision (``decide.py``):

* A Job is finished when it has the condition ``Complete=True`` (succeeded) or
  ``Failed=True`` (failed); otherwise it is active.
* Scheduled Job names are ``<cronjob>-<scheduled Unix seconds>``: deterministic, so a
  retry, a restart or a second manager can never create the same run twice while its Job
  exists. ``scheduled_time`` reads the time back from a name (the Job cache keeps no
  annotations). The suffix is 0 to ``JOB_TIME_DIGITS`` digits, so only times in
  [``FIRST_JOB_TIME``, ``END_OF_JOB_TIMES``) can be named (1970 to 2286): a negative
  one would not read back, a longer one would not fit 63 characters.
* A scheduled Job (``build_job``) carries its scheduled time twice: our
  ``SCHEDULED_AT_ANNOTATION`` and the built-in's ``SCHEDULED_TIMESTAMP_ANNOTATION``
  (``builtin_timestamp``, also on its pod template for the Downward API).
* A run request's Job is ``<cronjob>-m<9 base32 characters of sha256(token)>``
  (``manual_job_name``): one Job per token, and never a scheduled name (whose suffix is
  all digits). Its overrides (``api.run_overrides``) are applied to the template's
  spec and recorded on it.
* The informer cache keeps a slim Job (``slim_job``) and indexes it by its controlling
  CronJob's name (``job_owner_index``, the ``.metadata.controller`` index).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.api.cronjob_rules import (
    INSTANTIATE_ANNOTATION,
    manual_job_name,
)
from cronjob_operator.api.run_overrides import (
    OVERRIDES_ANNOTATION,
    RunRequest,
    overridden_spec,
    overrides_json,
)
from cronjob_operator.controllers.cronjob.status import JobReference
from cronjob_operator.runtime import controllerutil, objects
from cronjob_operator.runtime.cache import strip_managed_fields

__all__ = [
    "FINISHED_CONDITIONS",
    "JOB_OWNER_INDEX",
    "RUN_TOKEN_ANNOTATION",
    "SCHEDULED_AT_ANNOTATION",
    "SCHEDULED_TIMESTAMP_ANNOTATION",
    "JobSets",
    "build_job",
    "build_manual_job",
    "builtin_timestamp",
    "classify",
    "finished_state",
    "job_from_template",
    "job_name",
    "job_owner_index",
    "job_reference",
    "job_uid",
    "scheduled_time",
    "slim_job",
]

SCHEDULED_AT_ANNOTATION = "batch.tutorial.kubebuilder.io/scheduled-at"

SCHEDULED_TIMESTAMP_ANNOTATION: Final = "batch.kubernetes.io/cronjob-scheduled-timestamp"
"""The built-in CronJob's record of a scheduled run's time (``builtin_timestamp``), on the
Job as the built-in puts it, and on the Job's pod template too, so that a container can
read it through the Downward API (which sees only its Pod's own annotations). A run
request's Job has none, as ``kubectl create job --from=cronjob/x`` sets none."""

FINISHED_CONDITIONS = ("Complete", "Failed")
"""The Job conditions that end a run (when True): succeeded, failed."""

RUN_TOKEN_ANNOTATION: Final = "batch.tutorial.kubebuilder.io/run-request"
"""On a manual Job: the token that asked for it."""

JOB_OWNER_INDEX = ".metadata.controller"


@dataclass(slots=True)
class JobSets:
    """Owned Jobs by state."""

    active: list[objects.Obj] = field(default_factory=list)
    successful: list[objects.Obj] = field(default_factory=list)
    failed: list[objects.Obj] = field(default_factory=list)

    def owned(self) -> list[objects.Obj]:
        """Every owned Job: the active ones, then the successful, then the failed."""
        return [*self.active, *self.successful, *self.failed]


def job_uid(obj: Mapping[str, Any]) -> str:
    """The object's uid (empty when it has none)."""
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


def job_reference(job: Mapping[str, Any]) -> JobReference:
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


def build_job(cronjob: objects.Obj, scheduled: datetime, zone: ZoneInfo) -> dict[str, Any]:
    """The Job to create for the run scheduled at ``scheduled``: it and its pod template
    carry the scheduled time in ``zone``."""
    wall = scheduled.astimezone(zone)
    stamp = builtin_timestamp(wall)
    job = job_from_template(
        cronjob,
        name=job_name(cronjob["metadata"]["name"], scheduled),
        annotations={
            SCHEDULED_AT_ANNOTATION: wall.isoformat(),
            SCHEDULED_TIMESTAMP_ANNOTATION: stamp,
        },
    )
    pod_template = job["spec"].setdefault("template", {})
    pod_metadata = pod_template["metadata"] = dict(pod_template.get("metadata") or {})
    pod_metadata["annotations"] = {
        **(pod_metadata.get("annotations") or {}),
        SCHEDULED_TIMESTAMP_ANNOTATION: stamp,
    }
    return job


def builtin_timestamp(wall: datetime) -> str:
    """``wall`` as the built-in writes ``SCHEDULED_TIMESTAMP_ANNOTATION``, Go's
    ``time.RFC3339`` layout: whole seconds, ``Z`` for a zero offset (whatever the zone),
    else the offset's ``±hh:mm`` (seconds of an offset dropped, as Go does)."""
    offset = int((wall.utcoffset() or timedelta()).total_seconds())
    if offset == 0:
        suffix = "Z"
    else:
        minutes = abs(offset) // 60
        suffix = f"{'-' if offset < 0 else '+'}{minutes // 60:02d}:{minutes % 60:02d}"
    return wall.strftime("%Y-%m-%dT%H:%M:%S") + suffix


def build_manual_job(cronjob: objects.Obj, request: RunRequest) -> dict[str, Any]:
    """The Job ``request`` creates: the template with the request's overrides applied
    and recorded (``OVERRIDES_ANNOTATION``)."""
    annotations = {INSTANTIATE_ANNOTATION: "manual", RUN_TOKEN_ANNOTATION: request.token}
    if request.overrides is not None:
        annotations[OVERRIDES_ANNOTATION] = overrides_json(request.overrides)
    job = job_from_template(
        cronjob,
        name=manual_job_name(cronjob["metadata"]["name"], request.token),
        annotations=annotations,
    )
    if request.overrides is not None:
        job["spec"] = overridden_spec(job["spec"], request.overrides)
    return job


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


def job_owner_index(job: objects.Obj) -> list[str]:
    """The ``.metadata.controller`` index: the owning CronJob's name, if a CronJob owns it."""
    ref = objects.controller_ref(job)
    if ref is None or ref.get("apiVersion") != CRONJOB.api_version or ref.get("kind") != "CronJob":
        return []
    return [str(ref.get("name"))]


def slim_job(job: dict[str, Any]) -> dict[str, Any]:
    """Cache transform: keep only the parts of a Job this controller reads.

    A Job's spec (its whole pod template) is most of its size and is never read here;
    nor are its labels and annotations (Jobs are found by the owner index).
    """
    job = strip_managed_fields(job)
    job.pop("spec", None)
    metadata = job.get("metadata") or {}
    metadata.pop("labels", None)
    metadata.pop("annotations", None)
    status = job.get("status") or {}
    job["status"] = {
        key: status[key]
        for key in (
            "conditions",
            "startTime",
            "completionTime",
            "active",
            "ready",
            "succeeded",
            "failed",
        )
        if key in status
    }
    return job
