"""The decision's typed status (``controllers/cronjob/status.py``) says what the API says.

mypy checks every key the decision writes against ``CronJobStatus``; these tests hold
that TypedDict to the API's pydantic model, which makes the CRD schema: the same fields
at every level, a time where the API has a time, and every skip reason's count a key.
"""

from __future__ import annotations

import types
from datetime import datetime
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest
from pydantic import BaseModel

from cronjob_operator.api import batch_v1, meta
from cronjob_operator.api.batch_v1 import SkipReason
from cronjob_operator.controllers.cronjob import status

# Each typed field of the decision's status, and the API model it mirrors.
SHAPES: dict[str, tuple[Any, type[BaseModel]]] = {
    "status": (status.CronJobStatus, batch_v1.CronJobStatus),
    "active[]": (status.JobReference, meta.ObjectReference),
    "observedSchedule": (status.ObservedSchedule, batch_v1.ObservedSchedule),
    "skippedRuns": (status.SkippedRuns, batch_v1.SkippedRuns),
    "scheduledRuns": (status.ScheduledRuns, batch_v1.ScheduledRuns),
    "backfill": (status.Backfill, batch_v1.Backfill),
    "waitingForGroup": (status.GroupWait, batch_v1.GroupWait),
}


def _api_fields(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON names of ``model``'s fields, with their annotations (None removed)."""
    fields = {}
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if get_origin(annotation) in (Union, types.UnionType):
            annotation = next(arg for arg in get_args(annotation) if arg is not type(None))
        fields[field.alias or name] = annotation
    return fields


@pytest.mark.parametrize(("typed", "model"), SHAPES.values(), ids=SHAPES.keys())
def test_the_typed_status_has_the_api_fields(typed: Any, model: type[BaseModel]) -> None:
    typed_fields = set(get_type_hints(typed))
    api_fields = set(_api_fields(model))
    if model is meta.ObjectReference:
        # status.active holds what jobs.job_reference writes: a subset of the reference.
        assert typed_fields <= api_fields
    else:
        assert typed_fields == api_fields


@pytest.mark.parametrize(("typed", "model"), SHAPES.values(), ids=SHAPES.keys())
def test_a_time_is_typed_a_time_where_the_api_has_one(typed: Any, model: type[BaseModel]) -> None:
    hints = get_type_hints(typed)
    api_times = {key for key, kind in _api_fields(model).items() if kind is datetime}
    assert {key for key, hint in hints.items() if hint is datetime} == api_times & set(hints)


def test_the_times_the_view_parses_are_every_time_of_the_typed_status() -> None:
    expected: dict[str | None, set[str]] = {None: set()}
    for key, hint in get_type_hints(status.CronJobStatus).items():
        if hint is datetime:
            expected[None].add(key)
        elif key in SHAPES and (
            times := {k for k, h in get_type_hints(hint).items() if h is datetime}
        ):
            expected[key] = times
    assert {field: set(keys) for field, keys in status.TIMES.items()} == expected
    assert status.TIMES["backfill"] == ("from", "to", "next")


def test_every_skip_reason_counts_under_a_key_of_the_typed_skipped_runs() -> None:
    keys = set(get_type_hints(status.SkippedRuns))
    assert {reason.status_key for reason in SkipReason} <= keys
    assert keys - {reason.status_key for reason in SkipReason} == {"accountedThrough"}
