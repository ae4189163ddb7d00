"""The API models: samples and server objects round-trip, defaults, validation, readers."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

import cronjob_operator.api
from cronjob_operator.api import apps_v1, batch_v1, core
from cronjob_operator.runtime.objects import freeze

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "config" / "samples"


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((SAMPLES / name).read_text())  # type: ignore[no-any-return]


def dump(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")  # type: ignore[no-any-return]


def assert_contains(actual: Any, expected: Any, path: str = "") -> None:
    """Every field of ``expected`` is in ``actual`` with the same value."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        for key, value in expected.items():
            assert key in actual, f"{path}.{key} was dropped"
            assert_contains(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), path
        assert len(actual) == len(expected), path
        for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
            assert_contains(got, want, f"{path}[{index}]")
    else:
        assert actual == expected, path


def cronjob(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schedule": "*/5 * * * *",
        "jobTemplate": {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "c", "image": "busybox"}],
                        "restartPolicy": "Never",
                    }
                }
            }
        },
    }
    body.update(spec)
    return {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {"name": "example", "namespace": "default"},
        "spec": body,
    }


def config_deployment(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "configMap": "settings",
        "template": {"spec": {"containers": [{"name": "app", "image": "busybox"}]}},
    }
    body.update(spec)
    return {
        "apiVersion": "apps.tutorial.kubebuilder.io/v1",
        "kind": "ConfigDeployment",
        "metadata": {"name": "example"},
        "spec": body,
    }


# A CronJob as the API server returns it: defaults filled in, server metadata, status.
SERVER_CRONJOB: dict[str, Any] = {
    "apiVersion": "batch.tutorial.kubebuilder.io/v1",
    "kind": "CronJob",
    "metadata": {
        "name": "cronjob-sample",
        "namespace": "default",
        "uid": "d521e207-55ef-43ee-b1fd-a3338ac6a985",
        "resourceVersion": "213",
        "generation": 2,
        "creationTimestamp": "2026-12-02T12:21:06Z",
        "labels": {"app.kubernetes.io/name": "cronjob-operator"},
        "annotations": {"note": "x"},
        "finalizers": ["example.com/keep"],
        "managedFields": [
            {
                "apiVersion": "batch.tutorial.kubebuilder.io/v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:schedule": {}}},
                "manager": "kubectl",
                "operation": "Update",
                "time": "2026-12-02T12:21:06Z",
            }
        ],
    },
    "spec": {
        "schedule": "*/1 * * * *",
        "timeZone": "Europe/Berlin",
        "startingDeadlineSeconds": 60,
        "concurrencyPolicy": "Forbid",
        "suspend": False,
        "successfulJobsHistoryLimit": 0,
        "failedJobsHistoryLimit": 1,
        "jobTemplate": {
            "metadata": {"labels": {"team": "a"}, "annotations": {"b": "c"}},
            "spec": {
                "backoffLimit": 2,
                "ttlSecondsAfterFinished": 100,
                "completionMode": "Indexed",
                "completions": 3,
                "podFailurePolicy": {"rules": [{"action": "Ignore", "onExitCodes": {}}]},
                "template": {
                    "metadata": {"labels": {"pod": "x"}},
                    "spec": {
                        "restartPolicy": "OnFailure",
                        "affinity": {"nodeAffinity": {"anything": [1, 2]}},
                        "securityContext": {"runAsNonRoot": True},
                        "nodeSelector": {"disk": "ssd"},
                        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                        "volumes": [
                            {"name": "cfg", "configMap": {"name": "c", "defaultMode": 420}},
                            {"name": "p", "projected": {"sources": [{"serviceAccountToken": {}}]}},
                        ],
                        "containers": [
                            {
                                "name": "hello",
                                "image": "busybox",
                                "args": ["/bin/sh", "-c", "date"],
                                "env": [
                                    {"name": "A", "value": "1"},
                                    {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
                                ],
                                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                "resources": {
                                    "limits": {"cpu": "500m", "memory": "64Mi"},
                                    "requests": {"cpu": 1},
                                },
                                "volumeMounts": [{"name": "cfg", "mountPath": "/etc/c"}],
                                "livenessProbe": {"httpGet": {"port": "http", "path": "/"}},
                            }
                        ],
                    },
                },
            },
        },
    },
    "status": {
        "active": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "cronjob-sample-1796213160",
                "namespace": "default",
                "resourceVersion": "300",
                "uid": "4d8f8d7e-0000-4000-8000-000000000001",
            }
        ],
        "lastScheduleTime": "2026-12-02T12:26:00Z",
        "lastSuccessfulTime": "2026-12-02T12:25:07Z",
        "observedGeneration": 2,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "observedGeneration": 2,
                "lastTransitionTime": "2026-12-02T12:21:07Z",
                "reason": "JobsRunning",
                "message": "",
            }
        ],
    },
}


# --- public names ------------------------------------------------------------------------


def test_public_names() -> None:
    assert sorted(cronjob_operator.api.__all__) == [
        "CONFIG_DEPLOYMENT",
        "CRONJOB",
        "ConfigDeployment",
        "CronJob",
    ]


def test_kinds() -> None:
    assert batch_v1.CRONJOB.api_version == "batch.tutorial.kubebuilder.io/v1"
    assert (batch_v1.CRONJOB.kind, batch_v1.CRONJOB.plural) == ("CronJob", "cronjobs")
    assert apps_v1.CONFIG_DEPLOYMENT.api_version == "apps.tutorial.kubebuilder.io/v1"
    assert apps_v1.CONFIG_DEPLOYMENT.plural == "configdeployments"
    assert apps_v1.CONFIG_DEPLOYMENT.namespaced


# --- round trips -----------------------------------------------------------------------


def test_server_object_round_trips_exactly() -> None:
    parsed = batch_v1.CronJob.model_validate(SERVER_CRONJOB)
    assert dump(parsed) == SERVER_CRONJOB


def test_frozen_cache_object_is_read() -> None:
    parsed = batch_v1.CronJob.model_validate(freeze(copy.deepcopy(SERVER_CRONJOB)))
    assert dump(parsed) == SERVER_CRONJOB


def test_cronjob_sample_round_trips() -> None:
    sample = load("batch_v1_cronjob.yaml")
    parsed = batch_v1.CronJob.model_validate(sample)
    assert parsed.metadata.name == "cronjob-sample"
    assert parsed.spec.schedule == "*/1 * * * *"
    assert (
        parsed.spec.job_template.spec.template.spec.restart_policy is core.RestartPolicy.ON_FAILURE
    )
    assert_contains(dump(parsed), sample)


def test_config_deployment_sample_round_trips() -> None:
    sample = load("apps_v1_configdeployment.yaml")
    parsed = apps_v1.ConfigDeployment.model_validate(sample)
    config_map = load("configdeployment_configmap.yaml")
    assert parsed.spec.config_map == config_map["metadata"]["name"]
    assert_contains(dump(parsed), sample)
    assert dump(parsed)["spec"] == sample["spec"]


def test_samples_kustomization_lists_every_sample() -> None:
    kustomization = load("kustomization.yaml")
    assert sorted(kustomization["resources"]) == sorted(
        path.name for path in SAMPLES.glob("*.yaml") if path.name != "kustomization.yaml"
    )


def test_config_deployment_server_object_round_trips() -> None:
    obj = config_deployment(replicas=2)
    obj["metadata"].update(uid="u", resourceVersion="7", generation=3)
    obj["status"] = {
        "observedGeneration": 3,
        "configMapHash": "5f3a9c2b1d",
        "replicas": 2,
        "readyReplicas": 1,
        "conditions": [
            {
                "type": "Degraded",
                "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "reason": "ConfigMapNotFound",
                "message": "configmap settings not found",
            }
        ],
    }
    assert dump(apps_v1.ConfigDeployment.model_validate(obj)) == obj


def test_unknown_fields_are_ignored_on_read() -> None:
    obj = cronjob(futureField={"a": 1})
    obj["status"] = {"somethingNew": True}
    obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["newThing"] = 1
    parsed = batch_v1.CronJob.model_validate(obj)
    dumped = dump(parsed)
    assert "futureField" not in dumped["spec"]
    assert dumped["status"] == {}


def test_models_build_from_python_names() -> None:
    spec = batch_v1.CronJobSpec(
        schedule="@hourly",
        job_template=core.JobTemplateSpec(
            spec=core.JobSpec(
                template=core.PodTemplateSpec(
                    spec=core.PodSpec(
                        containers=[core.Container(name="c", image="busybox")],
                        restart_policy=core.RestartPolicy.NEVER,
                    )
                )
            )
        ),
    )
    made = batch_v1.CronJob(metadata={"name": "x"}, spec=spec)  # type: ignore[arg-type]
    assert dump(made)["apiVersion"] == "batch.tutorial.kubebuilder.io/v1"
    assert dump(made)["kind"] == "CronJob"
    assert dump(made)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] == "Never"


# --- defaults --------------------------------------------------------------------------


def test_cronjob_defaults() -> None:
    spec = batch_v1.CronJob.model_validate(cronjob()).spec
    assert spec.concurrency_policy is batch_v1.ConcurrencyPolicy.ALLOW
    assert spec.suspend is False
    assert spec.successful_jobs_history_limit == 3
    assert spec.failed_jobs_history_limit == 1
    assert spec.starting_deadline_seconds is None
    assert spec.time_zone is None


def test_explicit_zero_history_limit_is_kept() -> None:
    spec = batch_v1.CronJob.model_validate(cronjob(successfulJobsHistoryLimit=0)).spec
    assert spec.successful_jobs_history_limit == 0


def test_config_deployment_defaults() -> None:
    spec = apps_v1.ConfigDeployment.model_validate(config_deployment()).spec
    assert spec.replicas == 1


# --- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"successfulJobsHistoryLimit": -1}, "successfulJobsHistoryLimit"),
        ({"failedJobsHistoryLimit": -1}, "failedJobsHistoryLimit"),
        ({"failedJobsHistoryLimit": 2**31}, "failedJobsHistoryLimit"),
        ({"failedJobsHistoryLimit": True}, "failedJobsHistoryLimit"),
        ({"failedJobsHistoryLimit": "3"}, "failedJobsHistoryLimit"),
        ({"startingDeadlineSeconds": -5}, "startingDeadlineSeconds"),
        ({"concurrencyPolicy": "Sometimes"}, "concurrencyPolicy"),
        ({"schedule": ""}, "schedule"),
        ({"schedule": "TZ=UTC 0 * * * *"}, "schedule"),
        ({"schedule": "CRON_TZ=UTC 0 * * * *"}, "schedule"),
        ({"schedule": "@reboot"}, "schedule"),
        ({"timeZone": ""}, "timeZone"),
        ({"timeZone": "Local"}, "timeZone"),
        ({"timeZone": "Mars/Phobos"}, "timeZone"),
        ({"timeZone": "+01:00"}, "timeZone"),
    ],
)
def test_invalid_cronjob_spec_is_rejected(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        batch_v1.CronJob.model_validate(cronjob(**spec))
    assert caught.value.errors()[0]["loc"][:2] == ("spec", field)


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "Etc/GMT+5", "America/Port-au-Prince"])
def test_iana_time_zones_are_accepted(zone: str) -> None:
    assert batch_v1.CronJob.model_validate(cronjob(timeZone=zone)).spec.time_zone == zone


def test_missing_job_template_is_rejected() -> None:
    obj = cronjob()
    del obj["spec"]["jobTemplate"]
    with pytest.raises(ValidationError, match="jobTemplate"):
        batch_v1.CronJob.model_validate(obj)


@pytest.mark.parametrize("policy", [None, "Always"])
def test_job_pods_must_not_restart_always(policy: str | None) -> None:
    obj = cronjob()
    pod = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    pod.pop("restartPolicy")
    if policy:
        pod["restartPolicy"] = policy
    with pytest.raises(ValidationError, match="OnFailure or Never"):
        batch_v1.CronJob.model_validate(obj)


def test_long_cronjob_name_is_rejected_with_the_crd_message() -> None:
    obj = cronjob()
    obj["metadata"]["name"] = "a" * 53
    with pytest.raises(ValidationError) as caught:
        batch_v1.CronJob.model_validate(obj)
    assert batch_v1.CRONJOB_NAME_RULE.message in str(caught.value)
    obj["metadata"]["name"] = "a" * 52
    batch_v1.CronJob.model_validate(obj)


@pytest.mark.parametrize(
    "container",
    [
        {"name": "c", "resources": {"limits": {"cpu": 0.5}}},
        {"name": "c", "resources": {"limits": {"cpu": "half"}}},
        {"name": "c", "ports": [{"containerPort": 0}]},
        {"name": "c", "imagePullPolicy": "Sometimes"},
        {"name": ""},
    ],
)
def test_invalid_container_is_rejected(container: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        apps_v1.ConfigDeployment.model_validate(
            config_deployment(template={"spec": {"containers": [container]}})
        )


def test_pod_needs_a_container() -> None:
    with pytest.raises(ValidationError, match="containers"):
        apps_v1.ConfigDeployment.model_validate(
            config_deployment(template={"spec": {"containers": []}})
        )


def test_quantities_accept_integers_and_strings() -> None:
    resources = {"limits": {"cpu": "1.5", "memory": "1Gi"}, "requests": {"cpu": 1}}
    obj = config_deployment(
        template={"spec": {"containers": [{"name": "c", "resources": resources}]}}
    )
    assert (
        dump(apps_v1.ConfigDeployment.model_validate(obj))["spec"]["template"]["spec"][
            "containers"
        ][0]["resources"]
        == resources
    )


@pytest.mark.parametrize(
    "spec",
    [{"replicas": -1}, {"configMap": ""}, {"template": {"spec": {"restartPolicy": "Never"}}}],
)
def test_invalid_config_deployment_is_rejected(spec: dict[str, Any]) -> None:
    if "template" in spec:
        spec["template"]["spec"]["containers"] = [{"name": "c"}]
    with pytest.raises(ValidationError):
        apps_v1.ConfigDeployment.model_validate(config_deployment(**spec))


def test_long_config_deployment_name_is_rejected() -> None:
    obj = config_deployment()
    obj["metadata"]["name"] = "a" * 64
    with pytest.raises(ValidationError, match="63 characters"):
        apps_v1.ConfigDeployment.model_validate(obj)


@pytest.mark.parametrize(
    "change",
    [
        {"status": "Maybe"},
        {"reason": "has spaces"},
        {"reason": ""},
        {"message": "x" * 32769},
        {"type": "-bad"},
    ],
)
def test_invalid_condition_is_rejected(change: dict[str, Any]) -> None:
    condition = {
        "type": "Available",
        "status": "True",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "reason": "Ok",
        "message": "",
    }
    condition.update(change)
    with pytest.raises(ValidationError):
        batch_v1.CronJobStatus.model_validate({"conditions": [condition]})


# --- the controllers' readers -----------------------------------------------------------


def test_read_settings_reads_what_the_reconciler_needs() -> None:
    settings = batch_v1.read_settings(freeze(copy.deepcopy(SERVER_CRONJOB)))
    assert settings == batch_v1.CronJobSettings(
        schedule="*/1 * * * *",
        time_zone="Europe/Berlin",
        starting_deadline_seconds=60,
        concurrency_policy=batch_v1.ConcurrencyPolicy.FORBID,
        suspend=False,
        successful_jobs_history_limit=0,
        failed_jobs_history_limit=1,
    )


def test_read_settings_does_not_fail_on_what_validation_would_reject() -> None:
    obj = cronjob(timeZone="Mars/Phobos", schedule="obvious error schedule")
    obj["spec"]["jobTemplate"] = {"spec": {"template": {"spec": {"containers": "weird"}}}}
    settings = batch_v1.read_settings(obj)
    assert settings.time_zone == "Mars/Phobos"
    assert settings.schedule == "obvious error schedule"
    assert settings.successful_jobs_history_limit is None  # unset: the controller's cap
    assert settings.concurrency_policy is batch_v1.ConcurrencyPolicy.ALLOW


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"concurrencyPolicy": "Sometimes"}, {"concurrency_policy": "Allow"}),
        ({"catchUpPolicy": ["All"]}, {"catch_up_policy": "Latest"}),
        ({"staggerSeconds": False}, {"stagger_seconds": 0}),
        ({"staggerSeconds": "20"}, {"stagger_seconds": batch_v1.Unusable("20")}),
        ({"startingDeadlineSeconds": True}, {"starting_deadline_seconds": None}),
        ({"failurePolicy": {}}, {"pause_after_failures": None, "unusable_pause": None}),
        (
            {"failurePolicy": {"pauseAfterConsecutiveFailures": 0}},
            {"pause_after_failures": None, "unusable_pause": batch_v1.Unusable(0)},
        ),
        (
            {"failurePolicy": 3},
            {"pause_after_failures": None, "unusable_pause": batch_v1.Unusable(3)},
        ),
        ({"failurePolicy": {"pauseAfterConsecutiveFailures": 2}}, {"pause_after_failures": 2}),
        ({"schedules": ["0 * * * *", 5]}, {"schedules": ("0 * * * *", "5")}),
        ({"schedules": "0 * * * *"}, {"schedules": None}),
        (
            {"concurrencyGroup": {"name": "", "whenFull": "Skip"}},
            {"concurrency_group": None, "group_waits": False},
        ),
        ({"concurrencyGroup": "shared"}, {"concurrency_group": None, "group_waits": True}),
        (
            {"concurrencyGroup": {"name": "shared", "whenFull": "Sometimes"}},
            {"concurrency_group": "shared", "group_waits": True},
        ),
        ({"maxScheduledRuns": "3"}, {"max_scheduled_runs": batch_v1.Unusable("3")}),
        ({"maxScheduledRuns": True}, {"max_scheduled_runs": batch_v1.Unusable(True)}),
        ({"maxScheduledRuns": 0}, {"max_scheduled_runs": 0}),
        ({"runStartTimeoutSeconds": "60"}, {"run_start_timeout_seconds": None}),
        ({"runStartTimeoutSeconds": 5}, {"run_start_timeout_seconds": 5}),
    ],
)
def test_read_settings_types_what_was_stored_past_validation(
    spec: dict[str, Any], expected: dict[str, Any]
) -> None:
    settings = batch_v1.settings_of(spec)
    assert {field: getattr(settings, field) for field in expected} == expected


def test_config_deployment_read_settings() -> None:
    obj = config_deployment(replicas=0)
    obj["spec"]["template"] = {"anything": True}
    assert apps_v1.read_settings(freeze(obj)) == apps_v1.ConfigDeploymentSettings(
        config_map="settings", replicas=0
    )
    del obj["spec"]["replicas"]
    assert apps_v1.read_settings(obj).replicas == 1
