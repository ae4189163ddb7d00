"""Hostile objects stored before the schema tightened stop no other CronJob (issue 47, 6).

On the real control plane, without the webhooks: the CRDs' spec and status schemas are
loosened to "anything" (as an older, laxer CRD would have been), a handful of hostile
objects the fuzzer of tests/unit/test_stored_object_fuzz.py found is written through
the API server, and the real CRDs are applied again (the rule tightened; the API server
does not revisit what it stored). A manager runs the CronJob and ConfigDeployment
controllers. A good ``* * * * *`` CronJob beside the hostile objects must get its next
Job, and each hostile object must be reported with a Warning naming it. Before the fix
each of these made every reconcile of it raise (AttributeError, ValueError), retried
with backoff for ever.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from cronjob_operator.api.apps_v1 import CONFIG_DEPLOYMENT
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.api.concurrencygroup_v1 import CONCURRENCY_GROUP
from cronjob_operator.envtest import ControlPlane, wait_for
from tests.integration.support import CRD_NAMES, install_crds, running_manager
from tests.integration.test_bad_input import cronjob_object
from tests.integration.test_configdeployment import config_deployment_body, config_map_body
from tests.integration.test_poison_objects import SETUPS, Bystander, create

ANYTHING = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

REPORTS = {
    ("wrong-template", "InvalidStoredObject"),
    ("schedule-number", "InvalidStoredObject"),
    ("negative-deadline", "InvalidDeadline"),
    ("in-bad-group", "GroupUnusable"),
}
"""(CronJob, the reason of the Warning that reports it)."""


def loosen(control_plane: ControlPlane, crd: str) -> None:
    """Let every version of ``crd`` store any spec and status, without its rules."""
    found = control_plane.kubectl_json("get", "crd", crd)
    operations: list[dict[str, Any]] = []
    for index, version in enumerate(found["spec"]["versions"]):
        root = f"/spec/versions/{index}/schema/openAPIV3Schema"
        operations += [
            {"op": "replace", "path": f"{root}/properties/spec", "value": ANYTHING},
            {"op": "replace", "path": f"{root}/properties/status", "value": ANYTHING},
        ]
        if "x-kubernetes-validations" in version["schema"]["openAPIV3Schema"]:
            operations.append({"op": "remove", "path": f"{root}/x-kubernetes-validations"})
    result = control_plane.kubectl("patch", "crd", crd, "--type=json", "-p", json.dumps(operations))
    assert result.returncode == 0, result.stderr


@pytest.fixture
def loosened(control_plane: ControlPlane) -> Iterator[None]:
    """The CRDs loosened for the block, the real ones applied again after it."""
    install_crds(control_plane)
    for crd in CRD_NAMES:
        loosen(control_plane, crd)
    try:
        yield
    finally:
        install_crds(control_plane)


def hostile_objects(namespace: str) -> list[dict[str, Any]]:
    """What the fuzzer found raising, one of each kind of failure."""
    wrong_template = cronjob_object("wrong-template", namespace, schedule="* * * * *")
    wrong_template["spec"]["jobTemplate"] = "x"  # AttributeError: 'str' has no .get
    schedule_number = cronjob_object("schedule-number", namespace, schedule=7)
    schedule_number["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"] = 5
    negative = cronjob_object("negative-deadline", namespace, schedule="* * * * *")
    negative["spec"]["startingDeadlineSeconds"] = -1  # ValueError in the schedule walk
    in_bad_group = cronjob_object(
        "in-bad-group", namespace, schedule="* * * * *", concurrencyGroup={"name": "bad"}
    )
    bad_group = {
        "apiVersion": CONCURRENCY_GROUP.api_version,
        "kind": "ConcurrencyGroup",
        "metadata": {"name": "bad", "namespace": namespace},
        "spec": {"limit": 1},
    }  # its status.holders: "x", written through the status subresource
    config_deployment = {
        "apiVersion": CONFIG_DEPLOYMENT.api_version,
        "kind": "ConfigDeployment",
        **config_deployment_body(namespace, "bad-secrets", "settings"),
    }
    config_deployment["spec"]["secrets"] = ["db"]  # AttributeError in the Secrets index
    return [wrong_template, schedule_number, negative, in_bad_group, bad_group, config_deployment]


def write_group_status(control_plane: ControlPlane, namespace: str) -> None:
    patch = json.dumps({"status": {"holders": "x"}})
    result = control_plane.kubectl(
        "patch", f"{CONCURRENCY_GROUP.plural}.{CONCURRENCY_GROUP.group}", "bad", "-n", namespace,
        "--subresource=status", "--type=merge", "-p", patch,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


@pytest.mark.usefixtures("loosened")
def test_hostile_stored_objects_are_reported_and_a_good_cronjob_beside_them_runs(
    control_plane: ControlPlane, namespace: str
) -> None:
    settings = config_map_body(namespace, "settings", {"k": "v"})
    create(control_plane, {"apiVersion": "v1", "kind": "ConfigMap", **settings})
    for obj in hostile_objects(namespace):
        create(control_plane, obj)
    write_group_status(control_plane, namespace)
    install_crds(control_plane)  # the rule tightens; what is stored stays
    resource = f"{CRONJOB.plural}.{CRONJOB.group}"
    stored = control_plane.kubectl_json("get", resource, "wrong-template", "-n", namespace)
    assert stored["spec"]["jobTemplate"] == "x", "stored as written, served as stored"

    with running_manager(control_plane, SETUPS) as running:
        bystander = Bystander(control_plane, namespace)
        created = bystander.create("good")
        lateness = bystander.run_after("good", created)
        bystander.deployment_of("good")

        def reported() -> set[tuple[str, str]]:
            asked = running.events.asked()
            return {(name, reason) for name, kind, reason in asked if kind == "Warning"}

        wait_for(lambda: reported() >= REPORTS, 90, message=f"the reports {REPORTS}")
        wait_for(
            lambda: ("bad-secrets", "InvalidStoredObject") in reported(),
            30,
            message="the ConfigDeployment's report",
        )
    print(f"\ngood CronJob beside the hostile objects ran {lateness:.1f}s after its time")
