"""The CronJob's status as the decision builds it: typed, so mypy checks every key and value.

The decision works on a mutable copy of the stored status (``view.status_of``): plain
dicts, as the API server sends them and as the status write sends them back, with its
timestamps parsed to aware UTC datetimes. :class:`CronJobStatus` says what that copy
holds, key by key, for every module that reads or writes it (history, conditions, the
run limit, the backfill, the groups, the start timeout): a misspelt key or a value of
the wrong type is a type error, not a status field silently dropped. At run time it is
the dict itself (no copy, no validation: the stored status was checked against the
CRD schema before the decision reads it, ``controllers/stored.py``, and a field that did
not fit was dropped).

Its keys are the API's (``api.batch_v1.CronJobStatus``, whose pydantic model makes the
CRD schema): a unit test holds the two to the same fields. A field typed ``datetime``
here is a time the view parses and :func:`~.view.api_status` renders (``TIMES``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, TypedDict, get_type_hints

__all__ = [
    "TIMES",
    "Backfill",
    "CronJobStatus",
    "GroupWait",
    "JobReference",
    "ObservedSchedule",
    "ScheduledRuns",
    "SkippedRuns",
]


class JobReference(TypedDict, total=False):
    """An entry of ``status.active``: the ObjectReference of a running Job."""

    apiVersion: str
    kind: str
    namespace: str
    name: str
    uid: str
    resourceVersion: str


class ObservedSchedule(TypedDict, total=False):
    """The schedule and time zone scheduled against, and since when."""

    schedule: str
    schedules: str
    timeZone: str
    since: datetime


class SkippedRuns(TypedDict, total=False):
    """Scheduled times that did not run, counted by reason (``policies.py``)."""

    accountedThrough: datetime
    deadlinePassed: int
    forbidWhileActive: int
    suspended: int
    pausedAfterFailures: int
    catchUpBound: int
    bufferFull: int
    excluded: int
    groupFull: int


class ScheduledRuns(TypedDict, total=False):
    """The scheduled runs counted against ``spec.maxScheduledRuns`` (``limits.py``)."""

    count: int
    countedThrough: datetime
    remaining: int


# "from" is a keyword: the functional form.
Backfill = TypedDict(
    "Backfill",
    {
        "token": str,
        "from": datetime,
        "to": datetime,
        "requested": int,
        "done": int,
        "next": datetime,
        "state": str,
    },
    total=False,
)
"""The progress of the latest backfill request (``backfill.py``)."""


class GroupWait(TypedDict, total=False):
    """The scheduled run waiting for a slot of its concurrency group (``groups.py``)."""

    group: str
    scheduledTime: datetime


class CronJobStatus(TypedDict, total=False):
    """``status`` of a CronJob, as the decision reads and writes it."""

    active: list[JobReference]
    lastScheduleTime: datetime
    lastSuccessfulTime: datetime
    conditions: list[dict[str, Any]]
    observedGeneration: int
    observedSchedule: ObservedSchedule
    nextScheduleTime: datetime
    lastHandledRunRequest: str
    pendingRunRequest: str
    lastFailureTime: datetime
    consecutiveFailures: int
    bufferedRun: datetime
    skippedRuns: SkippedRuns
    backfill: Backfill
    scheduledRuns: ScheduledRuns
    waitingForGroup: GroupWait


def _times_of(shape: type) -> tuple[str, ...]:
    """The keys of the TypedDict ``shape`` whose values are datetimes."""
    return tuple(key for key, hint in get_type_hints(shape).items() if hint is datetime)


TIMES: Final[dict[str | None, tuple[str, ...]]] = {
    None: _times_of(CronJobStatus),
    **{
        key: _times_of(hint)
        for key, hint in get_type_hints(CronJobStatus).items()
        if isinstance(hint, type) and issubclass(hint, dict) and _times_of(hint)
    },
}
"""The status's timestamps, by the field that holds them (None: status itself): what the
view parses and the Plan renders. Conditions' ``lastTransitionTime`` stay strings: the
runtime's ``condition_setter`` writes them and the decision never reads them as times."""
