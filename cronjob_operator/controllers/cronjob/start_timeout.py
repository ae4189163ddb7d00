"""spec.runStartTimeoutSeconds: a run whose Pods never start is ended and counted failed.

Why a rule of its own: under Forbid or BufferOne, a Job whose Pods never start
(unschedulable, an image that cannot be pulled) stays active for ever, so no later run
starts (kubernetes #58748); ``activeDeadlineSeconds`` is no answer, as it also ends runs
that are working. The rule, off unless the field is set:

* A run is timed from its Job's ``status.startTime`` (set by the Job controller when it
  starts creating Pods; unset while the Job is suspended, e.g. queued by Kueue).
* It has started once the Job status counts a Pod ready, succeeded or failed
  (``status.ready``, ``succeeded``, ``failed``): read from the cache, no Pod is read.
* A Job past its timeout without such a count is ``overdue``: the reconciler reads that
  Job live and reads a few of its Pods (by its controller-uid label, only then: no Pod
  informer) into a ``view.StartReport``. A Pod Running or finished means the run
  started (a Pod whose readiness probe does not pass yet) and it is left alone (the
  reconciler remembers its uid, so its Pods are not read again);
  otherwise the report holds the cause the Pods give (a waiting container's reason, the
  PodScheduled condition). Two LISTs of one small page each, never the whole collection
  (issue 47: a tenant's Job of many Pods, each with a 250 KiB annotation, made a 49 MiB
  list that needed +98 MiB to decode, and the manager was OOM-killed): one Pod past
  Pending (``STARTED_PODS``, metadata only, ``limit=1``) answers whether the run started,
  whatever the number of Pods; else the first ``PODS_READ`` Pods by name give the cause,
  as the cause of one Pod is enough.
* ``end_overdue`` ends each reported run: a Delete step (background propagation, as
  Replace) whose failure raises; the run leaves ``status.active`` and counts as a failed
  run (``history.count_failed_run``), reported by a ``RunStartTimeout`` warning with the
  status write that records it.
* ``requeue_after``: when the next timeout falls (a timer, never a hot requeue).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Final

from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import CronJobSettings
from cronjob_operator.controllers.cronjob import history
from cronjob_operator.controllers.cronjob.plan import Delete, Rejected, Steps
from cronjob_operator.controllers.cronjob.status import CronJobStatus
from cronjob_operator.controllers.cronjob.view import CronJobView, JobTimes, StartReport
from cronjob_operator.runtime import objects

__all__ = [
    "CONTROLLER_UID_LABEL",
    "PODS_READ",
    "REASON",
    "STARTED_PODS",
    "end_overdue",
    "overdue",
    "report_of",
    "requeue_after",
    "started_by_status",
    "timeout_of",
]

REASON: Final = "RunStartTimeout"
"""The reason of the Warning event that reports an ended run."""

CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
"""The label the Job controller puts on a Job's Pods: its uid (Kubernetes 1.27 and later)."""

_STARTED_COUNTS: Final = ("ready", "succeeded", "failed")
"""The Job status counts that mean a Pod started: ready, or finished."""

_STARTED_PHASES: Final = frozenset({"Running", "Succeeded", "Failed"})

STARTED_PODS: Final = "status.phase!=Pending,status.phase!=Unknown"
"""The field selector of a Job's Pods that started: the phases of ``_STARTED_PHASES``,
said as every phase but the other two (the server filters, and fills a page with
matches, so one started Pod among thousands costs one Pod's metadata)."""

PODS_READ: Final = 3
"""How many of an unstarted run's Pods are read for a cause: the first that gives one
is reported, and one just created may give none yet; a few bound the bytes (a Pod may
be as large as the object size limit) whatever the Job's parallelism."""

_MAX_CAUSE_LENGTH: Final = 600
"""A cause is cut here, so the event (at most 1024 characters) keeps the rest of its
message; a scheduler's message lists every node group and can be long."""


def timeout_of(spec: CronJobSettings) -> timedelta | None:
    """``spec.runStartTimeoutSeconds`` (None when unset, or out of the range the schema
    and the webhook admit, which only a value stored past both can be: off)."""
    seconds = spec.run_start_timeout_seconds
    if seconds is None or rules.start_timeout_problem(seconds) is not None:
        return None
    return timedelta(seconds=seconds)


def started_by_status(job: objects.Obj) -> bool:
    """Whether the Job's status counts a Pod that started (ready, succeeded or failed)."""
    status = job.get("status") or {}
    return any(int(status.get(count) or 0) > 0 for count in _STARTED_COUNTS)


def _deadline(job: objects.Obj, timeout: timedelta) -> datetime | None:
    """When the run of an unstarted ``job`` times out (None: not timed yet, or started)."""
    started = JobTimes(job).started
    if started is None or started_by_status(job):
        return None
    return started + timeout


def overdue(
    spec: CronJobSettings, active: Iterable[objects.Obj], now: datetime
) -> list[objects.Obj]:
    """The active Jobs whose run is past its start timeout with no Pod started, by their
    (cached) status: the ones whose Pods the reconciler reads."""
    timeout = timeout_of(spec)
    if timeout is None:
        return []
    return [job for job in active if (end := _deadline(job, timeout)) is not None and end <= now]


def requeue_after(
    spec: CronJobSettings, active: Iterable[objects.Obj], now: datetime
) -> timedelta | None:
    """How long until the next unstarted run's timeout (None: none to wait for)."""
    timeout = timeout_of(spec)
    if timeout is None:
        return None
    ends = [end for job in active if (end := _deadline(job, timeout)) is not None and end > now]
    return min(ends) - now if ends else None


def report_of(pods: Sequence[objects.Obj]) -> StartReport:
    """What the Pods of an overdue run say: started (one Running or finished), or why none
    started (the first Pod that gives a cause)."""
    if any((pod.get("status") or {}).get("phase") in _STARTED_PHASES for pod in pods):
        return StartReport(started=True)
    if not pods:
        return StartReport(
            started=False,
            cause="no Pod exists (the Job's events say why it created none: a quota, an "
            "admission webhook, a missing service account)",
        )
    causes = (cause for pod in pods if (cause := _cause_of(pod)) is not None)
    first = next(causes, f"Pod {objects.name_of(pods[0])} is Pending and gives no reason")
    return StartReport(started=False, cause=_shortened(first))


def _cause_of(pod: objects.Obj) -> str | None:
    """A Pending Pod's cause: a waiting container's reason and message, else a False
    PodScheduled condition's."""
    status = pod.get("status") or {}
    name = objects.name_of(pod)
    for container in (
        *(status.get("initContainerStatuses") or ()),
        *(status.get("containerStatuses") or ()),
    ):
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return _said(name, waiting["reason"], waiting.get("message"))
    for condition in status.get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return _said(name, condition.get("reason") or "NotScheduled", condition.get("message"))
    return None


def _said(pod: str, reason: str, message: str | None) -> str:
    return f"Pod {pod}: {reason}: {message}" if message else f"Pod {pod}: {reason}"


def _shortened(cause: str) -> str:
    return cause if len(cause) <= _MAX_CAUSE_LENGTH else cause[: _MAX_CAUSE_LENGTH - 3] + "..."


def end_overdue(
    view: CronJobView,
    status: CronJobStatus,
    steps: Steps,
    now: datetime,
    notices: list[history.Notice],
    *,
    recorded: Callable[[str], bool],
) -> list[str]:
    """End each run of ``status.active`` the view reports unstarted past its timeout:
    delete its Job, take it out of ``status.active``, count a failed run, and add its
    ``RunStartTimeout`` notice to ``notices`` (so the ones ended before a failed delete
    are reported with the write). A failed delete raises its API error.

    A Job whose run the stored status does not record yet (``recorded`` is false for its
    name) is the only evidence of that run, and is left: its name is returned, so the
    reconcile writes the status that records it first and its follow-up ends it
    (docs/cronjob-semantics.md, "The rule", 3)."""
    timeout = timeout_of(view.spec)
    if timeout is None or not view.start_reports:
        return []
    unrecorded: list[str] = []
    active = status.get("active") or []
    for ref in list(active):
        report = view.start_reports.get(str(ref.get("uid")))
        if report is None or report.started:
            continue
        if not recorded(ref["name"]):
            unrecorded.append(ref["name"])
            continue
        outcome = steps.perform(Delete(ref["name"], ref.get("uid"), replace=True))
        if isinstance(outcome, Rejected):
            raise outcome.error
        active.remove(ref)
        history.count_failed_run(status, now)
        message = (
            f"Job {ref['name']}: no Pod started within {rules.START_TIMEOUT_FIELD} "
            f"({int(timeout.total_seconds())}s); deleted it and counted a failed run. "
            f"{report.cause}"
        )
        notices.append(history.Notice("Warning", REASON, message, finished="Failed"))
    return unrecorded
