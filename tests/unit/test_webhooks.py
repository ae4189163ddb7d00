"""The webhooks' pure logic: defaulting, validation, conversion, review parsing, manifests.

No server and no cluster here (``tests/integration/test_webhooks.py`` has the API server
call them over TLS). Objects are plain JSON dicts, as the API server sends them.
"""

from __future__ import annotations

import base64
import copy
import json
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from cronjob_operator import cli, schedule
from cronjob_operator.api import batch_v1, batch_v2, crdgen
from cronjob_operator.runtime.webhook import BadRequest
from cronjob_operator.runtime.webhook import _admission as admission
from cronjob_operator.webhooks import configdeployment, conversion, cronjob, manifests

ROOT = Path(__file__).resolve().parents[2]
V1 = batch_v1.CRONJOB.api_version
V2 = batch_v2.CRONJOB.api_version
ANNOTATION = batch_v2.V1_SCHEDULE_ANNOTATION
JOB_TEMPLATE = {
    "spec": {
        "template": {
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}
        }
    }
}


def a_cronjob(name: str = "backup", **spec: Any) -> dict[str, Any]:
    """A v1 CronJob as the API server would send it (``None`` removes a field)."""
    body: dict[str, Any] = {"schedule": "*/5 * * * *", "jobTemplate": copy.deepcopy(JOB_TEMPLATE)}
    body.update(spec)
    return {
        "apiVersion": V1,
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {key: value for key, value in body.items() if value is not None},
    }


def a_review(
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    kind: tuple[str, str, str] = ("batch.tutorial.kubebuilder.io", "v1", "CronJob"),
) -> dict[str, Any]:
    group, version, kind_name = kind
    request: dict[str, Any] = {
        "uid": "7f0b2c1e-0000-4000-8000-000000000001",
        "kind": {"group": group, "version": version, "kind": kind_name},
        "resource": {"group": group, "version": version, "resource": "cronjobs"},
        "operation": operation,
        "name": (obj or old or {}).get("metadata", {}).get("name", ""),
        "namespace": "default",
        "object": obj,
        "oldObject": old,
        "userInfo": {"username": "admin"},
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def routed(path: str, body: Any) -> dict[str, Any]:
    """The answer of the server's route for ``path``."""
    return manifests.routes()[path](body)  # type: ignore[no-any-return]


def decoded_patch(review: dict[str, Any]) -> list[dict[str, Any]]:
    response = review["response"]
    if "patch" not in response:
        return []
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))  # type: ignore[no-any-return]


def messages(errors: list[admission.FieldError]) -> list[str]:
    return [str(error) for error in errors]


# --- defaulting ---------------------------------------------------------------------------


def test_defaults_are_the_models() -> None:
    assert cronjob.DEFAULTS == {
        "concurrencyPolicy": "Allow",
        "suspend": False,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1,
    }


def test_unset_fields_are_defaulted() -> None:
    obj = a_cronjob()
    defaulted = cronjob.default(obj)
    assert defaulted["spec"] == {**obj["spec"], **cronjob.DEFAULTS}
    assert obj == a_cronjob(), "the input is not changed"


def test_set_values_are_never_overwritten() -> None:
    settings: dict[str, Any] = {
        "concurrencyPolicy": "Forbid",
        "suspend": True,
        "successfulJobsHistoryLimit": 0,
        "failedJobsHistoryLimit": 0,
    }
    obj = a_cronjob(**settings)
    assert cronjob.defaulting_patch(obj) == []
    assert cronjob.default(obj) == obj


def test_null_is_unset_and_each_field_is_defaulted_alone() -> None:
    obj = a_cronjob(suspend=True)
    obj["spec"]["successfulJobsHistoryLimit"] = None
    assert cronjob.defaulting_patch(obj) == [
        {"op": "add", "path": "/spec/concurrencyPolicy", "value": "Allow"},
        {"op": "add", "path": "/spec/successfulJobsHistoryLimit", "value": 3},
        {"op": "add", "path": "/spec/failedJobsHistoryLimit", "value": 1},
    ]


def test_no_spec_no_patch() -> None:
    assert cronjob.defaulting_patch({"metadata": {"name": "x"}}) == []


def test_mutating_webhook_answers_with_a_base64_json_patch() -> None:
    review = routed(cronjob.MUTATE_PATH, a_review(a_cronjob(suspend=True)))
    assert review["apiVersion"] == "admission.k8s.io/v1"
    assert review["kind"] == "AdmissionReview"
    assert review["response"]["uid"] == "7f0b2c1e-0000-4000-8000-000000000001"
    assert review["response"]["allowed"] is True
    assert {op["path"]: op["value"] for op in decoded_patch(review)} == {
        "/spec/concurrencyPolicy": "Allow",
        "/spec/successfulJobsHistoryLimit": 3,
        "/spec/failedJobsHistoryLimit": 1,
    }


def test_mutating_webhook_sends_no_patch_when_nothing_is_unset() -> None:
    review = routed(cronjob.MUTATE_PATH, a_review(cronjob.default(a_cronjob())))
    assert review["response"] == {"uid": review["response"]["uid"], "allowed": True}


# --- CronJob validation -------------------------------------------------------------------


def test_a_valid_cronjob_has_no_errors() -> None:
    assert cronjob.validate_create(a_cronjob(timeZone="Europe/Berlin")) == []
    review = routed(cronjob.VALIDATE_PATH, a_review(a_cronjob()))
    assert review["response"]["allowed"] is True


def test_messages_are_the_api_servers_field_errors() -> None:
    (error,) = cronjob.validate_create(a_cronjob(schedule="60 * * * *"))
    assert (
        str(error) == 'spec.schedule: Invalid value: "60 * * * *": minute 60 is out of range 0-59'
    )
    assert error.body() == 'Invalid value: "60 * * * *": minute 60 is out of range 0-59'
    (error,) = cronjob.validate_create(a_cronjob(concurrencyPolicy="Sometimes"))
    assert str(error) == (
        'spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: '
        '"Allow", "Forbid", "Replace", "BufferOne"'
    )
    (error,) = cronjob.validate_create(a_cronjob(failedJobsHistoryLimit=-1))
    assert str(error) == (
        "spec.failedJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0"
    )


BAD_INPUTS = [
    pytest.param({"schedule": ""}, "spec.schedule: Required value", id="empty-schedule"),
    pytest.param({"schedule": None}, "spec.schedule: Required value", id="no-schedule"),
    pytest.param({"schedule": 5}, "spec.schedule: Invalid value: 5", id="schedule-not-string"),
    pytest.param(
        {"schedule": "* * * * 7"},
        'spec.schedule: Invalid value: "* * * * 7": day of week 7 is out of range 0-6',
        id="dow-7",
    ),
    pytest.param(
        {"schedule": "60 * * * *"},
        'spec.schedule: Invalid value: "60 * * * *": minute 60',
        id="minute-60",
    ),
    pytest.param(
        {"schedule": "@reboot"},
        'spec.schedule: Invalid value: "@reboot": @reboot is not supported',
        id="reboot",
    ),
    pytest.param(
        {"schedule": "0 * * * * *"},
        'spec.schedule: Invalid value: "0 * * * * *": expected 5 fields',
        id="six-fields",
    ),
    pytest.param(
        {"schedule": "TZ=UTC * * * * *"},
        'spec.schedule: Invalid value: "TZ=UTC * * * * *": a time zone prefix is not allowed',
        id="tz-prefix",
    ),
    pytest.param(
        {"timeZone": "Mars/Olympus"},
        'spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone',
        id="unknown-zone",
    ),
    pytest.param(
        {"timeZone": "Local"},
        'spec.timeZone: Invalid value: "Local": the controller\'s local zone is not allowed',
        id="local-zone",
    ),
    pytest.param(
        {"timeZone": ""}, 'spec.timeZone: Invalid value: "": must not be empty', id="empty-zone"
    ),
    pytest.param(
        {"successfulJobsHistoryLimit": -1},
        "spec.successfulJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
        id="negative-successful",
    ),
    pytest.param(
        {"failedJobsHistoryLimit": -3},
        "spec.failedJobsHistoryLimit: Invalid value: -3",
        id="negative-failed",
    ),
    pytest.param(
        {"startingDeadlineSeconds": -1},
        "spec.startingDeadlineSeconds: Invalid value: -1",
        id="negative-deadline",
    ),
    pytest.param(
        {"startingDeadlineSeconds": True},
        "spec.startingDeadlineSeconds: Invalid value: true: must be a whole number",
        id="bool-deadline",
    ),
    pytest.param(
        {"concurrencyPolicy": "Sometimes"},
        'spec.concurrencyPolicy: Unsupported value: "Sometimes"',
        id="unknown-policy",
    ),
    pytest.param(
        {"catchUpPolicy": "Some"},
        'spec.catchUpPolicy: Unsupported value: "Some": supported values: "Latest", "All"',
        id="unknown-catch-up-policy",
    ),
    pytest.param(
        {"suspend": "yes"},
        'spec.suspend: Invalid value: "yes": must be true or false',
        id="suspend",
    ),
    pytest.param({"jobTemplate": None}, "spec.jobTemplate: Required value", id="no-template"),
    pytest.param(
        {"concurrencyGroup": {"whenFull": "Wait"}},
        "spec.concurrencyGroup.name: Required value",
        id="group-without-name",
    ),
    pytest.param(
        {"concurrencyGroup": {"name": "../../../../api/v1/namespaces/kube-system/secrets/s"}},
        'spec.concurrencyGroup.name: Invalid value: "../../../../api/v1/namespaces/kube-system/'
        'secrets/s": a lowercase RFC 1123 subdomain must consist of',
        id="group-name-not-a-name",
    ),
    pytest.param(
        {"concurrencyGroup": {"name": "g", "whenFull": "Later"}},
        'spec.concurrencyGroup.whenFull: Unsupported value: "Later": supported values: '
        '"Wait", "Skip"',
        id="group-when-full",
    ),
]


@pytest.mark.parametrize(("spec", "message"), BAD_INPUTS)
def test_each_bad_input_is_one_error_naming_its_field(spec: dict[str, Any], message: str) -> None:
    (error,) = cronjob.validate_create(a_cronjob(**spec))
    assert str(error).startswith(message), str(error)


@pytest.mark.parametrize("length", [52, 53])
def test_names_longer_than_52_are_refused_on_create_only(length: int) -> None:
    obj = a_cronjob(name="n" * length)
    errors = messages(cronjob.validate_create(obj))
    if length == 52:
        assert errors == []
    else:
        assert errors == [
            f'metadata.name: Invalid value: "{"n" * 53}": must be no more than 52 characters '
            "(the Job name appends an 11-character suffix and must fit 63)"
        ]
    assert cronjob.validate_update(obj, obj) == [], "older, longer names stay updatable"


def test_all_errors_are_reported_together() -> None:
    obj = a_cronjob(
        name="n" * 60,
        schedule="60 * * * 7",
        timeZone="Mars/Olympus",
        concurrencyPolicy="Sometimes",
        successfulJobsHistoryLimit=-1,
        failedJobsHistoryLimit=-2,
    )
    errors = cronjob.validate_create(obj)
    assert [(e.field, e.type) for e in errors] == [
        ("metadata.name", admission.ErrorType.INVALID),
        ("spec.schedule", admission.ErrorType.INVALID),
        ("spec.schedule", admission.ErrorType.INVALID),
        ("spec.timeZone", admission.ErrorType.INVALID),
        ("spec.concurrencyPolicy", admission.ErrorType.NOT_SUPPORTED),
        ("spec.successfulJobsHistoryLimit", admission.ErrorType.INVALID),
        ("spec.failedJobsHistoryLimit", admission.ErrorType.INVALID),
    ]
    assert "minute 60" in errors[1].detail
    assert "day of week 7" in errors[2].detail


def test_validating_webhook_denies_with_one_422_status_listing_every_error() -> None:
    obj = a_cronjob(schedule="60 * * * 7", successfulJobsHistoryLimit=-1)
    response = routed(cronjob.VALIDATE_PATH, a_review(obj))["response"]
    assert response["allowed"] is False
    status = response["status"]
    assert (status["code"], status["reason"], status["status"]) == (422, "Invalid", "Failure")
    errors = cronjob.validate_create(obj)
    assert status["message"] == (
        'CronJob.batch.tutorial.kubebuilder.io "backup" is invalid: ['
        + ", ".join(str(e) for e in errors)
        + "]"
    )
    assert status["details"]["kind"] == "CronJob"
    assert status["details"]["name"] == "backup"
    assert status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": e.body(), "field": e.field} for e in errors
    ]


def test_one_error_is_not_bracketed() -> None:
    response = routed(cronjob.VALIDATE_PATH, a_review(a_cronjob(schedule="60 * * * *")))
    assert response["response"]["status"]["message"] == (
        'CronJob.batch.tutorial.kubebuilder.io "backup" is invalid: spec.schedule: Invalid '
        'value: "60 * * * *": minute 60 is out of range 0-59'
    )


def test_a_tz_prefix_is_tolerated_on_update_only_when_the_old_schedule_had_one() -> None:
    old = a_cronjob(schedule="TZ=UTC 0 * * * *")
    new = a_cronjob(schedule="CRON_TZ=Europe/Berlin 30 * * * *")
    assert cronjob.validate_update(new, old) == []
    assert messages(cronjob.validate_update(new, a_cronjob())) == messages(
        cronjob.validate_create(new)
    )
    assert len(cronjob.validate_create(new)) == 1
    errors = messages(cronjob.validate_update(a_cronjob(schedule="TZ=Mars/X 60 * * * *"), old))
    assert len(errors) == 2
    assert "minute 60" in errors[0]
    assert "in the TZ= prefix: unknown time zone" in errors[1].replace('"Mars/X": ', "")
    both = a_cronjob(schedule="TZ=UTC 0 * * * *", timeZone="UTC")
    assert messages(cronjob.validate_update(both, old)) == [
        'spec.schedule: Invalid value: "TZ=UTC 0 * * * *": cannot use both spec.timeZone and '
        "a TZ or CRON_TZ prefix in the schedule"
    ]


@given(st.text(alphabet=" */,-0123456789?@aeyhlryMONJANdiTZ=", max_size=24))
def test_schedule_errors_are_exactly_the_schedule_modules(expression: str) -> None:
    errors = cronjob.validate_create(a_cronjob(schedule=expression))
    if expression == "":
        assert [e.type for e in errors] == [admission.ErrorType.REQUIRED]
    else:
        expected = schedule.validate_schedule(expression)
        assert len(errors) == len(expected)
        for error, message in zip(errors, expected, strict=True):
            assert message == f"spec.schedule: {json.dumps(expression)}: {error.detail}"


def test_delete_is_admitted_and_a_wrong_kind_is_a_400() -> None:
    delete = a_review(None, operation="DELETE", old=a_cronjob(schedule="60 * * * *"))
    assert routed(cronjob.VALIDATE_PATH, delete)["response"]["allowed"] is True
    wrong = a_review(a_cronjob(), kind=("batch", "v1", "Job"))
    response = routed(cronjob.VALIDATE_PATH, wrong)["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert "Job.batch/v1" in response["status"]["message"]
    no_object = a_review(None)
    assert routed(cronjob.MUTATE_PATH, no_object)["response"]["status"]["code"] == 400


# --- ConfigDeployment validation -------------------------------------------------------------


def a_config_deployment(name: str = "web", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "configMap": "web-settings",
        "replicas": 2,
        "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}},
    }
    body.update(spec)
    return {
        "apiVersion": "apps.tutorial.kubebuilder.io/v1",
        "kind": "ConfigDeployment",
        "metadata": {"name": name},
        "spec": {key: value for key, value in body.items() if value is not None},
    }


def test_a_valid_config_deployment_has_no_errors() -> None:
    assert configdeployment.validate_create(a_config_deployment()) == []


def test_config_deployment_errors_are_reported_together() -> None:
    obj = a_config_deployment(
        name="n" * 64,
        configMap="Web_Settings",
        replicas=-1,
        template={"spec": {"containers": [], "restartPolicy": "OnFailure"}},
    )
    assert [str(e).partition(": ")[0] for e in configdeployment.validate_create(obj)] == [
        "metadata.name",
        "spec.configMap",
        "spec.replicas",
        "spec.template.spec.restartPolicy",
    ]
    assert configdeployment.validate_update(obj, obj)[0].field == "spec.configMap"
    review = a_review(obj, kind=("apps.tutorial.kubebuilder.io", "v1", "ConfigDeployment"))
    status = routed(configdeployment.VALIDATE_PATH, review)["response"]["status"]
    assert status["message"].startswith(
        f'ConfigDeployment.apps.tutorial.kubebuilder.io "{"n" * 64}" is invalid: ['
    )
    assert "RFC 1123 subdomain" in status["message"]


def test_config_deployment_requires_a_config_map_and_a_template() -> None:
    obj = a_config_deployment(configMap=None, template=None)
    assert messages(configdeployment.validate_create(obj)) == [
        "spec.configMap: Required value: the name of a ConfigMap in the same namespace (or "
        "name a Secret in spec.secrets)",
        "spec.template: Required value: the pods to run",
    ]


def test_config_deployment_may_name_secrets_instead_of_a_config_map() -> None:
    obj = a_config_deployment(configMap=None, secrets=[{"name": "db", "keys": ["password"]}])
    assert configdeployment.validate_create(obj) == []
    with_both = a_config_deployment(configMapKeys=["app.yaml"], secrets=[{"name": "db"}])
    assert configdeployment.validate_create(with_both) == []


def test_config_deployment_sources_errors_name_their_fields() -> None:
    obj = a_config_deployment(
        configMap=None,
        configMapKeys=["ok"],
        secrets=[
            {"name": "Not_A_Name", "keys": ["good", "bad key", "good"]},
            {"name": "db", "keys": []},
            {"name": "db"},
            {"keys": ["x"]},
        ],
    )
    assert [error.field for error in configdeployment.validate_create(obj)] == [
        "spec.configMapKeys",
        "spec.secrets[0].name",
        "spec.secrets[0].keys[1]",
        "spec.secrets[0].keys[2]",
        "spec.secrets[1].keys",
        "spec.secrets[2].name",
        "spec.secrets[3].name",
    ]
    too_many = a_config_deployment(
        configMapKeys=[f"k{i}" for i in range(65)],
        secrets=[{"name": f"s{i}"} for i in range(17)],
    )
    assert messages(configdeployment.validate_create(too_many)) == [
        "spec.configMapKeys: Invalid value: 65: must name at most 64 keys",
        "spec.secrets: Invalid value: 17: must name at most 16 Secrets",
    ]


# --- AdmissionReview parsing -----------------------------------------------------------------


def _without(review: dict[str, Any], key: str) -> dict[str, Any]:
    broken = copy.deepcopy(review)
    del broken["request"][key]
    return broken


MALFORMED_REVIEWS = [
    pytest.param([], id="a-list"),
    pytest.param("review", id="a-string"),
    pytest.param({}, id="empty"),
    pytest.param({**a_review(a_cronjob()), "apiVersion": "admission.k8s.io/v1beta1"}, id="v1beta1"),
    pytest.param({**a_review(a_cronjob()), "request": None}, id="no-request"),
    pytest.param(_without(a_review(a_cronjob()), "uid"), id="no-uid"),
    pytest.param(_without(a_review(a_cronjob()), "kind"), id="no-kind"),
    pytest.param({**a_review(a_cronjob()), "request": {"uid": 1}}, id="uid-not-string"),
    pytest.param(a_review(a_cronjob(), operation="PATCH"), id="unknown-operation"),
    pytest.param(
        {**a_review(None), "request": {**a_review(None)["request"], "object": []}},
        id="object-not-object",
    ),
]


@pytest.mark.parametrize("body", MALFORMED_REVIEWS)
@pytest.mark.parametrize("path", [cronjob.MUTATE_PATH, cronjob.VALIDATE_PATH])
def test_malformed_reviews_are_bad_requests(body: Any, path: str) -> None:
    with pytest.raises(BadRequest):
        routed(path, body)


# --- conversion ------------------------------------------------------------------------------


def a_stored_cronjob(schedule_: str, **metadata: Any) -> dict[str, Any]:
    """A v1 CronJob with everything the server adds: status, conditions, unknown fields."""
    obj = cronjob.default(a_cronjob(schedule=schedule_, timeZone="Europe/Berlin"))
    obj["metadata"].update(
        uid="0c4b1f3a-1111-4000-8000-000000000002",
        resourceVersion="4711",
        generation=3,
        creationTimestamp="2026-01-02T03:04:05Z",
        labels={"team": "data"},
        **metadata,
    )
    obj["spec"]["futureField"] = {"kept": True}
    obj["status"] = {
        "active": [{"apiVersion": "batch/v1", "kind": "Job", "name": "backup-1", "uid": "u"}],
        "lastScheduleTime": "2026-01-02T04:00:00Z",
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "Scheduling",
                "message": "next run at 05:00",
                "lastTransitionTime": "2026-01-02T03:04:06Z",
                "observedGeneration": 3,
            },
            {
                "type": "Degraded",
                "status": "False",
                "reason": "AsExpected",
                "message": "",
                "lastTransitionTime": "2026-01-02T03:04:06Z",
            },
        ],
        "observedGeneration": 3,
        "observedSchedule": {
            "schedule": schedule_,
            "timeZone": "Europe/Berlin",
            "since": "2026-01-02T03:04:05Z",
        },
    }
    return obj


def test_a_five_field_schedule_becomes_its_fields_without_the_stars() -> None:
    v2 = conversion.to_v2(a_stored_cronjob("*/5 9-17 * * MON-FRI"))
    assert v2["apiVersion"] == V2
    assert v2["spec"]["schedule"] == {"minute": "*/5", "hour": "9-17", "dayOfWeek": "MON-FRI"}
    assert ANNOTATION not in v2["metadata"].get("annotations", {})
    assert conversion.to_v1(v2) == a_stored_cronjob("*/5 9-17 * * MON-FRI")


def test_everything_but_the_schedule_is_copied_status_conditions_included() -> None:
    v1 = a_stored_cronjob("0 3 * * *")
    v2 = conversion.to_v2(v1)
    for key in ("metadata", "status", "kind"):
        assert v2[key] == v1[key]
    assert {k: v for k, v in v2["spec"].items() if k != "schedule"} == {
        k: v for k, v in v1["spec"].items() if k != "schedule"
    }


def test_the_observed_schedule_is_the_v1_string_in_both_versions() -> None:
    """Five v2 fields cannot say @every, and status has no annotation to keep it in."""
    v1 = a_stored_cronjob("@every 90m")
    v2 = conversion.to_v2(v1)
    assert v2["status"]["observedSchedule"] == v1["status"]["observedSchedule"]
    assert v2["status"]["observedSchedule"]["schedule"] == "@every 90m"
    assert conversion.to_v1(v2) == v1


ROUND_TRIPS = [
    "* * * * *",
    "0 * * * *",
    "*/15 6-18/2 1,15 JAN-JUN ?",
    "@hourly",
    "@daily",
    "@yearly",
    "@every 1h30m",
    "0  3 * * *",
    "0\t3 * * *",
    " 0 3 * * *",
    "",
    "obvious error schedule",
    "60 * * * * *",
]


@pytest.mark.parametrize("expression", ROUND_TRIPS)
def test_v1_round_trips_through_v2(expression: str) -> None:
    v1 = a_stored_cronjob(expression)
    v2 = conversion.convert(v1, V2)
    assert conversion.convert(v2, V1) == v1
    exact = expression in ROUND_TRIPS[:3]
    assert (ANNOTATION in v2["metadata"].get("annotations", {})) is not exact


def test_other_annotations_survive_and_an_empty_map_is_not_left_behind() -> None:
    v1 = a_stored_cronjob("@weekly", annotations={"owner": "ops"})
    v2 = conversion.to_v2(v1)
    assert v2["metadata"]["annotations"] == {"owner": "ops", ANNOTATION: "@weekly"}
    assert conversion.to_v1(v2) == v1
    bare = a_stored_cronjob("@weekly")
    assert "annotations" not in conversion.to_v1(conversion.to_v2(bare))["metadata"]


def test_a_macro_reads_as_its_fields_and_every_as_no_fields() -> None:
    hourly = conversion.to_v2(a_stored_cronjob("@hourly"))
    assert hourly["spec"]["schedule"] == {"minute": "0"}
    assert hourly["metadata"]["annotations"][ANNOTATION] == "@hourly"
    every = conversion.to_v2(a_stored_cronjob("@every 90m"))
    assert every["spec"]["schedule"] == {}
    assert every["metadata"]["annotations"][ANNOTATION] == "@every 90m"


def test_changed_v2_fields_win_over_the_annotation() -> None:
    v2 = conversion.to_v2(a_stored_cronjob("@hourly"))
    v2["spec"]["schedule"] = {"minute": "30"}
    v1 = conversion.to_v1(v2)
    assert v1["spec"]["schedule"] == "30 * * * *"
    assert "annotations" not in v1["metadata"]
    # Explicit stars are the same fields: the annotation still applies.
    v2["spec"]["schedule"] = {"minute": "0", "hour": "*"}
    assert conversion.to_v1(v2)["spec"]["schedule"] == "@hourly"


def test_a_stale_annotation_on_v1_is_dropped() -> None:
    v1 = a_stored_cronjob("0 3 * * *", annotations={ANNOTATION: "@hourly"})
    v2 = conversion.to_v2(v1)
    assert "annotations" not in v2["metadata"]
    assert conversion.to_v1(v2)["spec"]["schedule"] == "0 3 * * *"


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"minute": "0"},
        {"minute": "*/5", "hour": "9-17", "dayOfWeek": "1-5"},
        {"minute": "0", "hour": "0", "dayOfMonth": "1", "month": "JAN", "dayOfWeek": "?"},
    ],
)
def test_v2_round_trips_through_v1(fields: dict[str, str]) -> None:
    v2 = conversion.to_v2(a_stored_cronjob("* * * * *"))
    v2["spec"]["schedule"] = fields
    assert conversion.convert(conversion.convert(v2, V1), V2) == v2


def test_a_v2_star_reads_back_unset() -> None:
    v2 = conversion.to_v2(a_stored_cronjob("* * * * *"))
    v2["spec"]["schedule"] = {"minute": "0", "hour": "*"}
    v1 = conversion.to_v1(v2)
    assert v1["spec"]["schedule"] == "0 * * * *"
    assert conversion.to_v2(v1)["spec"]["schedule"] == {"minute": "0"}


@given(st.text(alphabet=" \t*/,-0123456789?@everyhdailMONJAN", max_size=30))
def test_any_v1_schedule_survives_a_v2_round_trip(expression: str) -> None:
    v1 = a_cronjob(schedule=expression)
    assert conversion.to_v1(conversion.to_v2(v1)) == v1


@pytest.mark.parametrize("macro", sorted(schedule.MACROS))
def test_macro_fields_fire_when_the_macro_does(macro: str) -> None:
    start = datetime(2025, 12, 30, 12, 34, tzinfo=UTC)

    def times(expression: str) -> list[datetime]:
        parsed, t, found = schedule.parse_schedule(expression), start, []
        for _ in islice(iter(int, 1), 30):
            nxt = parsed.next_after(t)
            assert nxt is not None
            found.append(nxt)
            t = nxt
        return found

    assert times(schedule.MACROS[macro]) == times(macro)
    assert times(macro)[1] - times(macro)[0] >= timedelta(hours=1)


def test_same_version_is_a_copy() -> None:
    v1 = a_stored_cronjob("@daily")
    copied = conversion.convert(v1, V1)
    assert copied == v1
    assert copied is not v1


@pytest.mark.parametrize(
    ("obj", "desired", "problem"),
    [
        ({"apiVersion": "batch/v1", "kind": "Job"}, V2, "cannot convert batch/v1 Job"),
        ({"apiVersion": V1, "kind": "CronJob"}, "batch.tutorial.kubebuilder.io/v3", "to batch"),
        ({"apiVersion": V1, "kind": "CronJob", "spec": {"schedule": 5}}, V2, "must be a string"),
        ({"apiVersion": V2, "kind": "CronJob", "spec": {"schedule": "x"}}, V1, "an object"),
        (
            {"apiVersion": V2, "kind": "CronJob", "spec": {"schedule": {"hour": 3}}},
            V1,
            "spec.schedule.hour must be a string",
        ),
    ],
)
def test_what_cannot_be_converted_fails_the_review(
    obj: dict[str, Any], desired: str, problem: str
) -> None:
    with pytest.raises(conversion.ConversionError, match=problem):
        conversion.convert(obj, desired)
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "u-1", "desiredAPIVersion": desired, "objects": [obj]},
    }
    response = routed(conversion.PATH, body)["response"]
    assert response["uid"] == "u-1"
    assert response["result"]["status"] == "Failure"
    assert problem in response["result"]["message"]


def test_conversion_review_converts_every_object_and_echoes_the_uid() -> None:
    objects = [a_stored_cronjob("@hourly"), a_stored_cronjob("5 4 * * *")]
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "u-2", "desiredAPIVersion": V2, "objects": objects},
    }
    review = routed(conversion.PATH, body)
    assert review["apiVersion"] == "apiextensions.k8s.io/v1"
    assert review["kind"] == "ConversionReview"
    assert review["response"]["uid"] == "u-2"
    assert review["response"]["result"] == {"status": "Success"}
    assert review["response"]["convertedObjects"] == [conversion.to_v2(o) for o in objects]


@pytest.mark.parametrize(
    "body",
    [
        [],
        {},
        {"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview"},
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"},
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": {}},
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "u", "desiredAPIVersion": V2},
        },
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "u", "desiredAPIVersion": V2, "objects": [1]},
        },
    ],
)
def test_malformed_conversion_reviews_are_bad_requests(body: Any) -> None:
    with pytest.raises(BadRequest):
        routed(conversion.PATH, body)


# --- manifests and flags ---------------------------------------------------------------------


def test_committed_webhook_manifests_are_what_the_generator_writes() -> None:
    assert manifests.main(["--check"]) == 0, "run python -m cronjob_operator.webhooks.manifests"


def test_every_configured_path_is_served_and_every_route_configured() -> None:
    configured = {
        webhook["clientConfig"]["service"]["path"]
        for configuration in manifests.configurations()
        for webhook in configuration["webhooks"]
    }
    conversion_path = crdgen.webhook_patches()[0][1][0]["value"]["webhook"]["clientConfig"]
    assert set(manifests.routes()) == configured | {conversion_path["service"]["path"]}
    assert cronjob.MUTATE_PATH in configured
    assert {cronjob.VALIDATE_PATH, configdeployment.VALIDATE_PATH} <= configured


def test_local_manifests_point_everything_at_the_url() -> None:
    objects = manifests.local_manifests("https://127.0.0.1:9443/", b"CA PEM")
    crd, mutating, validating = objects
    bundle = base64.b64encode(b"CA PEM").decode()
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/convert",
        "caBundle": bundle,
    }
    assert all(v["served"] for v in crd["spec"]["versions"])
    for configuration in (mutating, validating):
        for webhook in configuration["webhooks"]:
            assert webhook["clientConfig"]["url"].startswith("https://127.0.0.1:9443/")
            assert webhook["clientConfig"]["caBundle"] == bundle
            assert webhook["matchPolicy"] == "Equivalent"
            assert webhook["sideEffects"] == "None"
    assert yaml.safe_load_all(manifests.render_yaml(objects))


def test_config_default_enables_the_webhook_pieces() -> None:
    default = yaml.safe_load((ROOT / "config/default/kustomization.yaml").read_text())
    assert {"../webhook", "../webhook-certs"} <= set(default["resources"])
    assert default["components"] == ["../crd/patches"]
    assert [p["path"] for p in default["patches"]] == ["manager_webhook_patch.yaml"]
    patch = yaml.safe_load((ROOT / "config/default/manager_webhook_patch.yaml").read_text())
    assert "--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs" in [
        op["value"] for op in patch
    ]


def test_webhook_flags() -> None:
    args = cli.build_parser().parse_args(["run"])
    assert (args.webhook_port, args.webhook_cert_dir, args.enable_http2) == (
        9443,
        "/tmp/k8s-webhook-server/serving-certs",
        False,
    )
    args = cli.build_parser().parse_args(["run", "--webhook-port=0", "--enable-http2"])
    assert (args.webhook_port, args.enable_http2) == (0, True)


@pytest.mark.parametrize("port", ["-1", "65536", "https"])
def test_a_bad_webhook_port_is_refused(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["run", f"--webhook-port={port}"])
    assert "--webhook-port" in capsys.readouterr().err


def test_catch_up_buffer_one_and_the_skip_accounting_convert_losslessly() -> None:
    """Issue 23's fields are the same in both versions: copied, never touched."""
    v1 = a_stored_cronjob("*/5 * * * *")
    v1["spec"].update(catchUpPolicy="All", concurrencyPolicy="BufferOne")
    v1["status"].update(
        bufferedRun="2026-01-02T03:05:00Z",
        skippedRuns={"accountedThrough": "2026-01-02T03:00:00Z", "bufferFull": 2},
    )
    v2 = conversion.convert(v1, V2)
    assert v2["spec"]["catchUpPolicy"] == "All"
    assert v2["spec"]["concurrencyPolicy"] == "BufferOne"
    assert v2["status"]["skippedRuns"] == v1["status"]["skippedRuns"]
    assert conversion.convert(v2, V1) == v1
    v2_native = conversion.convert(v1, V2)
    assert conversion.convert(conversion.convert(v2_native, V1), V2) == v2_native


def test_the_concurrency_group_and_its_status_convert_losslessly() -> None:
    """Issue 40's fields are the same in both versions: copied, never touched."""
    v1 = a_stored_cronjob("*/5 * * * *")
    v1["spec"]["concurrencyGroup"] = {"name": "warehouse", "whenFull": "Skip"}
    v1["status"].update(
        waitingForGroup={"group": "warehouse", "scheduledTime": "2026-01-02T03:05:00Z"},
        skippedRuns={"accountedThrough": "2026-01-02T03:00:00Z", "groupFull": 2},
    )
    v2 = conversion.convert(v1, V2)
    assert v2["spec"]["concurrencyGroup"] == v1["spec"]["concurrencyGroup"]
    assert v2["status"]["waitingForGroup"] == v1["status"]["waitingForGroup"]
    assert conversion.convert(v2, V1) == v1


# --- spec.schedules (issue 23 item 4) -------------------------------------------------


def test_schedules_are_validated_entry_by_entry_with_the_index() -> None:
    errors = messages(
        cronjob.validate_create(
            a_cronjob(schedule=None, schedules=["0 * * * *", "61 * * * *", "@every 1h"])
        )
    )
    assert errors == [
        'spec.schedules[1]: Invalid value: "61 * * * *": minute 61 is out of range 0-59',
        'spec.schedules[2]: Invalid value: "@every 1h": @every is a delay from the last run, '
        "not times, so it cannot be one of several schedules; use spec.schedule for it",
    ]
    assert (
        cronjob.validate_create(a_cronjob(schedule=None, schedules=["0 9 * * 1-5", "@daily"])) == []
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"schedules": ["0 * * * *"]},
            'spec.schedules: Invalid value: "<1 schedules>": cannot be set with spec.schedule',
        ),
        ({"schedule": None}, "spec.schedule: Required value"),
        (
            {"schedule": None, "schedules": []},
            'spec.schedules: Invalid value: "<0 schedules>": must list 1 to 10 schedules',
        ),
        (
            {"schedule": None, "schedules": ["TZ=UTC 0 * * * *"]},
            'spec.schedules[0]: Invalid value: "TZ=UTC 0 * * * *": a TZ= or CRON_TZ= prefix',
        ),
    ],
)
def test_exactly_one_of_schedule_and_schedules(spec: dict[str, Any], message: str) -> None:
    (error,) = cronjob.validate_create(a_cronjob(**spec))
    assert str(error).startswith(message), str(error)


def test_the_stagger_is_checked_against_the_union() -> None:
    (error,) = cronjob.validate_create(
        a_cronjob(schedule=None, schedules=["0 * * * *", "30 * * * *"], staggerSeconds=1800)
    )
    assert str(error).startswith("spec.staggerSeconds: Invalid value: 1800: must be smaller")


SCHEDULES_ROUND_TRIPS = [
    ["0 9 * * 1-5", "30 12 * * 6"],
    ["@daily", "0 12 * * *"],
    ["0  3 * * *"],
]


@pytest.mark.parametrize("entries", SCHEDULES_ROUND_TRIPS)
def test_schedules_round_trip_through_v2(entries: list[str]) -> None:
    v1 = a_stored_cronjob("x")
    del v1["spec"]["schedule"]
    v1["spec"]["schedules"] = entries
    v2 = conversion.convert(v1, V2)
    assert v2["spec"]["schedules"] == [conversion.schedule_to_v2(e)[0] for e in entries]
    exact = entries == SCHEDULES_ROUND_TRIPS[0]
    assert (batch_v2.V1_SCHEDULES_ANNOTATION in v2["metadata"].get("annotations", {})) is not exact
    assert conversion.convert(v2, V1) == v1


def test_v2_schedules_edited_in_v2_win_over_the_kept_strings() -> None:
    v1 = a_stored_cronjob("x")
    del v1["spec"]["schedule"]
    v1["spec"]["schedules"] = ["@daily", "0 12 * * *"]
    v2 = conversion.convert(v1, V2)
    v2["spec"]["schedules"][0] = {"minute": "15", "hour": "1"}
    back = conversion.convert(v2, V1)
    assert back["spec"]["schedules"] == ["15 1 * * *", "0 12 * * *"]
    assert batch_v2.V1_SCHEDULES_ANNOTATION not in back["metadata"].get("annotations", {})
