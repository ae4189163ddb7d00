"""The CronJob API, batch.tutorial.kubebuilder.io/v1: the tutorial's ``cronjob_types.go``.

The models describe the resource twice over. As pydantic models they validate objects
the way the API server will (tests, samples, anything that builds a CronJob) and
round-trip what the server returns. As the source of the CRD (``crdgen`` reads them and
``CRONJOB_RESOURCE``) their field docstrings, constraints, defaults and CEL rules become
the OpenAPI schema, so both checks stay one fact.

The reconciler does not validate whole objects: the job template is copied to the Job
as the JSON it is, and a CronJob stored while validation was bypassed (say, an unknown
time zone) must still be read so the controller can report it. ``read_settings`` reads
just the fields the reconciler acts on, typed, without those checks: the one way the
controller reads a spec.
"""

from __future__ import annotations

import zoneinfo
from datetime import date, datetime
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import (
    ConfigDict,
    Field,
    StrictInt,
    StringConstraints,
    field_validator,
    model_validator,
)

from cronjob_operator.api.batch_v1_constants import (
    BACKFILL_ANNOTATION,
    CRONJOB,
    MAX_BACKFILL,
    MAX_EXCLUDED_DATES,
    MAX_RUN_START_TIMEOUT_SECONDS,
    MAX_RUN_TOKEN_LENGTH,
    MAX_SCHEDULES,
    MAX_STAGGER_SECONDS,
    MIN_RUN_START_TIMEOUT_SECONDS,
    RUN_ANNOTATION,
)
from cronjob_operator.api.batch_v1_settings import (
    CatchUpPolicy,
    ConcurrencyPolicy,
    CronJobSettings,
    Unusable,
    WhenGroupFull,
    read_settings,
    settings_of,
)
from cronjob_operator.api.core import JobTemplateSpec
from cronjob_operator.api.markers import PrinterColumn, Resource, ValidationRule
from cronjob_operator.api.meta import (
    Condition,
    KubeModel,
    NonNegativeInt32,
    NonNegativeInt64,
    ObjectMeta,
    ObjectReference,
    PositiveInt32,
    SubdomainName,
)

__all__ = [
    "BACKFILL_ANNOTATION",
    "CRONJOB",
    "CRONJOB_NAME_RULE",
    "CRONJOB_RESOURCE",
    "MAX_BACKFILL",
    "MAX_CATCH_UP",
    "MAX_EXCLUDED_DATES",
    "MAX_NAME_LENGTH",
    "MAX_RUN_START_TIMEOUT_SECONDS",
    "MAX_RUN_TOKEN_LENGTH",
    "MAX_SCHEDULES",
    "MAX_STAGGER_SECONDS",
    "MIN_RUN_START_TIMEOUT_SECONDS",
    "ONE_SCHEDULE_RULE",
    "RUN_ANNOTATION",
    "Backfill",
    "BackfillState",
    "CatchUpPolicy",
    "ConcurrencyGroupRef",
    "ConcurrencyPolicy",
    "CronJob",
    "CronJobSettings",
    "CronJobSpec",
    "CronJobStatus",
    "Exclusions",
    "FailurePolicy",
    "GroupWait",
    "ObservedSchedule",
    "RunWindow",
    "ScheduledRuns",
    "SkipReason",
    "SkippedRuns",
    "Unusable",
    "WhenGroupFull",
    "read_settings",
    "settings_of",
]

MAX_NAME_LENGTH = 52
"""Longest CronJob name: a Job is named ``<name>-<unix seconds>`` (11 more characters)
and a Job name becomes a label value on its pods, which must fit 63."""

CRONJOB_NAME_RULE = ValidationRule(
    rule=f"self.metadata.name.size() <= {MAX_NAME_LENGTH}",
    message=f"metadata.name: must be no more than {MAX_NAME_LENGTH} characters (the Job "
    "name appends an 11-character suffix and must fit 63)",
)

_SCHEDULE_RULES = (
    (
        "!self.startsWith('TZ=') && !self.startsWith('CRON_TZ=')",
        "schedule: a TZ= or CRON_TZ= prefix is not supported; set spec.timeZone instead",
    ),
    ("self != '@reboot'", "schedule: @reboot is not supported; there is no machine to reboot"),
)
_SCHEDULES_RULES = (
    (
        "self.all(s, !s.startsWith('TZ=') && !s.startsWith('CRON_TZ='))",
        "schedules: a TZ= or CRON_TZ= prefix is not supported; set spec.timeZone instead",
    ),
    (
        "self.all(s, s != '@reboot' && !s.startsWith('@every'))",
        "schedules: @reboot and @every are not supported here (@every is a delay from the "
        "last run, not times; use spec.schedule for it)",
    ),
)
ONE_SCHEDULE_RULE = ValidationRule(
    rule="has(self.schedule) != has(self.schedules)",
    message="set exactly one of spec.schedule and spec.schedules",
)
"""On spec (so the API server names the field ``spec``), in both versions."""
_TIME_ZONE_PATTERN = r"^[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*$"
_TIME_ZONE_RULES = (
    (
        "self != 'Local'",
        "timeZone: Local is not allowed (it would depend on the controller's machine); "
        "use an IANA name such as UTC or Europe/Berlin",
    ),
    # CEL's timestamp accessors take a zone name and fail on an unknown one; the API
    # server reports a failing rule as "Invalid value: ... unknown time zone X", so this
    # rule rejects names missing from the server's time zone database (kube-apiserver
    # embeds one). It is true for every known zone.
    (
        "timestamp('2000-01-01T00:00:00Z').getFullYear(self) > 0",
        "timeZone: must be a time zone name from the IANA database, such as UTC or Europe/Berlin",
    ),
)


def _cel(rules: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


MAX_CATCH_UP = 100
"""The most missed times ``catchUpPolicy: All`` runs after an outage: the newest 100 in
reach (the built-in's bound on missed times); older ones are skipped (CatchUpBound)."""


class SkipReason(StrEnum):
    """Why a scheduled time did not run: the reason label of
    cronjob_operator_runs_skipped_total and, with a lower-case first letter, its count in
    status.skippedRuns."""

    DEADLINE_PASSED = "DeadlinePassed"
    FORBID_WHILE_ACTIVE = "ForbidWhileActive"
    SUSPENDED = "Suspended"
    PAUSED_AFTER_FAILURES = "PausedAfterFailures"
    CATCH_UP_BOUND = "CatchUpBound"
    BUFFER_FULL = "BufferFull"
    EXCLUDED = "Excluded"
    GROUP_FULL = "GroupFull"

    @property
    def status_key(self) -> str:
        """The key of this reason's count in status.skippedRuns (``deadlinePassed``)."""
        return self.value[0].lower() + self.value[1:]


class FailurePolicy(KubeModel):
    """What to do about runs that keep failing."""

    pause_after_consecutive_failures: PositiveInt32 | None = None
    """Pause the CronJob after this many consecutive failed runs: no new scheduled run
    starts and Available is False (reason PausedAfterFailures) until the spec is edited
    (a new generation) or a manual run succeeds. Unset: never pause."""


_DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_EXCLUSION_RULES = (
    (
        "self.all(s, !s.startsWith('TZ=') && !s.startsWith('CRON_TZ='))",
        "exclusions.schedules: a TZ= or CRON_TZ= prefix is not supported; they are read in "
        "spec.timeZone",
    ),
    (
        "self.all(s, s != '@reboot' && !s.startsWith('@every'))",
        "exclusions.schedules: @reboot and @every are not supported (they are no times); "
        "exclude cron times such as '* * 25 12 *'",
    ),
)
_WINDOW_RULE = (
    "!has(self.start) || !has(self.end) || self.start < self.end",
    "window: start must be before end",
)


class RunWindow(KubeModel):
    """When scheduled runs may start: only scheduled times in [start, end)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [{"rule": _WINDOW_RULE[0], "message": _WINDOW_RULE[1]}]
        }
    )

    start: datetime | None = None
    """The first instant (RFC 3339, inclusive) a scheduled time may run; unset: no bound."""
    end: datetime | None = None
    """The instant (RFC 3339, exclusive) from which no scheduled time runs: the CronJob
    then stops scheduling (Available False, reason WindowEnded); unset: no bound."""

    @model_validator(mode="after")
    def _start_before_end(self) -> Self:
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise ValueError(_WINDOW_RULE[1])
        return self


class Exclusions(KubeModel):
    """Scheduled times that are skipped (holidays, maintenance days), in spec.timeZone;
    each is counted in status.skippedRuns.excluded."""

    dates: list[Annotated[str, StringConstraints(pattern=_DATE_PATTERN)]] | None = Field(
        default=None,
        max_length=MAX_EXCLUDED_DATES,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    """Dates (YYYY-MM-DD) on which no scheduled time runs, read in spec.timeZone. At most
    366."""
    schedules: list[Annotated[str, StringConstraints(min_length=1, max_length=1024)]] | None = (
        Field(
            default=None,
            min_length=1,
            max_length=MAX_SCHEDULES,
            json_schema_extra={**_cel(_EXCLUSION_RULES), "x-kubernetes-list-type": "atomic"},
        )
    )
    """Cron schedules (as spec.schedules) whose times do not run, e.g. "* * 25 12 *" for
    every time on December 25th or "0 9 * * 1" for Monday's 09:00 only. At most 10."""

    @field_validator("dates")
    @classmethod
    def _dates_exist(cls, dates: list[str] | None) -> list[str] | None:
        for value in dates or ():
            try:
                date.fromisoformat(value)
            except ValueError:
                raise ValueError(f"exclusions.dates: {value!r} is no calendar date") from None
        return dates


class ConcurrencyGroupRef(KubeModel):
    """The ConcurrencyGroup whose slots this CronJob's runs take."""

    name: SubdomainName
    """The name of a ConcurrencyGroup in the CronJob's namespace."""
    when_full: WhenGroupFull | None = None
    """What a scheduled run does when every slot of the group is taken: "Wait" (unset)
    or "Skip"."""


class CronJobSpec(KubeModel):
    """CronJobSpec defines the desired state of CronJob."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": ONE_SCHEDULE_RULE.rule, "message": ONE_SCHEDULE_RULE.message}
            ]
        }
    )

    schedule: Annotated[str, StringConstraints(min_length=1, max_length=1024)] | None = Field(
        default=None, json_schema_extra=_cel(_SCHEDULE_RULES)
    )
    """The schedule in Cron format (minute hour day-of-month month day-of-week), see
    https://en.wikipedia.org/wiki/Cron. Names, ranges, lists, steps, and the macros
    @yearly, @monthly, @weekly, @daily, @hourly and "@every <duration>" are accepted.
    Exactly one of schedule and schedules is set."""
    schedules: list[Annotated[str, StringConstraints(min_length=1, max_length=1024)]] | None = (
        Field(
            default=None,
            min_length=1,
            max_length=MAX_SCHEDULES,
            json_schema_extra={
                **_cel(_SCHEDULES_RULES),
                "x-kubernetes-list-type": "atomic",
            },
        )
    )
    """Several schedules in Cron format (as schedule, but not "@every"), all in timeZone:
    the CronJob runs at every time of any of them, and a time two of them share runs
    once. nextScheduleTime, startingDeadlineSeconds, staggerSeconds, catchUpPolicy and
    the skipped-run counts all work over the union. At most 10. Exactly one of schedule
    and schedules is set."""
    time_zone: (
        Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=_TIME_ZONE_PATTERN)]
        | None
    ) = Field(default=None, json_schema_extra=_cel(_TIME_ZONE_RULES))
    """The time zone name for the given schedule, from the IANA time zone database
    (https://en.wikipedia.org/wiki/List_of_tz_database_time_zones), e.g. Europe/Berlin.
    If not specified, the schedule is read in UTC."""
    starting_deadline_seconds: NonNegativeInt64 | None = None
    """Optional deadline in seconds for starting the job if it misses scheduled time for
    any reason. Missed jobs executions will be counted as failed ones."""
    concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    """Specifies how to treat concurrent executions of a Job. Valid values are:
    "Allow" (default): allows CronJobs to run concurrently;
    "Forbid": forbids concurrent runs, skipping next run if previous run hasn't finished
    yet; "Replace": cancels currently running job and replaces it with a new one."""
    suspend: bool = False
    """This flag tells the controller to suspend subsequent executions, it does not apply
    to already started executions. Defaults to false."""
    job_template: JobTemplateSpec
    """Specifies the job that will be created when executing a CronJob."""
    successful_jobs_history_limit: NonNegativeInt32 | None = 3
    """The number of successful finished jobs to retain. This is a pointer to distinguish
    between explicit zero and not specified. Defaults to 3."""
    failed_jobs_history_limit: NonNegativeInt32 | None = 1
    """The number of failed finished jobs to retain. This is a pointer to distinguish
    between explicit zero and not specified. Defaults to 1."""
    stagger_seconds: (
        Annotated[
            StrictInt,
            Field(ge=0, le=MAX_STAGGER_SECONDS, json_schema_extra={"format": "int32"}),
        ]
        | None
    ) = None
    """Spread runs of many CronJobs on the same schedule: this CronJob's runs start at a
    fixed offset in [0, staggerSeconds] after each scheduled time, derived from a hash of
    its namespace and name (the same offset on every run, restart and replica). Job names
    keep the scheduled time; startingDeadlineSeconds counts from the staggered time. Must
    be smaller than the shortest gap between two runs of the schedule (checked by the
    validating webhook). Unset or 0: no stagger."""
    failure_policy: FailurePolicy | None = None
    """What to do about runs that keep failing. Unset: nothing (failures are counted in
    status.consecutiveFailures either way)."""
    run_start_timeout_seconds: (
        Annotated[
            StrictInt,
            Field(
                ge=MIN_RUN_START_TIMEOUT_SECONDS,
                le=MAX_RUN_START_TIMEOUT_SECONDS,
                json_schema_extra={"format": "int32"},
            ),
        ]
        | None
    ) = None
    """End a run none of whose Pods started within this many seconds of its Job's
    status.startTime (no Pod ready, succeeded or failed: unschedulable, an image that
    cannot be pulled), and count it as a failed run (status.consecutiveFailures, so it
    feeds failurePolicy), with a RunStartTimeout event naming the cause the Pods report.
    Under Forbid or BufferOne such a run would otherwise block every later one. Unlike
    activeDeadlineSeconds, a run whose Pod started is never ended. 10 to 604800; unset:
    runs wait to start for ever, as the built-in."""
    catch_up_policy: CatchUpPolicy | None = None
    """Which missed scheduled times run after an outage: "Latest" (unset: the newest
    within startingDeadlineSeconds, as the built-in) or "All" (every one within
    startingDeadlineSeconds, oldest first, each once, at most the newest 100). A schedule
    edit never starts a run for a time before the edit, with either."""
    window: RunWindow | None = None
    """Only scheduled times in [window.start, window.end) run; nextScheduleTime honours
    it. Unset: no bound."""
    max_scheduled_runs: PositiveInt32 | None = None
    """At most this many scheduled runs (each scheduled time's Job counts once, across
    restarts and replicas; manual runs do not count); then the CronJob stops scheduling
    (Available False, reason RunLimitReached). status.scheduledRuns shows the count and
    what is left. Unset: no limit."""
    exclusions: Exclusions | None = None
    """Scheduled times that are skipped (dates and cron schedules in spec.timeZone), each
    counted in status.skippedRuns.excluded."""
    concurrency_group: ConcurrencyGroupRef | None = None
    """A limit shared with other CronJobs of the namespace: every Job of this CronJob
    (scheduled, requested or backfilled) first takes a slot of this ConcurrencyGroup,
    which holds at most spec.limit Jobs at once across all its CronJobs. Unset: no
    shared limit."""

    @field_validator("schedule")
    @classmethod
    def _schedule_is_supported(cls, schedule: str | None) -> str | None:
        if schedule is None:
            return None
        if schedule.startswith(("TZ=", "CRON_TZ=")):
            raise ValueError(_SCHEDULE_RULES[0][1])
        if schedule == "@reboot":
            raise ValueError(_SCHEDULE_RULES[1][1])
        return schedule

    @field_validator("schedules")
    @classmethod
    def _schedules_are_supported(cls, schedules: list[str] | None) -> list[str] | None:
        for schedule in schedules or ():
            if schedule.startswith(("TZ=", "CRON_TZ=")):
                raise ValueError(_SCHEDULES_RULES[0][1])
            if schedule == "@reboot" or schedule.startswith("@every"):
                raise ValueError(_SCHEDULES_RULES[1][1])
        return schedules

    @model_validator(mode="after")
    def _one_schedule(self) -> Self:
        if (self.schedule is None) == (self.schedules is None):
            raise ValueError(ONE_SCHEDULE_RULE.message)
        return self

    @field_validator("time_zone")
    @classmethod
    def _time_zone_is_known(cls, time_zone: str | None) -> str | None:
        if time_zone is None:
            return None
        if time_zone == "Local":
            raise ValueError(_TIME_ZONE_RULES[0][1])
        try:
            zoneinfo.ZoneInfo(time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(_TIME_ZONE_RULES[1][1]) from None
        return time_zone


class ObservedSchedule(KubeModel):
    """The schedule and time zone the controller schedules against, and since when.

    A run is never created for a scheduled time at or before since: editing the
    schedule or the time zone never starts a catch-up run for a time before the edit.
    Kept in status so the rule holds across operator restarts. The schedule is the v1
    string in both API versions (five v2 fields cannot say every schedule, @every for one,
    and status cannot carry the annotation that conversion uses for those)."""

    schedule: str | None = None
    """spec.schedule as the controller last read it (unset with spec.schedules)."""
    schedules: str | None = None
    """spec.schedules as the controller last read them, joined by "; " (unset with
    spec.schedule): what the SCHEDULES column shows."""
    time_zone: str | None = None
    """spec.timeZone as the controller last read it (unset: UTC)."""
    since: datetime
    """When the controller first saw this schedule and time zone: the creation time, or
    the first reconcile after an edit of either."""


class SkippedRuns(KubeModel):
    """Scheduled times that did not run, counted once each by reason.

    Every scheduled time up to accountedThrough has been accounted for: it ran, waits in
    status.bufferedRun, or is counted here. A time is counted when it can no longer run,
    with what kept it from running at that moment."""

    accounted_through: datetime | None = None
    """The scheduled time up to which every time is accounted for (kept across restarts,
    so no time is counted twice)."""
    deadline_passed: NonNegativeInt64 | None = None
    """Times whose startingDeadlineSeconds passed before they could start."""
    forbid_while_active: NonNegativeInt64 | None = None
    """Times skipped by concurrencyPolicy Forbid because a run was active."""
    suspended: NonNegativeInt64 | None = None
    """Times that came while spec.suspend was true."""
    paused_after_failures: NonNegativeInt64 | None = None
    """Times that came while paused by spec.failurePolicy."""
    catch_up_bound: NonNegativeInt64 | None = None
    """Missed times beyond what catchUpPolicy runs (Latest: all but the newest; All: all
    but the newest 100)."""
    buffer_full: NonNegativeInt64 | None = None
    """Times that came while a run was active and another already waited
    (concurrencyPolicy BufferOne)."""
    excluded: NonNegativeInt64 | None = None
    """Times excluded by spec.exclusions (a date or an exclusion schedule)."""
    group_full: NonNegativeInt64 | None = None
    """Times that found every slot of spec.concurrencyGroup taken (whenFull Skip)."""


class ScheduledRuns(KubeModel):
    """The scheduled runs counted against spec.maxScheduledRuns (kept while it is set)."""

    count: NonNegativeInt64
    """Scheduled runs so far: each scheduled time whose Job was created counts once."""
    counted_through: datetime | None = None
    """The newest scheduled time counted; a Job of a time at or before it is never counted
    again (Jobs are named by their scheduled time, so a retried create is the same Job)."""
    remaining: NonNegativeInt64
    """How many scheduled runs are left before the limit."""


class BackfillState(StrEnum):
    """Where a backfill is: Running (times still to run), Complete, or Cancelled (its
    annotation was removed or replaced by another token)."""

    RUNNING = "Running"
    COMPLETE = "Complete"
    CANCELLED = "Cancelled"


class Backfill(KubeModel):
    """The progress of the latest backfill request (annotation
    batch.tutorial.kubebuilder.io/backfill)."""

    token: Annotated[str, StringConstraints(max_length=MAX_RUN_TOKEN_LENGTH)]
    """The request's token; the same token again does nothing."""
    from_: datetime = Field(alias="from")
    """The first scheduled time it covers (inclusive)."""
    to: datetime
    """The end of the times it covers (exclusive)."""
    requested: NonNegativeInt32
    """How many scheduled times are in [from, to)."""
    done: NonNegativeInt32
    """How many of them have their Job: started by this backfill (it may still be
    running), or there already. Complete once every one has."""
    next: datetime | None = None
    """The next time it runs (unset once Complete or Cancelled)."""
    state: BackfillState
    """Running, Complete or Cancelled."""


class GroupWait(KubeModel):
    """A scheduled run waiting for a slot of its concurrency group."""

    group: str
    """The ConcurrencyGroup's name."""
    scheduled_time: datetime
    """The scheduled time of the run that waits."""


class CronJobStatus(KubeModel):
    """CronJobStatus defines the observed state of CronJob."""

    active: list[ObjectReference] | None = Field(
        default=None, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """A list of pointers to currently running jobs."""
    last_schedule_time: datetime | None = None
    """Information when was the last time the job was successfully scheduled (the
    scheduled time, not the time the Job was created)."""
    last_successful_time: datetime | None = None
    """Information when was the last time the job successfully completed."""
    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )
    """Conditions represent the current state of the CronJob resource: Available,
    Progressing and Degraded."""
    observed_generation: NonNegativeInt64 | None = None
    """The .metadata.generation the controller last acted on."""
    observed_schedule: ObservedSchedule | None = None
    """The schedule and time zone the controller schedules against, and since when; no
    run is created for a time at or before since."""
    next_schedule_time: datetime | None = None
    """When the next scheduled run is due (after stagger). Unset while no scheduled run
    will start: suspended, paused after failures, being deleted, or a schedule that is
    invalid or never fires. Under concurrencyPolicy Forbid it is the next scheduled time
    even if an active Job will make the controller skip that run."""
    last_handled_run_request: (
        Annotated[str, StringConstraints(max_length=MAX_RUN_TOKEN_LENGTH)] | None
    ) = None
    """The last run request token (annotation batch.tutorial.kubebuilder.io/run-requested-at)
    the controller handled: its Job was created (or could not be, see Degraded)."""
    pending_run_request: (
        Annotated[str, StringConstraints(max_length=MAX_RUN_TOKEN_LENGTH)] | None
    ) = None
    """A run request token waiting for the active Job to finish (concurrencyPolicy
    Forbid); its Job starts when that Job finishes."""
    last_failure_time: datetime | None = None
    """When the latest failed Job failed (its Failed condition's time)."""
    consecutive_failures: NonNegativeInt32 | None = None
    """Failed runs since the last successful one (or since the spec edit that resumed a
    CronJob paused by failurePolicy). Each failed Job counts once."""
    buffered_run: datetime | None = None
    """concurrencyPolicy BufferOne: the scheduled time that came due while a run was
    active; its Job starts as soon as no run is active."""
    skipped_runs: SkippedRuns | None = None
    """Scheduled times that did not run, by reason, each counted once."""
    backfill: Backfill | None = None
    """The progress of the latest backfill request."""
    scheduled_runs: ScheduledRuns | None = None
    """The scheduled runs counted against spec.maxScheduledRuns, and what is left."""
    waiting_for_group: GroupWait | None = None
    """The scheduled run waiting for a slot of spec.concurrencyGroup (whenFull Wait);
    unset when none waits."""


class CronJob(KubeModel):
    """CronJob is the Schema for the cronjobs API."""

    api_version: str = CRONJOB.api_version
    kind: str = CRONJOB.kind
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CronJobSpec
    """Spec defines the desired state of CronJob."""
    status: CronJobStatus | None = None
    """Status defines the observed state of CronJob."""

    @model_validator(mode="after")
    def _name_fits_job_names(self) -> Self:
        name = self.metadata.name or ""
        if len(name) > MAX_NAME_LENGTH:
            raise ValueError(CRONJOB_NAME_RULE.message)
        return self


CRONJOB_RESOURCE = Resource(
    kind=CRONJOB,
    model=CronJob,
    singular="cronjob",
    # Not "cj": that is the built-in batch/v1 CronJob's short name, and kubectl would
    # resolve it to one of the two depending on discovery order.
    short_names=("cjt",),
    printer_columns=(
        PrinterColumn("Schedule", "string", ".spec.schedule", "The cron schedule."),
        # spec.schedules is a list, which a column would print as Go's [a b c]: this one
        # shows them joined by "; " as the controller last read them.
        PrinterColumn(
            "Schedules",
            "string",
            ".status.observedSchedule.schedules",
            "spec.schedules, joined by '; ' (empty with spec.schedule).",
        ),
        PrinterColumn("TimeZone", "string", ".spec.timeZone", "The schedule's time zone."),
        PrinterColumn("Suspend", "boolean", ".spec.suspend", "Whether runs are suspended."),
        # CRD printer columns cannot count a list (the built-in CronJob's ACTIVE is a
        # count computed in Go); the column shows the first active Job's name, empty
        # when none is running. status.active has them all.
        PrinterColumn(
            "Active", "string", ".status.active[*].name", "An active Job (the first one)."
        ),
        PrinterColumn(
            "Last Schedule",
            "date",
            ".status.lastScheduleTime",
            "When the last Job was scheduled.",
        ),
        # A "date" column renders a future time as <invalid> in kubectl: the next run is
        # shown as the RFC 3339 string it is stored as.
        PrinterColumn(
            "Next Schedule",
            "string",
            ".status.nextScheduleTime",
            "When the next scheduled run is due (after stagger); empty when none will start.",
        ),
        PrinterColumn(
            "Failures",
            "integer",
            ".status.consecutiveFailures",
            "Consecutive failed runs since the last success.",
        ),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Age of the CronJob."),
    ),
    validations=(CRONJOB_NAME_RULE,),
)
