"""The CronJob API, batch.tutorial.kubebuilder.io/v2: the tutorial's multiversion chapter.

v2 is v1 with one change: ``spec.schedule`` is an object whose optional ``minute``,
``hour``, ``dayOfMonth``, ``month`` and ``dayOfWeek`` strings are the five cron fields (a
missing field means ``*``). The models subclass v1's and override only the schedule, so
every other field, constraint, default and description is v1's by construction rather
than by copy.

v1 stays the storage version (the hub). The API server cannot turn a schedule string into
an object, so v2 needs the conversion webhook (``cronjob_operator.webhooks.conversion``)
named by ``CONVERSION``; the base CRD under ``config/crd/bases`` therefore lists v2 but
does not serve it, and ``config/crd/patches/webhook_in_cronjobs.yaml`` (enabled by
``config/default``) serves it with the webhook. A v1 schedule that five fields cannot
express exactly (a macro, ``@every``) is kept in ``V1_SCHEDULE_ANNOTATION`` on the v2
object, so a round trip through v2 returns the original.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field, StringConstraints, field_validator

from cronjob_operator.api import batch_v1
from cronjob_operator.api.markers import ConversionWebhook, PrinterColumn, Resource
from cronjob_operator.api.meta import KubeModel
from cronjob_operator.runtime.kinds import Kind

__all__ = [
    "CONVERSION",
    "CRONJOB",
    "CRONJOB_RESOURCE",
    "SCHEDULE_FIELDS",
    "V1_SCHEDULES_ANNOTATION",
    "V1_SCHEDULE_ANNOTATION",
    "CronJob",
    "CronJobSchedule",
    "CronJobSpec",
]

CRONJOB = Kind(batch_v1.CRONJOB.group, "v2", batch_v1.CRONJOB.kind, batch_v1.CRONJOB.plural)

CONVERSION = ConversionWebhook(path="/convert")
"""The webhook that converts CronJobs between v1 and v2 (served by the manager)."""

V1_SCHEDULE_ANNOTATION: Final = f"{CRONJOB.group}/v1-schedule"
"""On a v2 object: the v1 schedule its ``spec.schedule`` stands for, when the five fields
cannot say it exactly (``@hourly``, ``@every 90m``, unusual spacing). Conversion back to
v1 uses it while ``spec.schedule`` still matches it, and drops it otherwise."""

V1_SCHEDULES_ANNOTATION: Final = f"{CRONJOB.group}/v1-schedules"
"""On a v2 object: the v1 ``spec.schedules`` (a JSON list of strings) its
``spec.schedules`` stands for, when the fields cannot say one of them exactly (a macro);
used and dropped as ``V1_SCHEDULE_ANNOTATION`` is."""

SCHEDULE_FIELDS: Final = ("minute", "hour", "dayOfMonth", "month", "dayOfWeek")
"""The wire names of the schedule's fields, in cron order."""

CronField = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^\S+$")]
"""One cron field: a non-empty string without spaces (``*/15``, ``1-5``, ``MON,WED``)."""


class CronJobSchedule(KubeModel):
    """The schedule as its five cron fields; a missing field means "*". Together they must
    form a schedule the built-in CronJob accepts (checked by the validating webhook)."""

    minute: CronField | None = None
    """Minute field (0-59), e.g. "0", "*/15", "5,35". Unset means every minute."""
    hour: CronField | None = None
    """Hour field (0-23), e.g. "9-17". Unset means every hour."""
    day_of_month: CronField | None = None
    """Day of month field (1-31). Unset means every day of the month."""
    month: CronField | None = None
    """Month field (1-12 or JAN-DEC). Unset means every month."""
    day_of_week: CronField | None = None
    """Day of week field (0-6 or SUN-SAT). Unset means every day of the week."""


# Subclassing reuses v1's fields and their CRD schema; it is not substitutability (a v2
# spec is no v1 spec, hence the two type: ignore). Objects travel as JSON dicts, never as
# these models, so nothing takes a v2 spec for a v1 one.
class CronJobSpec(batch_v1.CronJobSpec):
    """CronJobSpec defines the desired state of CronJob."""

    schedule: CronJobSchedule | None = None  # type: ignore[assignment]
    """The schedule as cron fields (minute hour day-of-month month day-of-week), see
    https://en.wikipedia.org/wiki/Cron. A v1 schedule these fields cannot express (a
    macro such as @hourly, or @every) is kept in an annotation,
    batch.tutorial.kubebuilder.io/v1-schedule. Exactly one of schedule and schedules is
    set."""
    schedules: list[CronJobSchedule] | None = Field(  # type: ignore[assignment]
        default=None,
        min_length=1,
        max_length=batch_v1.MAX_SCHEDULES,
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    """Several schedules as cron fields, all in timeZone: the CronJob runs at every time
    of any of them, and a time two of them share runs once. At most 10. v1 schedules these
    fields cannot express (a macro) are kept in an annotation,
    batch.tutorial.kubebuilder.io/v1-schedules. Exactly one of schedule and schedules is
    set."""

    @field_validator("schedule")
    @classmethod
    def _schedule_is_supported(  # type: ignore[override]
        cls, schedule: CronJobSchedule | None
    ) -> CronJobSchedule | None:
        """Overrides v1's check of the schedule string, which does not apply here."""
        return schedule

    @field_validator("schedules")
    @classmethod
    def _schedules_are_supported(  # type: ignore[override]
        cls, schedules: list[CronJobSchedule] | None
    ) -> list[CronJobSchedule] | None:
        """Overrides v1's check of the schedule strings, which does not apply here."""
        return schedules


class CronJob(batch_v1.CronJob):
    """CronJob is the Schema for the cronjobs API."""

    api_version: str = CRONJOB.api_version
    spec: CronJobSpec
    """Spec defines the desired state of CronJob."""


_SCHEDULE_COLUMNS = tuple(
    PrinterColumn(
        name,
        "string",
        f".spec.schedule.{field}",
        f"The schedule's {name.lower()} field (empty means *).",
        priority=1,
    )
    for name, field in zip(
        ("Minute", "Hour", "Day Of Month", "Month", "Day Of Week"), SCHEDULE_FIELDS, strict=True
    )
)

CRONJOB_RESOURCE = Resource(
    kind=CRONJOB,
    model=CronJob,
    singular=batch_v1.CRONJOB_RESOURCE.singular,
    short_names=batch_v1.CRONJOB_RESOURCE.short_names,
    # v1's columns, with the schedule's fields (shown by -o wide) for its string.
    printer_columns=(
        *_SCHEDULE_COLUMNS,
        *(c for c in batch_v1.CRONJOB_RESOURCE.printer_columns if c.name != "Schedule"),
    ),
    validations=batch_v1.CRONJOB_RESOURCE.validations,
    storage=False,
    conversion=CONVERSION,
)
