"""A status field this release does not know survives its status writes (a downgrade).

During a rolling downgrade the older manager reconciles objects whose stored status
holds a field a newer release added (the CRD installed is the newer one, so the API
server keeps the field). If its status write sent only the fields its own model knows
(a typed status PUT), the field would be erased. Each test adds such a field to a CRD's
status schema (as a newer CRD would), stores a value in it before the manager starts,
waits for a status write the manager made after that (``lastScheduleTime`` of its
first run; ``observedGeneration``), and reads the field back unchanged.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.controllers import configdeployment, cronjob
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.clock import FakeClock
from tests.integration.support import apply, install_crds, running_manager
from tests.integration.test_configdeployment import config_deployment_body
from tests.integration.test_cronjob_controller import CRONJOBS, cronjob_object

CONFIG_DEPLOYMENTS = "configdeployments.apps.tutorial.kubebuilder.io"
NEWER_FIELD = "addedByANewerRelease"
NEWER_VALUE = {"kept": "through the older manager's write"}
TIMEOUT = 60.0


@pytest.fixture(scope="module", autouse=True)
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


@contextlib.contextmanager
def a_newer_status_field(control_plane: ControlPlane, crd: str) -> Iterator[None]:
    """``NEWER_FIELD`` in every served version's status schema for the block, removed
    afterwards (the session's other tests see the CRD as installed)."""
    versions = control_plane.kubectl_json("get", "crd", crd)["spec"]["versions"]
    paths = [
        f"/spec/versions/{index}/schema/openAPIV3Schema/properties/status/properties/{NEWER_FIELD}"
        for index in range(len(versions))
    ]
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    add = [{"op": "add", "path": path, "value": schema} for path in paths]
    control_plane.kubectl("patch", "crd", crd, "--type=json", "-p", json.dumps(add), check=True)
    try:
        yield
    finally:
        remove = [{"op": "remove", "path": path} for path in paths]
        control_plane.kubectl(
            "patch", "crd", crd, "--type=json", "-p", json.dumps(remove), check=True
        )


def store_the_newer_field(control_plane: ControlPlane, resource: str, ns: str, name: str) -> None:
    """Write ``NEWER_FIELD`` into the stored status, retried until the API server's
    schema has the field (a CRD change reaches its handlers shortly after the write)."""
    patch = json.dumps({"status": {NEWER_FIELD: NEWER_VALUE}})

    def stored() -> bool:
        control_plane.kubectl(
            "patch", resource, name, "-n", ns, "--subresource=status", "--type=merge", "-p", patch
        )
        return status_of(control_plane, resource, ns, name).get(NEWER_FIELD) == NEWER_VALUE

    wait_for(stored, TIMEOUT, interval=0.5, message=f"{NEWER_FIELD} stored on {ns}/{name}")


def status_of(control_plane: ControlPlane, resource: str, ns: str, name: str) -> dict[str, Any]:
    obj = control_plane.kubectl_json("get", resource, name, "-n", ns)
    return dict(obj.get("status") or {})


def test_the_cronjob_status_write_keeps_a_field_the_manager_does_not_know(
    control_plane: ControlPlane, namespace: str
) -> None:
    with a_newer_status_field(control_plane, CRONJOBS):
        apply(control_plane, cronjob_object("newer", namespace, schedule="*/5 * * * *"))
        store_the_newer_field(control_plane, CRONJOBS, namespace, "newer")
        assert "lastScheduleTime" not in status_of(control_plane, CRONJOBS, namespace, "newer")
        # Past the next */5 time: the first run is due, and its status write is awaited.
        clock = FakeClock(datetime.now(UTC) + timedelta(minutes=6))
        setups = {"cronjob": lambda mgr: cronjob.setup(mgr, clock=clock)}
        with running_manager(control_plane, setups):
            wait_for(
                lambda: (
                    "lastScheduleTime" in status_of(control_plane, CRONJOBS, namespace, "newer")
                ),
                TIMEOUT,
                message="the manager's status write recording the first run",
            )
        status = status_of(control_plane, CRONJOBS, namespace, "newer")
    assert status.get(NEWER_FIELD) == NEWER_VALUE, status


def test_the_configdeployment_status_write_keeps_a_field_the_manager_does_not_know(
    control_plane: ControlPlane, namespace: str
) -> None:
    with a_newer_status_field(control_plane, CONFIG_DEPLOYMENTS):
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": namespace},
            "data": {"mode": "a"},
        }
        body = config_deployment_body(namespace, "web", "settings")
        body.update(apiVersion="apps.tutorial.kubebuilder.io/v1", kind="ConfigDeployment")
        apply(control_plane, config_map)
        apply(control_plane, body)
        store_the_newer_field(control_plane, CONFIG_DEPLOYMENTS, namespace, "web")
        generation = control_plane.kubectl_json("get", CONFIG_DEPLOYMENTS, "web", "-n", namespace)[
            "metadata"
        ]["generation"]
        assert "observedGeneration" not in status_of(
            control_plane, CONFIG_DEPLOYMENTS, namespace, "web"
        )
        with running_manager(control_plane, {"configdeployment": configdeployment.setup}):
            wait_for(
                lambda: (
                    status_of(control_plane, CONFIG_DEPLOYMENTS, namespace, "web").get(
                        "observedGeneration"
                    )
                    == generation
                ),
                TIMEOUT,
                message="the manager's status write observing the generation",
            )
        status = status_of(control_plane, CONFIG_DEPLOYMENTS, namespace, "web")
    assert status.get(NEWER_FIELD) == NEWER_VALUE, status
