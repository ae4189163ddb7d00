"""CronJob conversion between v1 (the hub, stored) and v2: the ``/convert`` webhook.

The API server stores CronJobs as v1 and sends a ConversionReview whenever a client reads
or writes v2 (and v1 with v2 objects in flight): a list of objects and the apiVersion it
wants them in. Everything but the schedule is the same in both versions and is copied
as it is, unknown fields and status (conditions included) too; only ``apiVersion``,
``spec.schedule`` and one annotation change.

The schedule. A v1 string of five fields separated by single spaces becomes the v2 object
of those fields, a ``*`` field left out (missing means ``*``), and converts back to the
same string. Anything else (``@hourly``, ``@every 90m``, odd spacing, a schedule stored
while validation was bypassed) cannot be said exactly in five fields: v2 gets the closest
fields (a macro's expansion, else every field unset) and the original string in the
``batch.tutorial.kubebuilder.io/v1-schedule`` annotation. Converting to v1 restores the
annotated string while the v2 fields still match it, so v1 -> v2 -> v1 returns what was
stored; once a v2 client changes the fields, they win and the annotation is dropped.
A v2 object converts to v1 and back unchanged, except that a field written as ``*`` reads
back unset (the two mean the same and v1 cannot tell them apart). ``spec.schedules`` (a
list) converts entry by entry the same way; when an entry cannot be said exactly, the v1
list is kept as JSON in ``batch.tutorial.kubebuilder.io/v1-schedules``.

Objects are handled as JSON dicts, never through the models, so nothing is lost or
normalised in passing. A conversion that cannot be done fails the whole review with a
message (``result.status: Failure``), as the API server expects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from cronjob_operator.api import batch_v1, batch_v2
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.webhook import BadRequest, clipped, shortened
from cronjob_operator.schedule import MACROS

__all__ = [
    "PATH",
    "ConversionError",
    "convert",
    "review",
    "schedule_to_v1",
    "schedule_to_v2",
    "to_v1",
    "to_v2",
]

PATH: Final = batch_v2.CONVERSION.path
REVIEW_API_VERSION: Final = "apiextensions.k8s.io/v1"
REVIEW_KIND: Final = "ConversionReview"


_V1 = batch_v1.CRONJOB
_V2 = batch_v2.CRONJOB
_ANNOTATION = batch_v2.V1_SCHEDULE_ANNOTATION
_SCHEDULES_ANNOTATION = batch_v2.V1_SCHEDULES_ANNOTATION


class ConversionError(ValueError):
    """An object this webhook cannot convert; the message names it and says why."""


def schedule_to_v2(expression: str) -> tuple[dict[str, str], bool]:
    """The v2 schedule of a v1 one, and whether it says it exactly (converts back to it)."""
    fields = expression.split()
    if len(fields) == len(batch_v2.SCHEDULE_FIELDS):
        structured = {
            name: value
            for name, value in zip(batch_v2.SCHEDULE_FIELDS, fields, strict=True)
            if value != "*"
        }
        return structured, " ".join(fields) == expression
    expansion = MACROS.get(expression)
    return (schedule_to_v2(expansion)[0] if expansion else {}), False


def schedule_to_v1(schedule: Mapping[str, Any]) -> str:
    """The v1 schedule string of a v2 schedule object (a missing field is ``*``)."""
    return " ".join(str(schedule.get(name) or "*") for name in batch_v2.SCHEDULE_FIELDS)


def _described(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    namespace, name = metadata.get("namespace", ""), metadata.get("name", "")
    return f"{shortened(obj.get('kind'))} {shortened(namespace)}/{shortened(name)}"


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.setdefault("metadata", {})
    annotations: dict[str, Any] = metadata.setdefault("annotations", {})
    return annotations


def _pop_annotation(obj: dict[str, Any], name: str = _ANNOTATION) -> Any:
    """Remove a v1-schedule(s) annotation (and an annotations map it leaves empty)."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("annotations"), dict):
        return None
    value = metadata["annotations"].pop(name, None)
    if not metadata["annotations"]:
        del metadata["annotations"]
    return value


def _v2_fields(schedule: Any, obj: Mapping[str, Any]) -> dict[str, str]:
    """The fields of a v2 schedule that are set and not ``*``."""
    if schedule is None:
        return {}
    if not isinstance(schedule, Mapping):
        raise ConversionError(f"{_described(obj)}: spec.schedule must be an object in v2")
    fields = {}
    for name in batch_v2.SCHEDULE_FIELDS:
        value = schedule.get(name)
        if value is None or value == "*":
            continue
        if not isinstance(value, str):
            raise ConversionError(f"{_described(obj)}: spec.schedule.{name} must be a string")
        fields[name] = value
    return fields


def to_v2(cronjob: Mapping[str, Any]) -> dict[str, Any]:
    """A v1 CronJob as v2 (a copy)."""
    result: dict[str, Any] = objects.thaw(cronjob)  # any depth: no recursion
    result["apiVersion"] = _V2.api_version
    # Only conversion sets these; a stale one must not survive.
    _pop_annotation(result)
    _pop_annotation(result, _SCHEDULES_ANNOTATION)
    spec = result.get("spec")
    if not isinstance(spec, dict):
        return result
    if spec.get("schedule") is not None:
        expression = spec["schedule"]
        if not isinstance(expression, str):
            raise ConversionError(f"{_described(cronjob)}: spec.schedule must be a string in v1")
        spec["schedule"], exact = schedule_to_v2(expression)
        if not exact:
            _annotations(result)[_ANNOTATION] = expression
    if spec.get("schedules") is not None:
        expressions = spec["schedules"]
        if not isinstance(expressions, list) or not all(isinstance(e, str) for e in expressions):
            raise ConversionError(
                f"{_described(cronjob)}: spec.schedules must be a list of strings in v1"
            )
        converted = [schedule_to_v2(expression) for expression in expressions]
        spec["schedules"] = [fields for fields, _ in converted]
        if not all(exact for _, exact in converted):
            _annotations(result)[_SCHEDULES_ANNOTATION] = json.dumps(expressions)
    return result


def to_v1(cronjob: Mapping[str, Any]) -> dict[str, Any]:
    """A v2 CronJob as v1 (a copy)."""
    result: dict[str, Any] = objects.thaw(cronjob)  # any depth: no recursion
    result["apiVersion"] = _V1.api_version
    kept = _pop_annotation(result)
    kept_list = _pop_annotation(result, _SCHEDULES_ANNOTATION)
    spec = result.get("spec")
    if not isinstance(spec, dict):
        return result
    if "schedule" in spec:
        fields = _v2_fields(spec["schedule"], cronjob)
        if isinstance(kept, str) and schedule_to_v2(kept)[0] == fields:
            spec["schedule"] = kept
        else:
            spec["schedule"] = schedule_to_v1(fields)
    if spec.get("schedules") is not None:
        spec["schedules"] = _schedules_to_v1(spec["schedules"], kept_list, cronjob)
    return result


def _schedules_to_v1(schedules: Any, kept: Any, obj: Mapping[str, Any]) -> list[str]:
    """v2 ``spec.schedules`` as v1 strings: the annotated originals while the fields still
    match them, else each entry's five fields."""
    if not isinstance(schedules, list):
        raise ConversionError(f"{_described(obj)}: spec.schedules must be a list in v2")
    fields = [_v2_fields(entry, obj) for entry in schedules]
    originals = _kept_schedules(kept)
    if originals is not None and [schedule_to_v2(e)[0] for e in originals] == fields:
        return originals
    return [schedule_to_v1(entry) for entry in fields]


def _kept_schedules(kept: Any) -> list[str] | None:
    """The v1-schedules annotation's list, or None when absent or not a list of strings."""
    if not isinstance(kept, str):
        return None
    try:
        value = json.loads(kept)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(entry, str) for entry in value):
        return value
    return None


def convert(obj: Mapping[str, Any], desired_api_version: str) -> dict[str, Any]:
    """``obj`` (a CronJob in v1 or v2) in ``desired_api_version``, through the hub (v1)."""
    known = (_V1.api_version, _V2.api_version)
    api_version = obj.get("apiVersion")
    if obj.get("kind") != _V1.kind or api_version not in known:
        raise ConversionError(
            f"{_described(obj)}: cannot convert {shortened(api_version)} "
            f"{shortened(obj.get('kind'))}; this webhook converts {_V1.kind} between "
            f"{_V1.api_version} and {_V2.api_version}"
        )
    if desired_api_version not in known:
        raise ConversionError(
            f"{_described(obj)}: cannot convert to {shortened(desired_api_version)}; this webhook "
            f"converts between {_V1.api_version} and {_V2.api_version}"
        )
    if api_version == desired_api_version:
        return objects.thaw(obj)  # type: ignore[no-any-return]
    hub = to_v1(obj) if api_version == _V2.api_version else obj
    return to_v2(hub) if desired_api_version == _V2.api_version else dict(hub)


def _request(body: Any) -> tuple[str, str, list[dict[str, Any]]]:
    """(uid, desiredAPIVersion, objects) of a decoded ConversionReview; BadRequest if not."""
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be a JSON object, not {type(body).__name__}")
    if body.get("apiVersion") != REVIEW_API_VERSION or body.get("kind") != REVIEW_KIND:
        raise BadRequest(
            f"expected apiVersion {REVIEW_API_VERSION} and kind {REVIEW_KIND}, got "
            f"{clipped(body.get('apiVersion'))} and {clipped(body.get('kind'))}"
        )
    request = body.get("request")
    if not isinstance(request, dict):
        raise BadRequest("request must be a JSON object")
    uid, desired, objects = (
        request.get("uid"),
        request.get("desiredAPIVersion"),
        request.get("objects"),
    )
    if not isinstance(uid, str) or not uid:
        raise BadRequest("request.uid must be a non-empty string")
    if not isinstance(desired, str) or not desired:
        raise BadRequest("request.desiredAPIVersion must be a non-empty string")
    if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
        raise BadRequest("request.objects must be a list of objects")
    return uid, desired, objects


def review(body: Any) -> dict[str, Any]:
    """Answer a decoded ConversionReview (the ``/convert`` route)."""
    uid, desired, objects = _request(body)
    response: dict[str, Any] = {"uid": uid}
    try:
        response["convertedObjects"] = [convert(obj, desired) for obj in objects]
        response["result"] = {"status": "Success"}
    except ConversionError as exc:
        response["convertedObjects"] = []
        response["result"] = {"status": "Failure", "message": str(exc)}
    return {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": response}
