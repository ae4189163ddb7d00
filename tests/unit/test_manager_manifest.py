"""The manager's Deployment (config/manager/manager.yaml) runs on a real node as it is.

Its image is not pulled when present (Kubernetes' default for a ``:latest`` tag is
Always, so a Pod on a cluster whose images are imported never starts), and it passes the
Pod's name from the downward API as ``POD_NAME``, the leader-election identity
(test_leader_identity.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MANAGER_YAML = Path(__file__).resolve().parents[2] / "config" / "manager" / "manager.yaml"


def manager_container() -> dict[str, Any]:
    documents = list(yaml.safe_load_all(MANAGER_YAML.read_text()))
    deployment = next(doc for doc in documents if doc["kind"] == "Deployment")
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    return next(container for container in containers if container["name"] == "manager")


def test_manager_image_is_not_pulled_when_present() -> None:
    assert manager_container()["imagePullPolicy"] == "IfNotPresent"


def test_manager_gets_its_pod_name_from_the_downward_api() -> None:
    env = {entry["name"]: entry for entry in manager_container()["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
