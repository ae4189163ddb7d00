"""``kubectl apply -k config/default`` on the real kubelet node, with nothing else installed.

config/default plus the same small overlay as test_in_cluster.py (hostNetwork on free
ports, the node's toleration, the API server's address, a privileged namespace), and a
free webhook port: the manager Pods run on the real node, make their own certificate,
inject its CA, and the API server calls their webhooks through the webhook Service at
its endpoints (the local control plane's ``--enable-aggregator-routing``; the
EndpointSlice controller runs with the real node). Then, in order:

* the rollout finishes with one Ready manager (Ready means its certificate is trusted by
  every injected bundle), and its time is printed;
* a CronJob the schema admits is refused by the validating webhook with its field-named
  message; a CronJob written as v2 reads back as v1 and v2 with nothing lost (through
  the conversion webhook in the Pod);
* with ``--webhook-cert-validity`` short (``CERT_VALIDITY``, patched in here), the leader
  renews the certificate while CronJobs are created: no create fails, and the time from
  the new bundle's injection to the Secret's new pair is printed;
* with a second replica (its own ports), the first one is stopped (scaled to 0) while
  CronJobs are created: no create fails (the stopping replica fails readiness and closes
  each connection after its answer for ``--shutdown-delay`` before its server stops);
* ``kubectl delete -k`` leaves no webhook configuration, CRD or namespace behind;
* then the Helm chart with ``webhook.enable`` (the manager's own certificate, its CRDs as
  templates so the conversion webhook names the release's Service) does the same: Ready,
  the field-named refusal, defaults, v2 read back as v1 and v2; ``helm uninstall`` leaves
  no webhook configuration behind and keeps the CRDs (``helm.sh/resource-policy: keep``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronjob_operator.envtest import REAL_NODE_NAME, ControlPlane, wait_for
from cronjob_operator.envtest._components import free_ports
from tests.e2e.test_in_cluster import (
    CRONJOBS,
    DEPLOYMENT,
    MANAGER_LABELS,
    ROLLOUT_TIMEOUT,
    SYSTEM,
    Cluster,
    chart_values_for_the_node,
    diagnose_on_failure,  # noqa: F401 (an autouse fixture: prints what a failure needs)
    helm,
    is_ready,
    overlay_patches,
)
from tests.e2e.test_in_cluster import second_replica as node_second_replica
from tests.images import node_bin_dir, operator_image
from tests.integration.webhook_routing import a_cronjob

V1 = f"cronjobs.v1.{CRONJOBS.partition('.')[2]}"
V2 = f"cronjobs.v2.{CRONJOBS.partition('.')[2]}"
REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "e2e-webhooks"
WEBHOOK_CONFIGURATIONS = ("validatingwebhookconfigurations", "mutatingwebhookconfigurations")
VALIDATING = "cronjob-operator-validating-webhook-configuration"
CERT_VALIDITY = "45s"
"""Renewed after 30 s (two thirds): one rotation within the rotation test's wait."""
SHORT_CERT_VALIDITY = (
    {
        "op": "add",
        "path": "/spec/template/spec/containers/0/args/-",
        "value": f"--webhook-cert-validity={CERT_VALIDITY}",
    },
)


def webhook_port_patches(webhook_port: int) -> list[dict[str, Any]]:
    """The webhook server on a free port (hostNetwork), under the Service's port name."""
    container = "/spec/template/spec/containers/0"
    return [
        {"op": "add", "path": f"{container}/args/-", "value": f"--webhook-port={webhook_port}"},
        {
            "op": "add",
            "path": f"{container}/ports/-",
            "value": {"name": "webhook-server", "containerPort": webhook_port, "protocol": "TCP"},
        },
    ]


def write_default_overlay(
    directory: Path,
    apiserver_port: int,
    deployment_patches: Sequence[dict[str, Any]] = SHORT_CERT_VALIDITY,
) -> Path:
    """config/default for the real node, with ``deployment_patches`` on its Deployment."""
    metrics_port, health_port, webhook_port = free_ports(3)
    patches = overlay_patches(apiserver_port, metrics_port, health_port)
    patches += webhook_port_patches(webhook_port)
    patches += deployment_patches
    return write_kustomization(directory, patches, privileged=True)


def write_kustomization(
    directory: Path, deployment_patches: Sequence[dict[str, Any]], *, privileged: bool
) -> Path:
    """config/default with ``deployment_patches`` on its Deployment; ``privileged`` lowers
    its namespace's Pod Security level, as hostNetwork needs."""
    directory.mkdir(parents=True, exist_ok=True)
    patches = [
        {
            "target": {"kind": "Deployment", "name": DEPLOYMENT},
            "patch": json.dumps(list(deployment_patches)),
        }
    ]
    if privileged:
        level = {
            "op": "replace",
            "path": "/metadata/labels/pod-security.kubernetes.io~1enforce",
            "value": "privileged",
        }
        patches.append(
            {"target": {"kind": "Namespace", "name": SYSTEM}, "patch": json.dumps([level])}
        )
    kustomization = {
        "resources": [os.path.relpath(REPO / "config" / "default", directory)],
        "patches": patches,
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return directory


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    image = operator_image()
    with ControlPlane(real_node=True, node_bin_dir=node_bin_dir()) as plane:
        plane.import_image(image.archive)
        overlay = write_default_overlay(tmp_path_factory.mktemp("overlay"), plane.ports.apiserver)
        yield Cluster(plane, image, overlay)


def test_config_default_rolls_out_a_ready_manager_with_its_own_certificate(
    cluster: Cluster,
) -> None:
    seconds = cluster.roll_out_overlay()
    print(f"\nrollout of config/default (webhooks on, certificate made) took {seconds:.1f}s")
    (pod,) = cluster.manager_pods()
    assert is_ready(pod)
    assert pod["spec"]["nodeName"] == REAL_NODE_NAME
    secret = cluster.get("secret", "cronjob-operator-webhook-server-cert", "-n", SYSTEM)
    assert set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    cluster.plane.kubectl("create", "namespace", NAMESPACE, check=True)


def test_the_validating_webhook_in_the_pod_refuses_with_the_field(cluster: Cluster) -> None:
    assert_refused_with_the_field(cluster)


def assert_refused_with_the_field(cluster: Cluster) -> None:
    bad = json.dumps(a_cronjob("bad", NAMESPACE, "60 * * * *"))
    refused = cluster.plane.kubectl("create", "-f", "-", input=bad)
    assert refused.returncode != 0
    # No schema can say this (the string is a valid pattern): only the webhook in the Pod.
    assert 'The CronJob "bad" is invalid: spec.schedule: Invalid value' in refused.stderr
    assert "minute 60 is out of range 0-59" in refused.stderr


def test_a_v2_cronjob_reads_back_as_v1_and_v2_with_nothing_lost(cluster: Cluster) -> None:
    assert_v2_reads_back_as_v1_and_v2(cluster)


def assert_v2_reads_back_as_v1_and_v2(cluster: Cluster) -> None:
    v2 = a_cronjob("structured", NAMESPACE)
    v2["apiVersion"] = "batch.tutorial.kubebuilder.io/v2"
    v2["spec"]["schedule"] = {"minute": "*/5", "hour": "9-17", "dayOfWeek": "MON-FRI"}
    v2["spec"]["timeZone"] = "Europe/Berlin"
    cluster.plane.kubectl("create", "-f", "-", input=json.dumps(v2), check=True)
    as_v1 = cluster.get(V1, "structured", "-n", NAMESPACE)
    assert as_v1["spec"]["schedule"] == "*/5 9-17 * * MON-FRI"
    assert as_v1["spec"]["successfulJobsHistoryLimit"] == 3  # defaulted
    as_v2 = cluster.get(V2, "structured", "-n", NAMESPACE)
    assert as_v2["spec"]["schedule"] == v2["spec"]["schedule"]
    assert as_v2["spec"]["timeZone"] == "Europe/Berlin"
    assert as_v2["spec"]["jobTemplate"] == as_v1["spec"]["jobTemplate"]


def second_replica(cluster: Cluster) -> dict[str, Any]:
    """test_in_cluster's second Deployment (own ports and selector, same Lease), with its
    own webhook port too, under the Service's port name."""
    second = node_second_replica(cluster)
    (webhook,) = free_ports(1)
    container = second["spec"]["template"]["spec"]["containers"][0]
    container["args"].append(f"--webhook-port={webhook}")
    container["ports"].append(
        {"name": "webhook-server", "containerPort": webhook, "protocol": "TCP"}
    )
    return second


class Creates:
    """CronJobs ``PREFIX-N`` created one after another in a thread, while in ``with``."""

    def __init__(self, cluster: Cluster, prefix: str) -> None:
        self.cluster, self.prefix = cluster, prefix
        self.tried = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            body = json.dumps(a_cronjob(f"{self.prefix}-{self.tried}", NAMESPACE))
            result = self.cluster.plane.kubectl("create", "-f", "-", input=body)
            if result.returncode != 0:
                self.failures.append(result.stderr.strip())
            self.tried += 1

    def ten_more(self, what: str) -> None:
        """Wait until ten more creates have been tried."""
        before = self.tried
        wait_for(lambda: self.tried > before + 10, 60, message=what)

    def __enter__(self) -> Creates:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(60)


def served_state(cluster: Cluster) -> tuple[str, str]:
    """The validating configuration's CA bundle and the Secret's certificate."""
    configuration = cluster.get("validatingwebhookconfiguration", VALIDATING)
    secret = cluster.get("secret", "cronjob-operator-webhook-server-cert", "-n", SYSTEM)
    return configuration["webhooks"][0]["clientConfig"]["caBundle"], secret["data"]["tls.crt"]


def test_admission_keeps_answering_through_a_certificate_rotation(cluster: Cluster) -> None:
    bundle, certificate = served_state(cluster)
    with Creates(cluster, "rotation") as load:
        wait_for(lambda: served_state(cluster)[0] != bundle, 90, interval=0.2, message="bundle")
        injected_at = time.monotonic()
        wait_for(lambda: served_state(cluster)[1] != certificate, 30, interval=0.2, message="pair")
        stored_at = time.monotonic()
        load.ten_more("creates with the new certificate")
    print(f"\nrotation on the node: new bundle injected, then the new pair stored "
          f"{stored_at - injected_at:.1f}s later; {load.tried} creates across it: "
          f"{len(load.failures)} failed")  # fmt: skip
    assert load.failures == []
    assert is_ready(cluster.manager_pods()[0])


def test_admission_keeps_answering_while_a_replica_is_killed(cluster: Cluster) -> None:
    cluster.apply(second_replica(cluster))
    wait_for(lambda: cluster.ready_pods("replica=b"), ROLLOUT_TIMEOUT, message="replica b Ready")
    (first,) = [pod for pod in cluster.ready_pods(MANAGER_LABELS) if "-b-" not in pod]
    started = time.monotonic()
    with Creates(cluster, "kill") as load:
        # scaled to 0 rather than deleted: a replacement would reuse the port (hostNetwork)
        cluster.plane.kubectl(
            "scale", f"deployment/{DEPLOYMENT}", "-n", SYSTEM, "--replicas=0", check=True
        )
        cluster.plane.kubectl(
            "wait", "--for=delete", f"pod/{first}", "-n", SYSTEM, "--timeout=120s",
            check=True, timeout=130,
        )  # fmt: skip
        load.ten_more("creates with one replica left")
    print(f"\n{load.tried} creates over {time.monotonic() - started:.1f}s while one of two "
          f"replicas was stopped: {len(load.failures)} failed")  # fmt: skip
    assert load.failures == []
    cluster.plane.kubectl("delete", "deployment", f"{DEPLOYMENT}-b", "-n", SYSTEM, check=True)


def assert_no_webhook_configuration(cluster: Cluster) -> None:
    for kind in WEBHOOK_CONFIGURATIONS:
        names = [o["metadata"]["name"] for o in cluster.get(kind)["items"]]
        assert not [n for n in names if n.startswith("cronjob-operator-")], names


def test_delete_leaves_no_webhook_configuration_behind(cluster: Cluster) -> None:
    cluster.plane.kubectl(
        "delete", "-k", str(cluster.overlay), "--wait=true", check=True, timeout=300
    )
    assert_no_webhook_configuration(cluster)
    crds = [crd["metadata"]["name"] for crd in cluster.get("crd")["items"]]
    assert not [name for name in crds if "tutorial.kubebuilder.io" in name]
    assert cluster.plane.kubectl("get", "namespace", SYSTEM).returncode != 0


def test_the_chart_with_webhooks_admits_converts_and_uninstalls(
    cluster: Cluster, tmp_path: Path
) -> None:
    """After the kustomize install is deleted: the chart with the manager's certificate."""
    (webhook_port,) = free_ports(1)
    values = [*chart_values_for_the_node(cluster), "--set=webhook.enable=true"]
    values.append(f"--set=webhook.port={webhook_port}")
    install = ["install", "cronjob-operator", str(REPO / "dist" / "chart"), "-n", SYSTEM]
    started = time.monotonic()
    helm(cluster, tmp_path, *install, "--create-namespace", "--wait", "--timeout=3m", *values)
    print(f"\nhelm install --wait with webhook.enable (certificate made) took "
          f"{time.monotonic() - started:.1f}s")  # fmt: skip
    (pod,) = cluster.manager_pods()
    assert is_ready(pod)
    crd = cluster.get("crd", CRONJOBS)
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"], "CA not injected"
    cluster.plane.kubectl("create", "namespace", NAMESPACE)  # left by the tests before
    assert_refused_with_the_field(cluster)
    assert_v2_reads_back_as_v1_and_v2(cluster)

    helm(cluster, tmp_path, "uninstall", "cronjob-operator", "-n", SYSTEM, "--wait")
    assert_no_webhook_configuration(cluster)
    assert cluster.get("crd", CRONJOBS)["metadata"]["name"] == CRONJOBS, "kept on uninstall"
