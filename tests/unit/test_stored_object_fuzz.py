"""Hostile stored objects at the reconcilers: every other object is still served.

Issue 47, section 6. Hypothesis draws from every field of a CronJob (v1 and v2), a
ConcurrencyGroup and a ConfigDeployment, as the pydantic models' schemas give them
(``bench._stored_objects.cases``: wrong JSON types, huge strings and lists, values
nested past Python's recursion limit, values just past each rule), and puts the
hostile object in the runtime's fake client beside a good CronJob and a good
ConfigDeployment, as if it had been written with the webhooks off or before a rule
tightened. The reconcilers (CronJob, which also serves ConcurrencyGroups through the
CronJobs naming them, and ConfigDeployment) must then: return (no exception reaches the
worker, which would retry it with backoff for ever), never requeue hot, still give the
good CronJob its Job and the good ConfigDeployment its Deployment, and report the bad
object at most once (one Warning reason and message, which the event recorder folds
into one event however often it is reconciled); exactly once when the value breaks a
type, format or size the schema states (``controllers.stored``). The draw is fixed
under CI (tests/conftest.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench._stored_objects import BAD, GOOD, KINDS, Case, World, cases, fields_of
from cronjob_operator.api import apps_v1, batch_v1
from cronjob_operator.controllers import stored
from cronjob_operator.runtime.controller import Result
from cronjob_operator.webhooks.conversion import ConversionError
from tests.unit.test_webhook_fuzz import any_value

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Examples, not time: about ten seconds in all."""

CASES = cases(huge=64 * 1024)
"""Huge values of 64 KiB, past every length and count the schemas bound (the bench,
``bench.stored_object_cost``, takes them to 1 MiB)."""
FIELDS = [(kind, path) for kind in KINDS for path, _ in fields_of(KINDS[kind])]

MUST_REPORT = ("wrong type", "past maxLength", "past maxItems", "past int32", "past int64")
"""The labels of values a type, format or size of the schema refuses: each is reported."""
HOT = 1.0
"""A requeue sooner than this many seconds is hot."""


def served(case: Case, world: World) -> list[Result]:
    """Reconcile the hostile object at its creation and a minute later (a run is due
    then), then the good objects; the results of the hostile object's reconciles."""
    results = []
    for _ in range(2):
        outcome = world.reconcile(case.reconciled, BAD)
        assert outcome.error is None, f"{case}: the reconcile raised {outcome.error!r}"
        assert outcome.result is not None
        results.append(outcome.result)
        world.advance(60)
    for kind in (batch_v1.CRONJOB, apps_v1.CONFIG_DEPLOYMENT):
        outcome = world.reconcile(kind, GOOD)
        assert outcome.error is None, f"{case}: the good {kind.kind} raised {outcome.error!r}"
    return results


def assert_not_hot(case: Case, results: list[Result]) -> None:
    for result in results:
        assert not result.follow_up, f"{case}: follow-up after the follow-up"
        assert result.requeue_after == 0 or result.requeue_after >= HOT, f"{case}: {result}"


def assert_the_good_objects_served(case: Case, world: World) -> None:
    assert world.jobs_of(GOOD), f"{case}: the good CronJob got no Job"
    assert world.has_deployment(GOOD), f"{case}: the good ConfigDeployment got no Deployment"


def must_report(case: Case) -> bool:
    """Whether ``case``'s value breaks a type, format or size its schema states (the API
    server guarantees annotations are strings: a wrong type there cannot be stored)."""
    return case.label.startswith(MUST_REPORT) and case.path[0] != "metadata"


def stored_or_refused(case: Case) -> list[dict[str, Any]] | None:
    """The objects of ``case`` as stored, or None when the API server refuses the write:
    a v2 CronJob the conversion webhook cannot convert to v1 is never stored."""
    try:
        return case.stored()
    except ConversionError:
        assert case.kind == "CronJob/v2", f"{case}: only a v2 object is converted"
        return None


@FUZZ
@given(index=st.integers(0, len(CASES) - 1))  # an index: Hypothesis prints it, not the value
def test_a_hostile_stored_object_is_reported_once_and_stops_nothing_else(index: int) -> None:
    case = CASES[index]
    objects = stored_or_refused(case)
    if objects is None:
        return
    world = World(objects)
    results = served(case, world)
    assert_not_hot(case, results)
    assert_the_good_objects_served(case, world)
    reports = world.warnings_about(BAD)
    assert len(reports) <= 1, f"{case}: reported {len(reports)} ways: {sorted(reports)}"
    if must_report(case):
        assert len(reports) == 1, f"{case}: not reported"
        (_, message), *_ = reports
        assert len(message) < 2048, f"{case}: a report of {len(message)} characters"


@FUZZ
@given(field=st.sampled_from(FIELDS), value=any_value)
def test_any_json_at_any_field_stops_nothing_else(field: tuple[str, Any], value: Any) -> None:
    """Values Hypothesis makes up (any JSON, deep, large) at any field."""
    kind, path = field
    case = Case(kind, path, "any JSON", value)
    objects = stored_or_refused(case)
    if objects is None:
        return
    world = World(objects)
    assert_not_hot(case, served(case, world))
    assert_the_good_objects_served(case, world)
    assert len(world.warnings_about(BAD)) <= 1


@pytest.mark.parametrize(
    ("kind", "path", "value", "field"),
    [
        ("CronJob/v1", ("spec", "jobTemplate"), "x", "spec.jobTemplate"),
        ("CronJob/v1", ("status", "lastScheduleTime"), "not a time", "status.lastScheduleTime"),
        ("CronJob/v1", ("spec", "startingDeadlineSeconds"), 2**63, "spec.startingDeadlineSeconds"),
        ("ConfigDeployment", ("spec", "secrets", 0), "db", "spec.secrets[0]"),
        ("ConcurrencyGroup", ("status", "holders"), "x", "status.holders"),
    ],
)
def test_each_report_names_the_object_the_field_and_the_fix(
    kind: str, path: tuple[str | int, ...], value: Any, field: str
) -> None:
    """Before the fix each of these raised (AttributeError, ValueError, OverflowError)
    on every retry; now one Warning names the field and says how to correct it."""
    case = Case(kind, path, "example", value)
    world = World(case.stored())
    assert_not_hot(case, served(case, world))
    ((reason, message),) = world.warnings_about(BAD)
    assert field in message
    assert "kubectl edit" in message or "writes the status again" in message
    assert reason in (stored.INVALID_STORED_OBJECT, "GroupUnusable")


def test_a_negative_starting_deadline_is_reported_not_raised() -> None:
    """Stored past the schema's minimum of 0, it raised ValueError in the schedule walk."""
    case = Case("CronJob/v1", ("spec", "startingDeadlineSeconds"), "under minimum", -1)
    world = World(case.stored())
    assert_not_hot(case, served(case, world))
    ((reason, message),) = world.warnings_about(BAD)
    assert reason == "InvalidDeadline"
    assert message.startswith("spec.startingDeadlineSeconds: -1 is negative")


def test_every_kind_and_rule_is_generated_from_the_models() -> None:
    """The fields come from the schemas: a field added to a model is fuzzed at once."""
    labels = {case.label for case in CASES}
    assert {"wrong type str", "huge string", "huge list", "deep", "past maxLength"} <= labels
    assert {"not in the enum", "under minimum", "past maximum", "not a time"} <= labels
    paths = {(case.kind, case.field) for case in CASES}
    assert ("CronJob/v2", "spec.schedule.minute") in paths
    assert ("ConcurrencyGroup", "status.waiting[0].seenAt") in paths
    assert ("ConfigDeployment", "spec.template.spec.containers[0].image") in paths
    assert ("CronJob/v1", "spec.jobTemplate.spec.template.spec.containers[0].env[0].name") in paths
