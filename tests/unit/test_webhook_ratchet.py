"""The validating webhooks' ratchet: an update is refused only for what it changes.

A stored object that no longer validates (written while the webhook was off, or before a
rule tightened) must still take a no-op update (``migrate-storage``'s rewrite), a
metadata-only update and a change of its other fields; an update that writes a bad value,
or makes another field wrong, is refused as before. Each kind the webhooks validate:
CronJob (v2 writes reach the v1 webhook converted) and ConfigDeployment.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cronjob_operator.api import batch_v1
from cronjob_operator.runtime import webhook
from cronjob_operator.runtime.webhook import _ratchet as ratchet
from cronjob_operator.webhooks import configdeployment, cronjob
from tests.unit.test_webhooks import a_config_deployment, a_cronjob, a_review, routed

CONFIG_DEPLOYMENT = ("apps.tutorial.kubebuilder.io", "v1", "ConfigDeployment")

# (id, spec changes that no longer validate, a field of the error)
STORED_BAD_CRONJOBS = [
    ("minute-60", {"schedule": "60 * * * *"}, "spec.schedule"),
    ("both-schedules", {"schedules": ["@daily"]}, "spec.schedules"),
    ("stagger-past-gap", {"schedule": "* * * * *", "staggerSeconds": 120}, "spec.staggerSeconds"),
    ("history-past-cap", {"successfulJobsHistoryLimit": 5000}, "spec.successfulJobsHistoryLimit"),
    ("bad-group", {"concurrencyGroup": {"name": "Not_A_Name"}}, "spec.concurrencyGroup.name"),
    (
        "window-backwards",
        {"window": {"start": "2027-01-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"}},
        "spec.window.end",
    ),
    ("no-template", {"jobTemplate": None}, "spec.jobTemplate"),
]


def answer(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """The CronJob validating webhook's response to creating ``obj`` or updating ``old``."""
    review = a_review(obj, operation="CREATE" if old is None else "UPDATE", old=old)
    return routed(cronjob.VALIDATE_PATH, review)["response"]  # type: ignore[no-any-return]


def refused_fields(response: dict[str, Any]) -> list[str]:
    assert response["allowed"] is False, "admitted"
    return [cause["field"] for cause in response["status"]["details"]["causes"]]


def stored(changes: dict[str, Any]) -> dict[str, Any]:
    """A CronJob as the API server holds it after a write the webhook did not see."""
    obj = a_cronjob("stored", **changes)
    obj["metadata"] |= {"resourceVersion": "7", "uid": "u-1", "generation": 1}
    obj["status"] = {"lastScheduleTime": "2026-01-01T00:00:00Z"}
    return obj


@pytest.mark.parametrize(
    ("changes", "field"), [pytest.param(c, f, id=i) for i, c, f in STORED_BAD_CRONJOBS]
)
def test_a_stored_bad_cronjob_takes_no_op_metadata_and_other_field_updates(
    changes: dict[str, Any], field: str
) -> None:
    old = stored(changes)
    assert field in refused_fields(answer(old)), "a create of it is refused"

    assert answer(copy.deepcopy(old), old)["allowed"] is True, "a no-op update"
    labelled = copy.deepcopy(old)
    labelled["metadata"] |= {"labels": {"team": "a"}, "finalizers": ["example.com/keep"]}
    assert answer(labelled, old)["allowed"] is True, "a metadata-only update"
    suspended = copy.deepcopy(old)
    suspended["spec"]["suspend"] = True
    assert answer(suspended, old)["allowed"] is True, "a change of another field"


def test_writing_another_bad_value_to_the_bad_field_is_refused() -> None:
    old = stored({"schedule": "60 * * * *"})
    new = copy.deepcopy(old)
    new["spec"]["schedule"] = "61 * * * *"
    assert refused_fields(answer(new, old)) == ["spec.schedule"]


def test_a_new_error_elsewhere_is_refused_and_only_it_is_named() -> None:
    old = stored({"schedule": "60 * * * *"})
    new = copy.deepcopy(old)
    new["spec"]["concurrencyPolicy"] = "Sometimes"
    assert refused_fields(answer(new, old)) == ["spec.concurrencyPolicy"]


def test_a_change_that_makes_an_unchanged_field_wrong_is_refused() -> None:
    old = stored({"schedule": "*/5 * * * *", "staggerSeconds": 120})
    assert answer(copy.deepcopy(old), old)["allowed"] is True
    new = copy.deepcopy(old)
    new["spec"]["schedule"] = "* * * * *"  # the stagger no longer fits the gap
    assert refused_fields(answer(new, old)) == ["spec.staggerSeconds"]


def test_an_unchanged_error_with_a_different_detail_is_refused() -> None:
    old = stored({"schedule": "* * * * *", "staggerSeconds": 120})
    new = copy.deepcopy(old)
    new["spec"]["schedule"] = "*/2 * * * *"  # still too short a gap, another one
    assert refused_fields(answer(new, old)) == ["spec.staggerSeconds"]


def test_a_shown_value_that_stays_the_same_over_a_changed_field_is_refused() -> None:
    # Too many schedules shows "<N schedules>": the same N with other entries is a change.
    many = [f"{minute} * * * *" for minute in range(batch_v1.MAX_SCHEDULES + 1)]
    old = stored({"schedule": None, "schedules": many})
    new = copy.deepcopy(old)
    new["spec"]["schedules"] = [f"{minute} 1 * * *" for minute in range(len(many))]
    assert refused_fields(answer(new, old)) == ["spec.schedules"]


def test_a_stored_bad_run_request_takes_other_updates_but_not_a_new_bad_one() -> None:
    field = f"metadata.annotations[{batch_v1.RUN_ANNOTATION}]"
    old = stored({})
    old["metadata"]["annotations"] = {batch_v1.RUN_ANNOTATION: "t" * 300}
    assert refused_fields(answer(old)) == [field]
    labelled = copy.deepcopy(old)
    labelled["metadata"]["labels"] = {"team": "a"}
    assert answer(labelled, old)["allowed"] is True
    longer = copy.deepcopy(old)
    longer["metadata"]["annotations"][batch_v1.RUN_ANNOTATION] = "t" * 301
    assert refused_fields(answer(longer, old)) == [field]


def config_answer(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    operation = "CREATE" if old is None else "UPDATE"
    review = a_review(obj, operation=operation, old=old, kind=CONFIG_DEPLOYMENT)
    return routed(configdeployment.VALIDATE_PATH, review)["response"]  # type: ignore[no-any-return]


def test_a_stored_bad_config_deployment_takes_other_updates_but_not_a_new_bad_value() -> None:
    old = a_config_deployment(configMap="Bad_Name")
    assert refused_fields(config_answer(old)) == ["spec.configMap"]
    assert config_answer(copy.deepcopy(old), old)["allowed"] is True
    scaled = copy.deepcopy(old)
    scaled["spec"]["replicas"] = 5
    scaled["metadata"]["labels"] = {"team": "a"}
    assert config_answer(scaled, old)["allowed"] is True
    renamed = copy.deepcopy(old)
    renamed["spec"]["configMap"] = "Other_Bad_Name"
    assert refused_fields(config_answer(renamed, old)) == ["spec.configMap"]


def test_an_error_whose_path_cannot_be_followed_is_never_ratcheted() -> None:
    obj = {"spec": {"a": {"b": 1}}}
    shortened = webhook.invalid("spec.a...", "<deep>", "too deep")
    followed = webhook.invalid("spec.a.b", 1, "wrong")
    kept = ratchet.ratcheted([shortened, followed], obj, obj, lambda: [shortened, followed])
    assert kept == [shortened]


def nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


def test_values_too_deep_to_compare_are_judged_in_full() -> None:
    error = webhook.invalid("spec.failurePolicy", nested(5000), "must be an object")
    same = webhook.invalid("spec.failurePolicy", nested(5000), "must be an object")
    obj, old = {"spec": {"failurePolicy": error.value}}, {"spec": {"failurePolicy": same.value}}
    assert ratchet.ratcheted([error], obj, old, lambda: [same]) == [error]


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("spec.schedules[1]", "b"),
        ("metadata.annotations[example.com/x.y]", "v"),
        ("spec.schedules[7]", None),
        ("spec.schedule.hour", None),
        ("spec.missing", None),
    ],
)
def test_field_paths_are_followed_through_keys_indexes_and_dotted_keys(
    field: str, expected: str | None
) -> None:
    obj = {
        "metadata": {"annotations": {"example.com/x.y": "v"}},
        "spec": {"schedules": ["a", "b"], "schedule": "x"},
    }
    steps = ratchet._steps(field)
    assert steps is not None
    found = ratchet._value_at(obj, steps)
    assert (None if found is ratchet._MISSING else found) == expected
