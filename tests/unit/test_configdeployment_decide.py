"""Unit tests of the ConfigDeployment controller's pure logic (no cluster)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from cronjob_operator.controllers.configdeployment import decide
from cronjob_operator.controllers.configdeployment.view import (
    ConfigDeploymentView,
    config_map_missing,
    secret_missing,
)
from cronjob_operator.runtime import controllerutil, objects
from cronjob_operator.runtime.controllerutil import find_condition

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
UID = "0b6e4c34-3c1c-4c2d-9b0a-5f0e2c1d9a11"


def make_config_deployment(replicas: int | None = 2, image: str = "busybox:1.36") -> objects.Obj:
    spec: dict[str, Any] = {
        "configMap": "settings",
        "template": {
            "metadata": {"labels": {"app": "web"}, "annotations": {"team": "a"}},
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": image,
                        "command": ["sleep", "3600"],
                        "env": [{"name": "GREETING", "value": "hi"}],
                        "ports": [{"containerPort": 8080}],
                        "resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}},
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
                    }
                ],
                "volumes": [{"name": "config", "configMap": {"name": "settings"}}],
            },
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    frozen: objects.Obj = objects.freeze(
        {
            "apiVersion": "apps.tutorial.kubebuilder.io/v1",
            "kind": "ConfigDeployment",
            "metadata": {"name": "web", "namespace": "ns", "uid": UID, "generation": 3},
            "spec": spec,
        }
    )
    return frozen


def as_stored(desired: dict[str, Any]) -> objects.Obj:
    """``desired`` as the API server returns it after defaulting and canonicalising."""
    dep = copy.deepcopy(desired)
    dep["metadata"].update(
        uid="dep-uid",
        resourceVersion="1234",
        generation=1,
        creationTimestamp="2025-01-01T00:00:00Z",
        annotations={**dep["metadata"]["annotations"], "deployment.kubernetes.io/revision": "1"},
    )
    spec = dep["spec"]
    spec.update(
        revisionHistoryLimit=10,
        progressDeadlineSeconds=600,
        strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
    )
    spec["strategy"]["rollingUpdate"]["maxSurge"] = "25%"
    template = spec["template"]
    template["metadata"]["creationTimestamp"] = None
    pod = template["spec"]
    pod.update(
        restartPolicy="Always",
        terminationGracePeriodSeconds=30,
        dnsPolicy="ClusterFirst",
        securityContext={},
        schedulerName="default-scheduler",
    )
    for container in pod["containers"]:
        container.update(
            terminationMessagePath="/dev/termination-log",
            terminationMessagePolicy="File",
            imagePullPolicy="IfNotPresent",
        )
        for port in container.get("ports", []):
            port["protocol"] = "TCP"
        container["resources"]["requests"] = {"cpu": "500m", "memory": "1Gi"}
    for volume in pod["volumes"]:
        volume["configMap"]["defaultMode"] = 420
    dep["status"] = {
        "observedGeneration": 1,
        "replicas": 2,
        "updatedReplicas": 2,
        "readyReplicas": 2,
        "availableReplicas": 2,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
        ],
    }
    frozen: objects.Obj = objects.freeze(dep)
    return frozen


def test_short_hash_is_the_status_form() -> None:
    full = "0123456789abcdef" * 4
    assert decide.short_hash(full) == full[: decide.SHORT_HASH_LENGTH]


class TestDesiredDeployment:
    def test_shape(self) -> None:
        cd = make_config_deployment()
        dep = decide.desired_deployment(cd, "f" * 64)
        assert dep["metadata"]["name"] == "web"
        assert dep["metadata"]["namespace"] == "ns"
        assert dep["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "apps.tutorial.kubebuilder.io/v1",
                "kind": "ConfigDeployment",
                "name": "web",
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        spec = dep["spec"]
        assert spec["replicas"] == 2
        assert spec["selector"] == {"matchLabels": {decide.SELECTOR_LABEL: "web"}}
        meta = spec["template"]["metadata"]
        assert meta["labels"] == {"app": "web", decide.SELECTOR_LABEL: "web"}
        assert meta["annotations"] == {"team": "a", decide.CONFIG_HASH_ANNOTATION: "f" * 64}
        assert spec["template"]["spec"] == objects.thaw(cd["spec"]["template"]["spec"])
        assert decide.rolled_out_hash(dep) == "f" * 64

    def test_replicas_default_to_one(self) -> None:
        dep = decide.desired_deployment(make_config_deployment(replicas=None), "0" * 64)
        assert dep["spec"]["replicas"] == 1

    def test_zero_replicas_stay_zero(self) -> None:
        dep = decide.desired_deployment(make_config_deployment(replicas=0), "0" * 64)
        assert dep["spec"]["replicas"] == 0

    def test_does_not_share_state_with_the_config_deployment(self) -> None:
        cd = make_config_deployment()
        dep = decide.desired_deployment(cd, "0" * 64)
        dep["spec"]["template"]["spec"]["containers"][0]["image"] = "changed"
        assert cd["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"

    def test_controlled_by(self) -> None:
        cd = make_config_deployment()
        dep = decide.desired_deployment(cd, "0" * 64)
        assert controllerutil.is_controlled_by(dep, cd)
        dep["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
        assert not controllerutil.is_controlled_by(dep, cd)
        dep["metadata"]["ownerReferences"] = []
        assert not controllerutil.is_controlled_by(dep, cd)


OLD_HASH = "a" * 64
NEW_HASH = "b" * 64


def view_of(
    existing: objects.Obj | None,
    *,
    owned: bool = True,
    content_hash: str | None = NEW_HASH,
    missing: tuple[str, ...] = (),
) -> ConfigDeploymentView:
    """A view of ``make_config_deployment()``; ``missing`` names the sources not found."""
    sources = {
        "configmap": config_map_missing("settings", "ns"),
        "secret": secret_missing(0, "token", "ns"),
    }
    return ConfigDeploymentView(
        make_config_deployment(),
        existing,
        owned,
        None if missing else content_hash,
        tuple(sources[name] for name in missing),
    )


def stored(content_hash: str, replicas: int = 2) -> objects.Obj:
    return as_stored(
        decide.desired_deployment(make_config_deployment(replicas=replicas), content_hash)
    )


def not_ours() -> objects.Obj:
    dep = copy.deepcopy(objects.thaw(stored(NEW_HASH)))
    dep["metadata"]["ownerReferences"] = []
    frozen: objects.Obj = objects.freeze(dep)
    return frozen


CREATED = f"Created Deployment web with config hash {NEW_HASH[:10]}"
ROLLED = f"Rolling out Deployment web: config hash {OLD_HASH[:10]} -> {NEW_HASH[:10]}"
NOT_FOUND = "spec.configMap: ConfigMap 'settings' not found in namespace 'ns'"
KEPT = f"; Deployment web keeps running with config hash {OLD_HASH[:10]}"

# (view, the write's verb or None, the reason and message start of the write's event or of
# the problem, whether the plan reports the existing Deployment)
DECISIONS = {
    "another owner: not touched": (
        view_of(not_ours(), owned=False, content_hash=None),
        None, "DeploymentNotOwned", "Deployment ns/web exists and is not controlled", False,
    ),
    "no Deployment, ConfigMap missing: nothing written": (
        view_of(None, missing=("configmap",)),
        None, "ConfigMapNotFound", NOT_FOUND, False,
    ),
    "Deployment kept while its ConfigMap is missing": (
        view_of(stored(OLD_HASH), missing=("configmap",)),
        None, "ConfigMapNotFound", f"{NOT_FOUND}; create it there", True,
    ),
    "every missing source is named, the first gives the reason": (
        view_of(None, missing=("secret", "configmap")),
        None, "SecretNotFound", "spec.secrets[0].name: Secret 'token' not found", False,
    ),
    "no Deployment: created": (
        view_of(None), "create", "DeploymentCreated", CREATED, False,
    ),
    "up to date: kept, nothing written": (
        view_of(stored(NEW_HASH)), None, None, None, True,
    ),
    "new content: rolled out": (
        view_of(stored(OLD_HASH)), "update", "RolledOut", ROLLED, True,
    ),
    "same content, scaled by someone: updated": (
        view_of(stored(NEW_HASH, replicas=5)),
        "update", "DeploymentUpdated", "Updated Deployment web", True,
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("view", "verb", "reason", "message", "reports_existing"),
    list(DECISIONS.values()),
    ids=list(DECISIONS),
)
def test_decide(
    view: ConfigDeploymentView,
    verb: str | None,
    reason: str | None,
    message: str | None,
    reports_existing: bool,
) -> None:
    plan = decide.decide(view)
    assert plan.deployment is (view.existing if reports_existing else None)
    found: decide.Problem | decide.Write | None = plan.problem
    if verb is not None:
        assert plan.problem is None
        assert plan.write is not None
        assert plan.write.verb == verb
        found = plan.write
    else:
        assert plan.write is None
    if reason is None or message is None:
        assert found is None
        return
    assert found is not None
    assert found.reason == reason
    assert found.message.startswith(message), found.message


def test_decide_names_what_keeps_running_while_a_source_is_missing() -> None:
    plan = decide.decide(view_of(stored(OLD_HASH), missing=("configmap",)))
    assert plan.problem is not None
    assert plan.problem.message.endswith(KEPT)


def test_decide_writes_the_desired_deployment() -> None:
    created = decide.decide(view_of(None)).write
    assert created is not None
    assert created.deployment == decide.desired_deployment(make_config_deployment(), NEW_HASH)
    existing = stored(OLD_HASH)
    updated = decide.decide(view_of(existing)).write
    assert updated is not None
    desired = decide.desired_deployment(make_config_deployment(), NEW_HASH)
    assert updated.deployment == decide.updated_deployment(existing, desired)


class TestNeedsUpdate:
    def desired(self, **kwargs: Any) -> dict[str, Any]:
        return decide.desired_deployment(make_config_deployment(**kwargs), "a" * 64)

    def test_false_for_the_defaulted_deployment_the_server_returns(self) -> None:
        desired = self.desired()
        assert not decide.needs_update(as_stored(desired), desired)

    def test_false_when_others_add_labels_and_template_annotations(self) -> None:
        desired = self.desired()
        stored = objects.thaw(as_stored(desired))
        stored["metadata"]["labels"]["extra"] = "x"
        stored["spec"]["template"]["metadata"]["annotations"][
            "kubectl.kubernetes.io/restartedAt"
        ] = "2025-01-01T00:00:00Z"
        assert not decide.needs_update(stored, desired)

    def test_true_when_replicas_change(self) -> None:
        stored = as_stored(self.desired(replicas=2))
        assert decide.needs_update(stored, self.desired(replicas=3))

    def test_true_when_the_hash_changes(self) -> None:
        stored = as_stored(self.desired())
        assert decide.needs_update(
            stored, decide.desired_deployment(make_config_deployment(), "b" * 64)
        )

    def test_true_when_the_image_changes(self) -> None:
        stored = as_stored(self.desired())
        assert decide.needs_update(stored, self.desired(image="busybox:1.37"))

    def test_true_when_someone_scales_the_deployment(self) -> None:
        desired = self.desired()
        stored = objects.thaw(as_stored(desired))
        stored["spec"]["replicas"] = 5
        assert decide.needs_update(stored, desired)

    def test_true_when_someone_edits_the_template(self) -> None:
        desired = self.desired()
        stored = objects.thaw(as_stored(desired))
        stored["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:latest"
        assert decide.needs_update(stored, desired)

    def test_true_when_someone_removes_the_selector_label_from_the_pods(self) -> None:
        desired = self.desired()
        stored = objects.thaw(as_stored(desired))
        del stored["spec"]["template"]["metadata"]["labels"][decide.SELECTOR_LABEL]
        assert decide.needs_update(stored, desired)

    def test_true_when_a_field_is_removed_from_the_spec(self) -> None:
        stored = as_stored(self.desired())
        cd = objects.thaw(make_config_deployment())
        del cd["spec"]["template"]["spec"]["containers"][0]["command"]
        assert decide.needs_update(stored, decide.desired_deployment(cd, "a" * 64))

    def test_true_when_a_quantity_changes_value(self) -> None:
        stored = as_stored(self.desired())
        cd = objects.thaw(make_config_deployment())
        cd["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
        assert decide.needs_update(stored, decide.desired_deployment(cd, "a" * 64))

    def test_updated_deployment_keeps_server_fields_and_sets_ours(self) -> None:
        stored = as_stored(self.desired())
        desired = self.desired(replicas=4, image="busybox:1.37")
        body = decide.updated_deployment(stored, desired)
        assert body["metadata"]["resourceVersion"] == "1234"
        assert body["spec"]["strategy"]["type"] == "RollingUpdate"
        assert body["spec"]["replicas"] == 4
        assert body["spec"]["template"] == desired["spec"]["template"]
        assert "status" not in body
        assert not decide.needs_update(as_stored(body), desired)


@pytest.mark.parametrize(
    ("want", "have", "equal"),
    [
        ("0.5", "500m", True),
        ("1024Mi", "1Gi", True),
        ("1000", "1k", True),
        ("1e3", "1k", True),
        ("1M", "1Mi", False),
        ("100m", "0.2", False),
    ],
)
def test_quantities_compare_by_value(want: str, have: str, equal: bool) -> None:
    desired = {"resources": {"limits": {"cpu": want}}}
    stored = {"resources": {"limits": {"cpu": have}}}
    assert decide._contained(desired, stored) is equal


def test_strings_outside_resources_compare_exactly() -> None:
    assert not decide._contained({"env": [{"value": "1000"}]}, {"env": [{"value": "1k"}]})


def test_zero_values_match_absent_fields() -> None:
    assert decide._contained({"args": [], "readOnly": False, "x": {}}, {})
    assert not decide._contained({"readOnly": True}, {})


class TestUpdateStatus:
    def run(
        self, deployment: objects.Obj | None, problem: decide.Problem | None = None
    ) -> dict[str, Any]:
        status: dict[str, Any] = {}
        decide.update_status(status, generation=3, deployment=deployment, problem=problem, now=NOW)
        return status

    def conditions(self, status: dict[str, Any]) -> dict[str, tuple[str, str]]:
        return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}

    def test_mirrors_a_rolled_out_deployment(self) -> None:
        stored = as_stored(decide.desired_deployment(make_config_deployment(), "c" * 64))
        status = self.run(stored)
        assert status["observedGeneration"] == 3
        assert status["replicas"] == 2
        assert status["readyReplicas"] == 2
        assert status["configMapHash"] == "c" * decide.SHORT_HASH_LENGTH
        assert self.conditions(status) == {
            "Available": ("True", "MinimumReplicasAvailable"),
            "Progressing": ("False", "RolloutComplete"),
            "Degraded": ("False", "AsExpected"),
        }

    def test_rolling_out(self) -> None:
        stored = objects.thaw(
            as_stored(decide.desired_deployment(make_config_deployment(), "c" * 64))
        )
        stored["status"].update(replicas=3, updatedReplicas=1, readyReplicas=2)
        status = self.run(stored)
        assert self.conditions(status)["Progressing"] == ("True", "RollingOut")
        assert status["readyReplicas"] == 2

    def test_new_generation_not_yet_observed_is_progressing(self) -> None:
        stored = objects.thaw(
            as_stored(decide.desired_deployment(make_config_deployment(), "c" * 64))
        )
        stored["metadata"]["generation"] = 2
        assert self.conditions(self.run(stored))["Progressing"] == ("True", "RollingOut")

    def test_progress_deadline_exceeded_is_degraded(self) -> None:
        stored = objects.thaw(
            as_stored(decide.desired_deployment(make_config_deployment(), "c" * 64))
        )
        stored["status"]["conditions"][1] = {
            "type": "Progressing",
            "status": "False",
            "reason": "ProgressDeadlineExceeded",
            "message": "ReplicaSet web-1 has timed out progressing.",
        }
        conditions = self.conditions(self.run(stored))
        assert conditions["Progressing"] == ("False", "ProgressDeadlineExceeded")
        assert conditions["Degraded"] == ("True", "ProgressDeadlineExceeded")

    def test_config_map_missing_without_a_deployment(self) -> None:
        problem = decide.Problem("ConfigMapNotFound", "spec.configMap: not found")
        status = self.run(None, problem)
        assert "configMapHash" not in status
        assert status["replicas"] == 0
        assert self.conditions(status) == {
            "Available": ("False", "ConfigMapNotFound"),
            "Progressing": ("False", "ConfigMapNotFound"),
            "Degraded": ("True", "ConfigMapNotFound"),
        }

    def test_config_map_missing_keeps_the_last_hash(self) -> None:
        stored = as_stored(decide.desired_deployment(make_config_deployment(), "d" * 64))
        status = self.run(stored, decide.Problem("ConfigMapNotFound", "gone"))
        assert status["configMapHash"] == "d" * decide.SHORT_HASH_LENGTH
        assert self.conditions(status)["Degraded"] == ("True", "ConfigMapNotFound")
        assert self.conditions(status)["Available"] == ("True", "MinimumReplicasAvailable")

    def test_degraded_clears_and_unchanged_status_is_equal(self) -> None:
        stored = as_stored(decide.desired_deployment(make_config_deployment(), "d" * 64))
        status: dict[str, Any] = {}
        problem = decide.Problem("ConfigMapNotFound", "gone")
        decide.update_status(status, generation=3, deployment=stored, problem=problem, now=NOW)
        decide.update_status(status, generation=3, deployment=stored, problem=None, now=NOW)
        degraded = find_condition(status["conditions"], "Degraded")
        assert degraded is not None
        assert (degraded["status"], degraded["reason"]) == ("False", "AsExpected")
        before = copy.deepcopy(status)
        later = NOW.replace(hour=9)
        decide.update_status(status, generation=3, deployment=stored, problem=None, now=later)
        assert status == before
