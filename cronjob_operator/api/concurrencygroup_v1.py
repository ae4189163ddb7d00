"""The ConcurrencyGroup API, batch.tutorial.kubebuilder.io/v1: a limit shared by CronJobs.

A small kind of its own rather than a ConfigMap (Argo's semaphores): the limit gets a
schema (a positive number, checked by the API server), its own RBAC (who may change a
limit is not who may edit ConfigMaps), a status subresource that holds the slots, and
printer columns (``kubectl get concurrencygroups`` shows LIMIT and IN USE). The slots
live in ``status.holders``: a replica takes one by an update of the status with the
resourceVersion it read, so two replicas that decide at once cannot both take the last
slot (one gets a 409 and reads again); ``controllers/cronjob/groups.py`` has the rules.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field, StrictInt, StringConstraints

from cronjob_operator.api.batch_v1_constants import CONCURRENCY_GROUP
from cronjob_operator.api.markers import PrinterColumn, Resource
from cronjob_operator.api.meta import KubeModel, NonNegativeInt32, ObjectMeta

__all__ = [
    "CONCURRENCY_GROUP",
    "CONCURRENCY_GROUP_RESOURCE",
    "MAX_GROUP_LIMIT",
    "MAX_WAITERS",
    "ConcurrencyGroup",
    "ConcurrencyGroupSpec",
    "ConcurrencyGroupStatus",
    "SlotHolder",
    "Waiter",
]


MAX_GROUP_LIMIT = 100
"""The largest spec.limit: a run that finds the group full looks up each holder's Job to
reclaim the slots of finished ones (from the API server when its cache shows it finished
or lacks it), so the limit bounds that work (and the status)."""

MAX_WAITERS = 1000
"""The most runs status.waiting lists (one per CronJob): it bounds the object's size
(about 150 bytes an entry); a run that finds the list full is skipped (GroupFull)."""


class ConcurrencyGroupSpec(KubeModel):
    """The limit."""

    limit: Annotated[
        StrictInt, Field(ge=1, le=MAX_GROUP_LIMIT, json_schema_extra={"format": "int32"})
    ]
    """At most this many Jobs of the CronJobs naming this group (spec.concurrencyGroup)
    run at once, across every replica of the operator."""


class SlotHolder(KubeModel):
    """A slot taken by one Job."""

    job: Annotated[str, StringConstraints(min_length=1, max_length=63)]
    """The Job's name (taken before the Job is created)."""
    cron_job: Annotated[str, StringConstraints(min_length=1, max_length=253)]
    """The CronJob that created it."""
    acquired_at: datetime
    """When the slot was taken: a slot whose Job does not exist is free again only once
    this is older than the claim grace (docs/beyond-builtin.md)."""


class Waiter(KubeModel):
    """A scheduled run waiting for a slot (whenFull Wait); one per CronJob."""

    cron_job: Annotated[str, StringConstraints(min_length=1, max_length=253)]
    """The CronJob whose run waits."""
    scheduled_time: datetime
    """Its scheduled time: the oldest waiting run gets the next free slot."""
    deadline: datetime | None = None
    """When it can no longer start (scheduled time plus startingDeadlineSeconds); unset:
    no deadline."""
    seen_at: datetime
    """When the CronJob's run took this place (kept when the run's time moves to a newer
    one; of runs with the same scheduled time, the one waiting longest goes first). A
    place whose CronJob is gone or no longer waits for this group is dropped by the
    controller, a minute after it was taken at the earliest."""


class ConcurrencyGroupStatus(KubeModel):
    """The slots and the runs waiting for one."""

    holders: list[SlotHolder] | None = Field(
        default=None,
        max_length=MAX_GROUP_LIMIT,
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    """The Jobs holding a slot (at most spec.limit); a slot is free again once its Job has
    finished or is gone."""
    waiting: list[Waiter] | None = Field(
        default=None,
        max_length=MAX_WAITERS,
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    """The scheduled runs waiting for a slot, in no particular order (the oldest scheduled
    time, then the longest waiting, then the CronJob's name, gets the next free slot)."""
    in_use: NonNegativeInt32 | None = None
    """How many slots are held (the length of holders)."""


class ConcurrencyGroup(KubeModel):
    """ConcurrencyGroup limits how many Jobs of the CronJobs naming it run at once."""

    api_version: str = CONCURRENCY_GROUP.api_version
    kind: str = CONCURRENCY_GROUP.kind
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ConcurrencyGroupSpec
    """The limit."""
    status: ConcurrencyGroupStatus | None = None
    """The slots held and the runs waiting."""


CONCURRENCY_GROUP_RESOURCE = Resource(
    kind=CONCURRENCY_GROUP,
    model=ConcurrencyGroup,
    singular="concurrencygroup",
    short_names=("cjg",),
    printer_columns=(
        PrinterColumn("Limit", "integer", ".spec.limit", "At most this many Jobs at once."),
        PrinterColumn("In Use", "integer", ".status.inUse", "Slots held by running Jobs."),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Age of the group."),
    ),
)
