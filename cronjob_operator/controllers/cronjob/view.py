"""The typed view of a CronJob and its Jobs that one reconcile decides on, read once.

``observe`` (in ``reconciler.py``) reads the CronJob and its Jobs from the cache and asks
the API server about the active entries the cache lacks; :func:`view_of` turns what it
read into a :class:`CronJobView`: the metadata the decision asks about, the Jobs by
state, which active entries are confirmed gone, and what the Pods of a run past its
start timeout say (:class:`StartReport`). The decision (``decide.py``) reads
only this.

Every timestamp the decision reads is parsed here, at most once, and nowhere else: the
CronJob's creation time, each Job's :class:`JobTimes` (each time lazily, on its first
read: a no-op reconcile reads few of them), and the status's timestamps
(:data:`~.status.TIMES`), which :func:`stored_status` turns into aware UTC datetimes
without copying the rest of a cached status. The decision works on a mutable copy of
that typed status, reads its times with :func:`time_at`, stores new
ones with :func:`stamp` (the second-precision value the API server keeps), and
:func:`api_status` renders it back to RFC 3339 when the Plan's status is produced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, Final

from cronjob_operator import schedule as schedules
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import CronJobSettings, read_settings
from cronjob_operator.controllers.cronjob.jobs import JobSets, job_uid
from cronjob_operator.controllers.cronjob.status import TIMES, CronJobStatus
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controllerutil import parse_time, rfc3339

__all__ = [
    "GROUP_TIMES",
    "CronJobView",
    "JobTimes",
    "StartReport",
    "WindowRead",
    "api_status",
    "created_at",
    "group_status_of",
    "job_times_of",
    "shown",
    "stamp",
    "status_of",
    "stored_status",
    "time_at",
    "view_of",
]


class JobTimes:
    """A Job's timestamps, each parsed on first read and kept (most reconciles read
    only a few of them, of a few Jobs)."""

    __slots__ = ("__dict__", "_job")

    def __init__(self, job: objects.Obj) -> None:
        self._job = job

    @cached_property
    def created(self) -> datetime | None:
        """``metadata.creationTimestamp``."""
        return created_at(self._job)

    @cached_property
    def started(self) -> datetime | None:
        """``status.startTime``: pruning removes the oldest finished Jobs by it."""
        return parse_time(self._status.get("startTime"))

    @cached_property
    def completed(self) -> datetime | None:
        """``status.completionTime``: moves ``lastSuccessfulTime``."""
        return parse_time(self._status.get("completionTime"))

    @cached_property
    def failed(self) -> datetime | None:
        """When its ``Failed=True`` condition became true (its creation when the
        condition has no time); None unless it failed."""
        for condition in self._status.get("conditions") or ():
            if condition.get("type") == "Failed" and condition.get("status") == "True":
                return parse_time(condition.get("lastTransitionTime")) or self.created
        return None

    @property
    def _status(self) -> Mapping[str, Any]:
        return self._job.get("status") or {}


WindowRead = schedules.Window | rules.WindowError | schedules.ScheduleError | None
"""The spec's run window, run limit and exclusions as one ``schedule.Window``
(``cronjob_rules.window_of``), or why a value stored past validation cannot be read
(None: neither a window nor exclusions is set)."""


@dataclass(frozen=True, slots=True)
class StartReport:
    """What the Pods of a run past its start timeout say (``start_timeout``): whether one
    started after all (Running or finished), else the cause they give."""

    started: bool
    cause: str = ""


class _CreatedByName(Mapping[str, "datetime | None"]):
    """Jobs' creation times by Job name, each parsed when it is first read."""

    __slots__ = ("_times",)

    def __init__(self, times: Mapping[str, JobTimes]) -> None:
        self._times = times

    def __getitem__(self, name: str) -> datetime | None:
        return self._times[name].created

    def __iter__(self) -> Iterator[str]:
        return iter(self._times)

    def __len__(self) -> int:
        return len(self._times)


@dataclass(frozen=True, slots=True)
class CronJobView:
    """A CronJob as read, and the Jobs it controls (see the module docstring)."""

    obj: objects.Obj
    """The CronJob as read (the Jobs to create are built from its template)."""
    name: str
    namespace: str
    generation: int
    created: datetime | None
    deleting: bool
    spec: CronJobSettings
    """The spec fields the decision acts on, typed (the Jobs' template is ``obj``'s)."""
    window: WindowRead
    """``spec.window`` and ``spec.exclusions`` read once per reconcile (:data:`WindowRead`):
    every decision of the reconcile asks about them, and with the most dates and
    schedules the schema admits a read costs more than the rest of a decision."""
    annotations: Mapping[str, Any]
    stored: Mapping[str, Any]
    """The status as stored, frozen, its timestamps parsed (:func:`stored_status`): what
    pruning may rely on having been written."""
    jobs: JobSets
    job_times: Mapping[str, JobTimes]
    """Every owned Job's timestamps, by uid (the Job's identity: a name may be reused)."""
    job_created: Mapping[str, datetime | None]
    """The active Jobs' creation times, by name (each parsed when first read)."""
    missing: frozenset[str]
    """The uids of ``status.active`` entries the API server confirmed are gone."""
    start_reports: Mapping[str, StartReport] = dataclasses.field(default_factory=dict)
    """What the Pods of each run past its start timeout say, by Job uid
    (``start_timeout``; read only for those runs)."""


def view_of(
    cronjob: objects.Obj,
    jobs: JobSets,
    *,
    missing: Iterable[str] = (),
) -> CronJobView:
    """The view of ``cronjob`` and the Jobs it controls, by state (``jobs.classify``)."""
    metadata = cronjob["metadata"]
    times = job_times_of(jobs.owned())
    settings = read_settings(cronjob)
    return CronJobView(
        obj=cronjob,
        name=str(metadata["name"]),
        namespace=str(metadata["namespace"]),
        generation=int(metadata.get("generation") or 0),
        created=created_at(cronjob),
        deleting=bool(metadata.get("deletionTimestamp")),
        spec=settings,
        window=_window_read(settings),
        annotations=metadata.get("annotations") or {},
        stored=stored_status(cronjob.get("status") or {}),
        jobs=jobs,
        job_times=times,
        job_created=_CreatedByName(
            {objects.name_of(job): times[job_uid(job)] for job in jobs.active}
        ),
        missing=frozenset(missing),
    )


def _window_read(settings: CronJobSettings) -> WindowRead:
    """The spec's window and exclusions, or why they cannot be read (:data:`WindowRead`)."""
    try:
        return rules.window_of(settings)
    except (schedules.ScheduleError, rules.WindowError) as exc:
        return exc


def created_at(obj: objects.Obj) -> datetime | None:
    """``metadata.creationTimestamp``, parsed."""
    return parse_time((obj.get("metadata") or {}).get("creationTimestamp"))


def job_times_of(jobs: Iterable[objects.Obj]) -> dict[str, JobTimes]:
    """The timestamps of ``jobs``, by uid."""
    return {job_uid(job): JobTimes(job) for job in jobs}


def stored_status(stored: Mapping[str, Any]) -> objects.Obj:
    """The status ``stored``, frozen, its :data:`~.status.TIMES` parsed as :func:`status_of`
    parses them. A status from the cache is frozen already: only the mappings that hold
    a timestamp are copied, the rest is shared."""
    frozen: objects.Obj = objects.freeze(stored)
    if not frozen:
        return frozen
    status = dict(frozen)
    for field, keys in TIMES.items():
        holder = status if field is None else status.get(field)
        if not isinstance(holder, dict):
            continue
        parsed = _parsed_times(holder, keys)
        if not parsed:
            continue
        if field is None:
            status.update(parsed)
        else:
            status[field] = objects.FrozenDict({**holder, **parsed})
    return objects.FrozenDict(status)


def _parsed_times(holder: Mapping[str, Any], keys: Iterable[str]) -> dict[str, datetime | None]:
    """The non-empty timestamps at ``keys`` in ``holder``, parsed."""
    parsed: dict[str, datetime | None] = {}
    for key in keys:
        value = holder.get(key)
        if isinstance(value, str) and value:
            parsed[key] = parse_time(value)
    return parsed


GROUP_TIMES: Final[Mapping[str, tuple[str, ...]]] = {
    "holders": ("acquiredAt",),
    "waiting": ("scheduledTime", "deadline", "seenAt"),
}
"""A ConcurrencyGroup's status timestamps, by the list whose entries hold them."""


def group_status_of(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A mutable copy of a ConcurrencyGroup's status, its :data:`GROUP_TIMES` parsed to
    aware UTC datetimes (``groups.py`` decides on them; ``api_status`` renders them)."""
    status: dict[str, Any] = objects.thaw(stored)
    for field, keys in GROUP_TIMES.items():
        entries = status.get(field)
        if isinstance(entries, list):
            status[field] = [
                {**entry, **_parsed_times(entry, keys)}
                for entry in entries
                if isinstance(entry, dict)
            ]
    return status


def status_of(stored: Mapping[str, Any]) -> CronJobStatus:
    """A mutable copy of the status ``stored``, its :data:`~.status.TIMES` parsed to aware
    UTC datetimes (an empty or absent one is left as it is, and :func:`time_at` reads it
    as None)."""
    status: CronJobStatus = objects.thaw(stored_status(stored))
    return status


def time_at(holder: Mapping[str, Any] | None, key: str) -> datetime | None:
    """The time at ``holder[key]`` in a status from :func:`status_of` (None: unset)."""
    value = None if holder is None else holder.get(key)
    return value if isinstance(value, datetime) else None


def stamp(moment: datetime) -> datetime:
    """``moment`` as the status keeps it: UTC, whole seconds (what :func:`api_status`
    renders and the next reconcile parses back)."""
    return moment.astimezone(UTC).replace(microsecond=0)


def shown(value: Any) -> Any:
    """A status value as the API has it (a datetime rendered as RFC 3339), for messages."""
    return rfc3339(value) if isinstance(value, datetime) else value


def api_status(status: Mapping[str, Any]) -> dict[str, Any]:
    """The status to write: ``status`` with every datetime rendered as RFC 3339."""
    rendered: dict[str, Any] = {}
    for key, value in status.items():
        if isinstance(value, datetime):
            rendered[key] = shown(value)
        elif isinstance(value, Mapping):
            rendered[key] = api_status(value)
        else:
            rendered[key] = value
    return rendered
