"""The typed view of a CronJob and its Jobs that one reconcile decides on, read once.

``observe`` (in ``reconciler.py``) reads the CronJob and its Jobs from the cache and asks
the API server about the active entries the cache lacks; :func:`view_of` turns what it
read into a :class:`CronJobView`: the metadata the decision asks about, the Jobs by
state, the CronJob's and the active Jobs' creation times parsed, and which active
entries are confirmed gone. The decision (``decide.py``) reads only this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cronjob_operator.controllers.cronjob.jobs import JobSets, classify
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controllerutil import parse_time

__all__ = ["CronJobView", "view_of"]


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
    spec: Mapping[str, Any]
    annotations: Mapping[str, Any]
    stored: Mapping[str, Any]
    """The status as stored: what pruning may rely on having been written."""
    jobs: JobSets
    job_created: Mapping[str, datetime | None]
    """The active Jobs' creation times, by name."""
    missing: frozenset[str]
    """The uids of ``status.active`` entries the API server confirmed are gone."""


def view_of(
    cronjob: objects.Obj, owned: Iterable[objects.Obj], *, missing: Iterable[str] = ()
) -> CronJobView:
    """The view of ``cronjob`` and the Jobs it controls (``owned``)."""
    metadata = cronjob["metadata"]
    jobs = classify(owned)
    return CronJobView(
        obj=cronjob,
        name=str(metadata["name"]),
        namespace=str(metadata["namespace"]),
        generation=int(metadata.get("generation") or 0),
        created=parse_time(metadata.get("creationTimestamp")),
        deleting=bool(metadata.get("deletionTimestamp")),
        spec=cronjob.get("spec") or {},
        annotations=metadata.get("annotations") or {},
        stored=cronjob.get("status") or {},
        jobs=jobs,
        job_created={
            objects.name_of(job): parse_time((job.get("metadata") or {}).get("creationTimestamp"))
            for job in jobs.active
        },
        missing=frozenset(missing),
    )
