"""Defaulting and validation of CronJob v1: the tutorial's ``cronjob_webhook.go``.

The CRD schema already rejects much (types, enums, minimums, the CEL rules on the name,
``TZ=`` and ``timeZone``) and applies the same defaults, but it cannot parse a schedule:
``60 * * * *`` or ``* * * * 7`` pass any schema. These webhooks hold the CronJob to the
built-in ``batch/v1`` CronJob's rules, with ``cronjob_operator.schedule`` deciding what a
schedule or time zone may be (one accept set for the webhook and the controller):

- ``default`` sets concurrencyPolicy Allow, suspend false, successfulJobsHistoryLimit 3 and
  failedJobsHistoryLimit 1 where they are unset (absent or null), never over a value;
  the values are the v1 model's defaults, so the schema and the webhook agree.
- ``validate_create`` / ``validate_update`` return every ``FieldError`` at once. As
  upstream: the name is limited to 52 characters on create only (older, longer names
  can still be updated and deleted), and a ``TZ=``/``CRON_TZ=`` prefix is tolerated on
  update only when the old schedule had one, so objects from before the rule can change.
  So is a history limit above ``MAX_HISTORY_LIMIT`` (a bound upstream lacks) that an
  update keeps: the controller keeps at most that many Jobs anyway. Beyond these, every
  update is ratcheted (``runtime.webhook``): an error the stored object has too, on a
  field the update leaves unchanged, does not refuse it, so a CronJob stored while the
  webhook was off can still be rewritten (``migrate-storage``), labelled and deleted.

Objects are read as raw JSON, not through the pydantic model: a webhook must report every
problem of whatever it is sent, with the field path, rather than stop at the first.
v2 objects never reach these functions: the webhook configurations match v1, and the API
server converts a v2 request to v1 first (matchPolicy Equivalent).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from pydantic_core import PydanticUndefined

from cronjob_operator import schedule
from cronjob_operator.api import batch_v1, run_overrides
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1_constants import MAX_SCHEDULE_LENGTH
from cronjob_operator.api.cronjob_rules import (
    HISTORY_LIMITS,
    MAX_HISTORY_LIMIT,
    PAUSE_FIELD,
    SCHEDULE_TOO_LONG,
    STAGGER_FIELD,
    START_TIMEOUT_FIELD,
    TOKEN_FIELD,
    parse_spec_schedule,
    stagger_problem,
    window_problems,
)
from cronjob_operator.runtime import objects, webhook
from cronjob_operator.runtime.webhook import AdmissionRequest, FieldError
from cronjob_operator.webhooks.names import name_errors
from cronjob_operator.webhooks.nesting import nesting_errors

__all__ = [
    "DEFAULTS",
    "MAX_SCHEDULE_LENGTH",
    "MUTATE_PATH",
    "VALIDATE_PATH",
    "default",
    "defaulting_patch",
    "mutate",
    "validate",
    "validate_create",
    "validate_update",
]

MUTATE_PATH: Final = "/mutate-batch-tutorial-kubebuilder-io-v1-cronjob"
VALIDATE_PATH: Final = "/validate-batch-tutorial-kubebuilder-io-v1-cronjob"

DEFAULTS: Final[Mapping[str, Any]] = {
    info.alias or name: getattr(info.default, "value", info.default)
    for name, info in batch_v1.CronJobSpec.model_fields.items()
    if info.default not in (None, PydanticUndefined)
}
"""The spec fields with a default, as JSON: the v1 model's (and so the CRD schema's)."""

_TZ_PREFIXES: Final = ("TZ=", "CRON_TZ=")
_COUNTS: Final = ("startingDeadlineSeconds", *HISTORY_LIMITS)
_SCHEDULE_HINT: Final = (
    "use 5 fields (minute hour day-of-month month day-of-week) or a macro such as @hourly"
)
_BOTH_SCHEDULES: Final = "cannot be set with spec.schedule; set exactly one of the two"
_BOTH_ZONES: Final = (
    f"cannot use both {schedule.TIME_ZONE_FIELD} and a TZ or CRON_TZ prefix in the schedule"
)
# The messages of cronjob_operator.schedule: 'spec.schedule: "<value>": <detail>'.
_SCHEDULE_MESSAGE: Final = re.compile(r'[\w.]+: "(?:[^"\\]|\\.)*": (?P<detail>.*)', re.DOTALL)


def _spec(cronjob: Mapping[str, Any]) -> Mapping[str, Any] | None:
    spec = cronjob.get("spec")
    return spec if isinstance(spec, Mapping) else None


def defaulting_patch(cronjob: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON Patch that sets each default the object leaves unset (absent or null)."""
    spec = _spec(cronjob)
    if spec is None:
        return []  # nothing to default; validation reports the missing spec
    return [
        {"op": "add", "path": f"/spec/{field}", "value": value}
        for field, value in DEFAULTS.items()
        if spec.get(field) is None
    ]


def default(cronjob: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``cronjob`` with its unset defaults set (what the patch does)."""
    result: dict[str, Any] = objects.thaw(cronjob)
    for op in defaulting_patch(cronjob):
        result["spec"][op["path"].rpartition("/")[2]] = op["value"]
    return result


def _detail(message: str) -> str:
    """The part of a ``cronjob_operator.schedule`` message after the field and value."""
    match = _SCHEDULE_MESSAGE.fullmatch(message)
    return match["detail"] if match else message


def _schedule_errors(
    spec: Mapping[str, Any], old_spec: Mapping[str, Any] | None
) -> list[FieldError]:
    field = schedule.SCHEDULE_FIELD
    value = spec.get("schedule")
    many = spec.get("schedules")
    if many is not None:
        if value is not None:
            return [webhook.invalid(schedule.SCHEDULES_FIELD, _count(many), _BOTH_SCHEDULES)]
        return _schedules_errors(many)
    if value is None or value == "":
        return [webhook.required(field, f"{_SCHEDULE_HINT}; or set spec.schedules")]
    if not isinstance(value, str):
        return [webhook.invalid(field, value, "must be a string")]
    if len(value) > MAX_SCHEDULE_LENGTH:
        return [webhook.invalid(field, f"{value[:40]}...", SCHEDULE_TOO_LONG)]
    old_schedule = (old_spec or {}).get("schedule")
    tolerate_tz = isinstance(old_schedule, str) and old_schedule.startswith(_TZ_PREFIXES)
    if not (tolerate_tz and value.startswith(_TZ_PREFIXES)):
        return [
            webhook.invalid(field, value, _detail(m)) for m in schedule.validate_schedule(value)
        ]
    # An update of an object that already had a prefix: robfig reads "TZ=<zone> <rest>".
    prefix, _, rest = value.partition(" ")
    zone = prefix.partition("=")[2]
    errors = [
        webhook.invalid(field, value, _detail(m)) for m in schedule.validate_schedule(rest.strip())
    ]
    zone_problem = schedule.validate_time_zone(zone)
    if zone_problem is not None:
        errors.append(
            webhook.invalid(
                field, value, f"in the {prefix.partition('=')[0]}= prefix: {_detail(zone_problem)}"
            )
        )
    if spec.get("timeZone") is not None:
        errors.append(webhook.invalid(field, value, _BOTH_ZONES))
    return errors


def _count(many: Any) -> str:
    return f"<{len(many)} schedules>" if isinstance(many, list) else repr(many)


def _schedules_errors(many: Any) -> list[FieldError]:
    """spec.schedules: 1 to MAX_SCHEDULES strings, each a schedule as spec.schedule
    accepts it, except @every (a delay from the last run, not times)."""
    field = schedule.SCHEDULES_FIELD
    if not isinstance(many, list):
        return [webhook.invalid(field, many, "must be a list of schedules")]
    if not 1 <= len(many) <= batch_v1.MAX_SCHEDULES:
        return [
            webhook.invalid(
                field,
                _count(many),
                f"must list 1 to {batch_v1.MAX_SCHEDULES} schedules (or use spec.schedule for one)",
            )
        ]
    errors = []
    for index, value in enumerate(many):
        entry = f"{field}[{index}]"
        if not isinstance(value, str) or not value:
            errors.append(webhook.invalid(entry, value, "must be a non-empty string"))
        elif len(value) > MAX_SCHEDULE_LENGTH:
            errors.append(webhook.invalid(entry, f"{value[:40]}...", SCHEDULE_TOO_LONG))
        elif value.startswith(_TZ_PREFIXES):
            errors.append(
                webhook.invalid(
                    entry, value, "a TZ= or CRON_TZ= prefix is not supported; set spec.timeZone"
                )
            )
        elif value.startswith("@every"):
            errors.append(
                webhook.invalid(
                    entry,
                    value,
                    "@every is a delay from the last run, not times, so it cannot be one of "
                    "several schedules; use spec.schedule for it",
                )
            )
        else:
            errors += [
                webhook.invalid(entry, value, _detail(m)) for m in schedule.validate_schedule(value)
            ]
    return errors


def _time_zone_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    field = schedule.TIME_ZONE_FIELD
    value = spec.get("timeZone")
    if value is None:
        return []
    if not isinstance(value, str):
        return [webhook.invalid(field, value, "must be a string")]
    problem = schedule.validate_time_zone(value)
    return [] if problem is None else [webhook.invalid(field, value, _detail(problem))]


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _spec_errors(spec: Mapping[str, Any], old_spec: Mapping[str, Any] | None) -> list[FieldError]:
    errors = _schedule_errors(spec, old_spec) + _time_zone_errors(spec)
    policy = spec.get("concurrencyPolicy")
    policies = [p.value for p in batch_v1.ConcurrencyPolicy]
    if policy is not None and policy not in policies:
        errors.append(webhook.not_supported("spec.concurrencyPolicy", policy, policies))
    catch_up = spec.get("catchUpPolicy")
    catch_ups = [p.value for p in batch_v1.CatchUpPolicy]
    if catch_up is not None and catch_up not in catch_ups:
        errors.append(webhook.not_supported("spec.catchUpPolicy", catch_up, catch_ups))
    suspend = spec.get("suspend")
    if suspend is not None and not isinstance(suspend, bool):
        errors.append(webhook.invalid("spec.suspend", suspend, "must be true or false"))
    for name in _COUNTS:
        value = spec.get(name)
        if value is None:
            continue
        if not _is_count(value):
            errors.append(webhook.invalid(f"spec.{name}", value, "must be a whole number"))
        elif value < 0:
            errors.append(
                webhook.invalid(f"spec.{name}", value, "must be greater than or equal to 0")
            )
        elif (
            name in HISTORY_LIMITS
            and value > MAX_HISTORY_LIMIT
            and value != (old_spec or {}).get(name)  # kept from before the bound: capped
        ):
            errors.append(
                webhook.invalid(
                    f"spec.{name}",
                    value,
                    f"must be at most {MAX_HISTORY_LIMIT} (every finished Job kept is read by "
                    "each reconcile); export older runs' results elsewhere",
                )
            )
    if not isinstance(spec.get("jobTemplate"), Mapping):
        errors.append(
            webhook.required("spec.jobTemplate", "the Job to create at each scheduled time")
        )
    window = [webhook.invalid(*problem) for problem in window_problems(spec)]
    return (
        errors
        + _stagger_errors(spec)
        + _failure_policy_errors(spec)
        + _group_errors(spec)
        + _start_timeout_errors(spec)
        + window
    )


def _stagger_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """staggerSeconds: 0..3600 and below the schedule's shortest gap (which no schema or
    CEL rule can compute: it needs the schedule's times)."""
    value = spec.get("staggerSeconds")
    if value is None:
        return []
    if not _is_count(value):
        return [webhook.invalid(STAGGER_FIELD, value, "must be a whole number")]
    detail = stagger_problem(_parsed_schedule(spec), value)  # no schedule: the range only
    return [] if detail is None else [webhook.invalid(STAGGER_FIELD, value, detail)]


def _failure_policy_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    policy = spec.get("failurePolicy")
    if policy is None:
        return []
    if not isinstance(policy, Mapping):
        return [webhook.invalid("spec.failurePolicy", policy, "must be an object")]
    value = policy.get("pauseAfterConsecutiveFailures")
    if value is None or (_is_count(value) and value >= 1):
        return []
    return [
        webhook.invalid(
            PAUSE_FIELD,
            value,
            "must be a whole number of at least 1 (pause after that many failed runs in a "
            "row), or unset to never pause",
        )
    ]


def _start_timeout_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    value = spec.get("runStartTimeoutSeconds")
    detail = rules.start_timeout_problem(value)
    return [] if detail is None else [webhook.invalid(START_TIMEOUT_FIELD, value, detail)]


def _group_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """spec.concurrencyGroup: a name a ConcurrencyGroup can have (the controller reads the
    group by it), and whenFull Wait or Skip."""
    ref = spec.get("concurrencyGroup")
    if ref is None:
        return []
    if not isinstance(ref, Mapping):
        return [webhook.invalid("spec.concurrencyGroup", ref, "must be an object")]
    errors = name_errors(
        "spec.concurrencyGroup.name",
        ref.get("name"),
        "the ConcurrencyGroup whose slots the runs take",
    )
    when_full = ref.get("whenFull")
    choices = [choice.value for choice in batch_v1.WhenGroupFull]
    if when_full is not None and when_full not in choices:
        errors.append(webhook.not_supported("spec.concurrencyGroup.whenFull", when_full, choices))
    return errors


def _run_request(cronjob: Mapping[str, Any] | None) -> Any:
    annotations = ((cronjob or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(batch_v1.RUN_ANNOTATION)


def _run_request_errors(
    cronjob: Mapping[str, Any], spec: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[FieldError]:
    """The run request annotation: its token and overrides, and, when it is new or
    changed, that the containers it names are the template's (a template edit that drops
    one is not refused for an old request: the controller reports it if it runs)."""
    raw = _run_request(cronjob)
    if not isinstance(raw, str):
        return []
    job_template = spec.get("jobTemplate")
    job_spec = job_template.get("spec") if isinstance(job_template, Mapping) else None
    unchanged = old is not None and _run_request(old) == raw
    problem = run_overrides.request_problem(
        raw, None if unchanged or not isinstance(job_spec, Mapping) else job_spec
    )
    if problem is None:
        return []
    shown = raw if len(raw) <= 200 else f"<{len(raw)} characters>"
    return [webhook.invalid(TOKEN_FIELD, shown, problem.partition(": ")[2])]


def _backfill_request(cronjob: Mapping[str, Any] | None) -> Any:
    annotations = ((cronjob or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(batch_v1.BACKFILL_ANNOTATION)


def _parsed_schedule(spec: Mapping[str, Any] | None) -> schedule.AnySchedule | None:
    try:
        return None if spec is None else parse_spec_schedule(spec)
    except (schedule.ScheduleError, TypeError):
        return None  # reported as a schedule error


def _backfill_errors(
    cronjob: Mapping[str, Any], spec: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[FieldError]:
    """The backfill annotation: its shape and range, and at most MAX_BACKFILL times of the
    schedule. The count is not walked again on an update that changes neither the
    request nor the schedule (it was counted when admitted)."""
    raw = _backfill_request(cronjob)
    if raw is None:
        return []
    parsed = _parsed_schedule(spec)
    unchanged = old is not None and _backfill_request(old) == raw
    if unchanged and _parsed_schedule(_spec(old or {})) == parsed:
        parsed = None  # counted already: only the shape and the range are checked
    problem = rules.request_problem(raw, parsed)
    if problem is None:
        return []
    shown = raw if isinstance(raw, str) and len(raw) <= 200 else f"<{len(str(raw))} characters>"
    return [webhook.invalid(rules.BACKFILL_FIELD, shown, problem.partition(": ")[2])]


def _validate(cronjob: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _spec(cronjob)
    if spec is None:
        return [webhook.required("spec")]
    return (
        nesting_errors(cronjob, old)
        + _spec_errors(spec, None if old is None else _spec(old))
        + _run_request_errors(cronjob, spec, old)
        + _backfill_errors(cronjob, spec, old)
    )


def validate_create(cronjob: Mapping[str, Any]) -> list[FieldError]:
    """Every reason the API server must refuse to create ``cronjob`` (empty: it may)."""
    errors = webhook.name_too_long(
        cronjob,
        batch_v1.MAX_NAME_LENGTH,
        "the Job name appends an 11-character suffix and must fit 63",
    )
    return errors + _validate(cronjob, None)


def validate_update(cronjob: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """Every error of ``cronjob`` as an update of ``old``. ``validate`` refuses the update
    only for those it causes: one ``old`` has too, on a field left unchanged, is
    ratcheted (``runtime.webhook.validation_answer``)."""
    return _validate(cronjob, old)


def mutate(request: AdmissionRequest, cronjob: dict[str, Any]) -> dict[str, Any]:
    """The mutating webhook's answer: admit, with the unset defaults as a patch."""
    return webhook.patch(request.uid, defaulting_patch(cronjob))


def validate(request: AdmissionRequest, cronjob: dict[str, Any]) -> dict[str, Any]:
    """The validating webhook's answer: admit, or deny with every error."""
    return webhook.validation_answer(
        request,
        cronjob,
        kind=batch_v1.CRONJOB,
        validate_create=validate_create,
        validate_update=validate_update,
    )
