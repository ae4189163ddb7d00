"""The worked example (examples/config_from_annotation.py) on the real local control plane.

The controller runs in-process as its own ``setup`` wires it; the test acts as a user
would (kubectl apply, annotate, delete) and polls with deadlines for what the guide
promises: the ConfigMap appears, follows the annotation, goes when the annotation goes,
and goes with its Deployment, which the controller, running throughout, never fights by
creating it again (a watch counts its uids).
"""

from __future__ import annotations

import json
from typing import Any

from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.controller import Request
from examples.config_from_annotation import ANNOTATION, setup
from tests.integration.creations import caught_up, watching_creations
from tests.integration.support import ReconcileWitness, apply, running_manager

TIMEOUT = 60.0


def deployment(namespace: str, name: str, config: dict[str, str]) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {ANNOTATION: json.dumps(config)},
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
        },
    }


def config_data(control_plane: ControlPlane, namespace: str, name: str) -> dict[str, str] | None:
    """The ConfigMap's data, or None while it does not exist."""
    result = control_plane.kubectl("get", "configmap", name, "-n", namespace, "-o", "json")
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
        return None
    return json.loads(result.stdout).get("data") or {}  # type: ignore[no-any-return]


def test_config_map_follows_the_annotation(control_plane: ControlPlane, namespace: str) -> None:
    with running_manager(control_plane, {"example": setup}, namespace=namespace):
        apply(control_plane, deployment(namespace, "web", {"color": "blue"}))
        wait_for(
            lambda: config_data(control_plane, namespace, "web-config") == {"color": "blue"},
            TIMEOUT,
            message="web-config created from the annotation",
        )
        apply(control_plane, deployment(namespace, "web", {"color": "green"}))
        wait_for(
            lambda: config_data(control_plane, namespace, "web-config") == {"color": "green"},
            TIMEOUT,
            message="web-config updated to the new annotation",
        )
        removed = control_plane.kubectl(
            "annotate", "deployment", "web", "-n", namespace, f"{ANNOTATION}-"
        )
        assert removed.returncode == 0, removed.stderr
        wait_for(
            lambda: config_data(control_plane, namespace, "web-config") is None,
            TIMEOUT,
            message="web-config deleted with the annotation",
        )


def test_a_deleted_deployment_takes_its_config_map_and_gets_no_new_one(
    control_plane: ControlPlane, namespace: str
) -> None:
    """The controller keeps running while the Deployment is deleted in the foreground (it
    stays, being deleted, until the collector deleted the ConfigMap, whose delete brings a
    reconcile): the ConfigMap goes with it and is created exactly once (one uid)."""
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
    with (
        watching_creations(control_plane, configmaps) as creations,
        running_manager(control_plane, {"example": setup}, namespace=namespace) as running,
    ):
        apply(control_plane, deployment(namespace, "api", {"mode": "fast"}))
        wait_for(
            lambda: config_data(control_plane, namespace, "api-config") == {"mode": "fast"},
            TIMEOUT,
            message="api-config created",
        )
        deleted = control_plane.kubectl(
            "delete", "deployment", "api", "-n", namespace, "--cascade=foreground", "--wait=true"
        )
        assert deleted.returncode == 0, deleted.stderr
        witness = running.controllers["example"].reconciler
        assert isinstance(witness, ReconcileWitness)
        request = Request(namespace, "api")
        before = witness.started(request)
        running.kick("example", namespace, "api")  # a reconcile after the Deployment is gone
        wait_for(lambda: witness.finished_since(request, before), TIMEOUT, message="reconcile")
        wait_for(
            lambda: config_data(control_plane, namespace, "api-config") is None,
            TIMEOUT,
            message="api-config garbage-collected with its Deployment",
        )
        caught_up(creations, lambda name: apply(control_plane, config_map(namespace, name)))
        assert creations.counts()["api-config"] == 1, "the ConfigMap was created again"


def config_map(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
    }
