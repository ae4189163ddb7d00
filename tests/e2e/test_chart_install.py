"""``helm install`` of dist/chart on the local control plane gives a working operator.

The CRDs are deleted first, so the chart's templates/crd really installs them. Then
``helm install`` puts the release into its namespace; the manager runs out of cluster
(there is no container runtime) with a token of the chart's ServiceAccount, so it has
exactly the chart's RBAC, and runs the sample CronJob from config/samples to a complete
Job with leader election on in the release namespace. ``helm uninstall`` then removes
every object of the release but the CRDs, which stay (``helm.sh/resource-policy: keep``)
with the CronJob in them.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronjob_operator.controllers import configdeployment, cronjob
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.client import RestClient, load_configuration
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controllerutil import parse_time
from cronjob_operator.runtime.leaderelection import LeaderElectionConfig
from cronjob_operator.runtime.manager import Manager, Options
from tests.integration.support import (
    CRD_NAMES,
    REPO,
    Denials,
    RunningManager,
    install_crds,
    spy_on_events,
)
from tests.tools import tool

CHART = REPO / "dist" / "chart"
RELEASE = "cronjob-operator"
NAMESPACE = "cronjob-operator-helm"
SERVICE_ACCOUNT = "cronjob-operator-controller-manager"
CRONJOBS = "cronjobs.batch.tutorial.kubebuilder.io"


class Helm:
    """helm against the control plane, with its own home directories."""

    def __init__(self, control_plane: ControlPlane, home: Path) -> None:
        self.env = {
            "HOME": str(home),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
            "KUBECONFIG": str(control_plane.kubeconfig),
            "PATH": "/usr/bin:/bin",
        }

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [tool("helm"), *args], capture_output=True, text=True, env=self.env, check=False
        )


def release_objects(helm: Helm) -> list[tuple[str, str, str | None]]:
    """(kind, name, namespace) of every object of the release, from its manifest."""
    manifest = helm("get", "manifest", RELEASE, "-n", NAMESPACE)
    assert manifest.returncode == 0, manifest.stderr
    return [
        (doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace"))
        for doc in yaml.safe_load_all(manifest.stdout)
        if doc
    ]


def exists(control_plane: ControlPlane, kind: str, name: str, namespace: str | None) -> bool:
    args = ["get", kind, name] + (["-n", namespace] if namespace else [])
    return control_plane.kubectl(*args).returncode == 0


@pytest.fixture
def installed(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Helm]:
    helm = Helm(control_plane, tmp_path / "helm")
    deleted = control_plane.kubectl(
        "delete", "crd", *CRD_NAMES, "--ignore-not-found", "--timeout=120s"
    )
    assert deleted.returncode == 0, deleted.stderr
    try:
        result = helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace")
        assert result.returncode == 0, result.stdout + result.stderr
        yield helm
    finally:
        helm("uninstall", RELEASE, "-n", NAMESPACE, "--ignore-not-found")
        control_plane.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        install_crds(control_plane)  # other tests in this session need them


@pytest.fixture
def manager_as_chart_account(
    control_plane: ControlPlane,
    installed: Helm,
    tmp_path: Path,
    denials: Denials,
) -> Iterator[tuple[RunningManager, FakeClock]]:
    kubeconfig = tmp_path / "manager.kubeconfig"
    control_plane.token_kubeconfig(NAMESPACE, SERVICE_ACCOUNT, kubeconfig)
    options = Options(
        health_probe_bind_address="0",
        leader_election=LeaderElectionConfig(
            name="cronjob-operator.tutorial.kubebuilder.io", namespace=NAMESPACE
        ),
    )
    manager = Manager(RestClient(load_configuration(str(kubeconfig))), options)
    clock = FakeClock()
    events = spy_on_events(manager)
    controllers = {
        "cronjob": cronjob.setup(manager, clock=clock),
        "configdeployment": configdeployment.setup(manager, clock=clock),
    }
    codes: list[int] = []
    thread = threading.Thread(
        target=lambda: codes.append(manager.run(install_signal_handlers=False)), daemon=True
    )
    thread.start()
    try:
        wait_for(
            lambda: manager.elector is not None and manager.elector.is_leader, 60, message="leader"
        )
        yield RunningManager(manager, controllers, thread, events), clock
    finally:
        manager.stop()
        thread.join(60)
        assert codes == [0]


def test_helm_install_runs_a_cronjob_and_uninstall_keeps_only_the_crds(
    control_plane: ControlPlane,
    namespace: str,
    installed: Helm,
    manager_as_chart_account: tuple[RunningManager, FakeClock],
    denials: Denials,
) -> None:
    operator, clock = manager_as_chart_account
    helm = installed
    objects = release_objects(helm)
    assert {kind for kind, _, _ in objects} >= {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
    }
    for name in CRD_NAMES:
        assert exists(control_plane, "crd", name, None), f"the chart did not install {name}"

    sample = yaml.safe_load((REPO / "config" / "samples" / "batch_v1_cronjob.yaml").read_text())
    applied = control_plane.kubectl(
        "apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(sample)
    )
    assert applied.returncode == 0, applied.stderr
    name = sample["metadata"]["name"]

    def get(kind: str, object_name: str) -> dict[str, Any]:
        return control_plane.kubectl_json("get", kind, object_name, "-n", namespace)  # type: ignore[no-any-return]

    created = parse_time(get(CRONJOBS, name)["metadata"]["creationTimestamp"])
    assert created is not None
    scheduled = created.replace(second=0, microsecond=0) + timedelta(minutes=1)
    clock.set(scheduled + timedelta(seconds=1))
    operator.kick("cronjob", namespace, name)
    job = f"{name}-{int(scheduled.timestamp())}"
    wait_for(
        lambda: any(
            c["type"] == "Complete" and c["status"] == "True"
            for c in (get("job", job).get("status") or {}).get("conditions") or []
        ),
        90,
        interval=0.5,
        message=f"{job} complete",
        ignore=(Exception,),
    )
    assert denials.lines == [], "the chart's RBAC lacks a verb the manager needs"
    operator.manager.stop()  # before its RBAC goes
    operator.thread.join(60)

    uninstalled = helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout=120s")
    assert uninstalled.returncode == 0, uninstalled.stderr
    left = [o for o in objects if o[0] != "CustomResourceDefinition" and exists(control_plane, *o)]
    assert left == [], f"helm uninstall left {left}"
    for crd in CRD_NAMES:
        assert exists(control_plane, "crd", crd, None), f"helm uninstall deleted CRD {crd}"
    assert exists(control_plane, CRONJOBS, name, namespace), "the CronJob went with the release"
