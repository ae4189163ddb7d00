"""The operator deployed as a user deploys it, running as a Pod on a real kubelet node.

kubebuilder's scaffolded e2e test proves the deploy path on Kind; this is the same set
of checks on the local control plane's real node (cronjob_operator/envtest/_node.py):
the image built by hack/build-image.sh is imported into the node's containerd,
``kubectl apply -k`` installs config/local plus a small overlay with only what this
node needs (hostNetwork on 127.0.0.1 ports, since there is no Pod network; the node's
toleration; the API server's address, since there is no kube-proxy; a privileged
namespace, as hostNetwork is not ``restricted``), and then:

* exactly one controller-manager Pod is Running and Ready, and its log says the
  metrics server is serving HTTPS;
* a Pod whose service account is bound to the metrics-reader role scrapes /metrics
  over HTTPS with its token and gets 200; without the binding, 403;
* the sample CronJob's Jobs are created (they run on kwok) and its status is written;
* a CronJob whose Job runs a real container on the real node reaches Complete and sets
  ``lastSuccessfulTime``;
* deleting the manager Pod brings a new one that takes the Lease, and no scheduled run
  is lost; with two replicas, stopping the leader hands the Lease to the other;
* the Helm chart, with the values that match the overlay, installs a Ready manager
  that takes the Lease, and ``helm uninstall`` removes it.

On failure the Pods' logs, events and descriptions are printed. The tests share one
cluster and run in order (each builds on the state the previous one left).
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronjob_operator.controllers.cronjob.jobs import SCHEDULED_AT_ANNOTATION
from cronjob_operator.envtest import REAL_NODE_NAME, REAL_NODE_TAINT, ControlPlane, wait_for
from cronjob_operator.envtest._components import free_ports
from cronjob_operator.runtime.controllerutil import parse_time
from tests.images import Image, node_bin_dir, operator_image
from tests.tools import tool

REPO = Path(__file__).resolve().parents[2]
SYSTEM = "cronjob-operator-system"
DEPLOYMENT = "cronjob-operator-controller-manager"
SERVICE_ACCOUNT = "cronjob-operator-controller-manager"
METRICS_READER = "cronjob-operator-metrics-reader"
LEASE = "cronjob-operator.tutorial.kubebuilder.io"
MANAGER_LABELS = "control-plane=controller-manager,app.kubernetes.io/name=cronjob-operator"
CRONJOBS = "cronjobs.batch.tutorial.kubebuilder.io"
TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
ROLLOUT_TIMEOUT = 180.0


def node_selection() -> dict[str, Any]:
    """What a Pod needs to be placed on the real node: its selector and toleration."""
    return {
        "nodeSelector": {"kubernetes.io/hostname": REAL_NODE_NAME},
        "tolerations": [{"key": REAL_NODE_TAINT, "operator": "Exists"}],
    }


def node_placement() -> dict[str, Any]:
    """What a Pod needs to run on the real node without a Pod network: its selector,
    toleration and the host's network."""
    return {"hostNetwork": True, **node_selection()}


def apiserver_env_patches(host: str, port: int) -> list[dict[str, Any]]:
    """No kube-proxy: the manager container given the API server's own address instead
    of the ``kubernetes`` Service's."""
    return [
        {
            "op": "add",
            "path": "/spec/template/spec/containers/0/env/-",
            "value": {"name": name, "value": value},
        }
        for name, value in (
            ("KUBERNETES_SERVICE_HOST", host),
            ("KUBERNETES_SERVICE_PORT", str(port)),
        )
    ]


def pod_network_patches(plane: ControlPlane) -> list[dict[str, Any]]:
    """JSON patches onto a manager Deployment for a plane with a Pod network: placed on
    the real node, with the API server where its Pods reach it; its ports as they are."""
    ops: list[dict[str, Any]] = [
        {"op": "add", "path": f"/spec/template/spec/{key}", "value": value}
        for key, value in node_selection().items()
    ]
    return ops + apiserver_env_patches(plane.pod_gateway, plane.ports.apiserver)


def overlay_patches(apiserver_port: int, metrics_port: int, health_port: int) -> list[Any]:
    """JSON patches onto config/local's Deployment: only what the real node needs."""
    container = "/spec/template/spec/containers/0"
    ops: list[dict[str, Any]] = [
        {"op": "add", "path": f"/spec/template/spec/{key}", "value": value}
        for key, value in node_placement().items()
    ]
    ops += [
        # Later flags win: bind on the host's loopback, on ports free on this machine.
        {"op": "add", "path": f"{container}/args/-", "value": arg}
        for arg in (
            f"--metrics-bind-address=127.0.0.1:{metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{health_port}",
        )
    ]
    ops += [
        {
            "op": "replace",
            "path": f"{container}/ports",
            "value": [
                {"name": "https", "containerPort": metrics_port, "protocol": "TCP"},
                {"name": "health", "containerPort": health_port, "protocol": "TCP"},
            ],
        },
        {"op": "add", "path": f"{container}/livenessProbe/httpGet/host", "value": "127.0.0.1"},
        {"op": "add", "path": f"{container}/readinessProbe/httpGet/host", "value": "127.0.0.1"},
    ]
    return ops + apiserver_env_patches("127.0.0.1", apiserver_port)


def write_overlay(
    directory: Path, apiserver_port: int, metrics_port: int, health_port: int
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    kustomization = {
        "resources": [os.path.relpath(REPO / "config" / "local", directory)],
        "patches": [
            {
                "target": {"kind": "Deployment", "name": DEPLOYMENT},
                "patch": json.dumps(overlay_patches(apiserver_port, metrics_port, health_port)),
            },
            {
                "target": {"kind": "Namespace", "name": SYSTEM},
                "patch": json.dumps(
                    [
                        {
                            "op": "replace",
                            "path": "/metadata/labels/pod-security.kubernetes.io~1enforce",
                            "value": "privileged",
                        }
                    ]
                ),
            },
        ],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return directory


class Cluster:
    """The plane with a real node, the image imported, and helpers over kubectl."""

    def __init__(self, plane: ControlPlane, image: Image, overlay: Path) -> None:
        self.plane = plane
        self.image = image
        self.overlay = overlay

    def get(self, *args: str) -> Any:
        return self.plane.kubectl_json("get", *args)

    def apply(self, obj: dict[str, Any]) -> None:
        self.plane.kubectl("apply", "-f", "-", input=json.dumps(obj), check=True)

    def roll_out_overlay(self) -> float:
        """Apply the overlay and wait for the manager's rollout; the seconds it took."""
        started = time.monotonic()
        self.plane.kubectl("apply", "-k", str(self.overlay), check=True, timeout=120)
        self.wait_rolled_out(DEPLOYMENT)
        return time.monotonic() - started

    def wait_rolled_out(self, deployment: str) -> None:
        """Block until ``deployment``'s rollout is complete (``kubectl rollout status``)."""
        self.plane.kubectl(
            "rollout", "status", f"deployment/{deployment}", "-n", SYSTEM,
            f"--timeout={ROLLOUT_TIMEOUT:.0f}s", check=True, timeout=ROLLOUT_TIMEOUT + 10,
        )  # fmt: skip

    def manager_pods(self, selector: str = MANAGER_LABELS) -> list[dict[str, Any]]:
        pods: list[dict[str, Any]] = self.get("pods", "-n", SYSTEM, "-l", selector)["items"]
        return [pod for pod in pods if "deletionTimestamp" not in pod["metadata"]]

    def ready_pods(self, selector: str = MANAGER_LABELS) -> list[str]:
        return [pod["metadata"]["name"] for pod in self.manager_pods(selector) if is_ready(pod)]

    def lease_holder(self) -> str:
        lease = self.get("lease", LEASE, "-n", SYSTEM)
        return str(lease["spec"].get("holderIdentity") or "")

    def manager_log(self, pod: str) -> str:
        return self.plane.pod_log(SYSTEM, pod, "manager")

    def run_pod(self, namespace: str, name: str, spec: dict[str, Any]) -> str:
        """Run a one-shot Pod on the real node to completion; return its log."""
        self.apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {**node_placement(), "restartPolicy": "Never", **spec},
            }
        )

        def phase() -> str:
            return str(self.get("pod", name, "-n", namespace)["status"].get("phase"))

        wait_for(lambda: phase() in {"Succeeded", "Failed"}, 120, message=f"Pod {name} to end")
        return self.plane.pod_log(namespace, name, spec["containers"][0]["name"])

    def diagnose(self) -> None:
        """Print what a reader needs to see why a test failed."""
        print(self.plane.kubectl("get", "pods", "-A", "-o", "wide").stdout)
        print(self.plane.kubectl("describe", "pods", "-n", SYSTEM).stdout)
        print(self.plane.kubectl("get", "events", "-A", "--sort-by=.lastTimestamp").stdout)
        for pod in self.get("pods", "-n", SYSTEM)["items"]:
            name = pod["metadata"]["name"]
            print(f"--- log of {SYSTEM}/{name} ---\n{self.manager_log(name)[-6000:]}")
        kubelet_log = self.plane.node_state_dir / "kubelet.log"
        print(f"--- {kubelet_log} (tail) ---")
        print("\n".join(kubelet_log.read_text(errors="replace").splitlines()[-60:]))


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return pod["status"].get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    image = operator_image()
    with ControlPlane(real_node=True, node_bin_dir=node_bin_dir()) as plane:
        plane.import_image(image.archive)
        metrics_port, health_port = free_ports(2)
        overlay = write_overlay(
            tmp_path_factory.mktemp("overlay"), plane.ports.apiserver, metrics_port, health_port
        )
        yield Cluster(plane, image, overlay)


@pytest.fixture(autouse=True)
def diagnose_on_failure(test_failed: Callable[[], bool], cluster: Cluster) -> Iterator[None]:
    yield
    if test_failed():
        cluster.diagnose()


@pytest.fixture(scope="module")
def namespace(cluster: Cluster) -> str:
    cluster.plane.kubectl("create", "namespace", "e2e", check=True)
    wait_for(
        lambda: (
            cluster.plane.kubectl("get", "serviceaccount", "default", "-n", "e2e").returncode == 0
        ),
        30,
        message="the e2e namespace's default ServiceAccount",
    )
    return "e2e"


def test_deploy_rolls_out_one_ready_manager(cluster: Cluster) -> None:
    print(f"rollout took {cluster.roll_out_overlay():.1f}s")
    (pod,) = cluster.manager_pods()
    assert is_ready(pod)
    assert pod["spec"]["nodeName"] == REAL_NODE_NAME
    name = pod["metadata"]["name"]
    wait_for(lambda: cluster.lease_holder().startswith(f"{name}_"), 60, message="the Lease")


def log_records(text: str) -> list[dict[str, Any]]:
    """The JSON records of a container log file (CRI format: time, stream, tag, line)."""
    records = []
    for line in text.splitlines():
        try:
            records.append(json.loads(line.split(" ", 3)[3]))
        except (IndexError, ValueError):
            continue
    return records


def test_manager_log_says_metrics_are_served_over_https(cluster: Cluster) -> None:
    (pod,) = cluster.ready_pods()
    records = log_records(cluster.manager_log(pod))
    assert any(record.get("msg") == "serving https" for record in records)


SCRAPE = f"""
import ssl, urllib.error, urllib.request
token = open("{TOKEN}").read()
request = urllib.request.Request(
    "https://127.0.0.1:%d/metrics", headers={{"Authorization": "Bearer " + token}}
)
try:
    with urllib.request.urlopen(request, context=ssl._create_unverified_context()) as reply:
        print("status", reply.status)
        print(reply.read().decode())
except urllib.error.HTTPError as error:
    print("status", error.code)
"""


def scraper(cluster: Cluster, service_account: str, metrics_port: int) -> dict[str, Any]:
    return {
        "serviceAccountName": service_account,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
        "containers": [
            {
                "name": "scrape",
                "image": cluster.image.name,
                "imagePullPolicy": "IfNotPresent",
                "command": ["python3", "-c", SCRAPE % metrics_port],
            }
        ],
    }


def metrics_port(cluster: Cluster) -> int:
    deployment = cluster.get("deployment", DEPLOYMENT, "-n", SYSTEM)
    ports = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    return int(next(port["containerPort"] for port in ports if port["name"] == "https"))


def test_metrics_need_the_reader_binding(cluster: Cluster, namespace: str) -> None:
    port = metrics_port(cluster)
    for account in ("scraper", "stranger"):
        cluster.plane.kubectl("create", "serviceaccount", account, "-n", namespace, check=True)
    cluster.plane.kubectl(
        "create", "clusterrolebinding", "e2e-scraper", f"--clusterrole={METRICS_READER}",
        f"--serviceaccount={namespace}:scraper", check=True,
    )  # fmt: skip
    allowed = cluster.run_pod(namespace, "scrape-allowed", scraper(cluster, "scraper", port))
    denied = cluster.run_pod(namespace, "scrape-denied", scraper(cluster, "stranger", port))
    assert "status 200" in allowed
    assert "controller_runtime_reconcile_total" in allowed
    assert "status 403" in denied


def cronjob_status(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = cluster.get(CRONJOBS, name, "-n", namespace).get("status") or {}
    return status


def owned_jobs(cluster: Cluster, namespace: str, owner: str) -> list[dict[str, Any]]:
    jobs = cluster.get("jobs", "-n", namespace)["items"]
    return [
        job
        for job in jobs
        if any(ref["name"] == owner for ref in job["metadata"].get("ownerReferences", []))
    ]


def test_the_sample_cronjob_gets_jobs_and_status(cluster: Cluster, namespace: str) -> None:
    sample = REPO / "config" / "samples" / "batch_v1_cronjob.yaml"
    cluster.plane.kubectl("apply", "-n", namespace, "-f", str(sample), check=True)
    wait_for(lambda: owned_jobs(cluster, namespace, "cronjob-sample"), 90, message="a sample Job")
    wait_for(
        lambda: "lastScheduleTime" in cronjob_status(cluster, namespace, "cronjob-sample"),
        30,
        message="the sample's status",
    )


def real_cronjob(cluster: Cluster) -> dict[str, Any]:
    pod_spec = {
        **node_placement(),
        "restartPolicy": "Never",
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
        "containers": [
            {
                "name": "work",
                "image": cluster.image.name,
                "imagePullPolicy": "IfNotPresent",
                "command": ["python3", "-c", "print('a real run')"],
            }
        ],
    }
    return {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {"name": "real"},
        "spec": {
            "schedule": "* * * * *",
            "successfulJobsHistoryLimit": 20,
            "jobTemplate": {"spec": {"template": {"spec": pod_spec}}},
        },
    }


def completed(job: dict[str, Any]) -> bool:
    conditions = job.get("status", {}).get("conditions", [])
    return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)


def test_a_real_container_job_completes(cluster: Cluster, namespace: str) -> None:
    cluster.apply({**real_cronjob(cluster), "metadata": {"name": "real", "namespace": namespace}})
    wait_for(
        lambda: "lastSuccessfulTime" in cronjob_status(cluster, namespace, "real"),
        150,
        message="the real CronJob's lastSuccessfulTime",
    )
    jobs = owned_jobs(cluster, namespace, "real")
    assert any(completed(job) for job in jobs)


def scheduled_minutes(cluster: Cluster, namespace: str) -> list[datetime]:
    jobs = owned_jobs(cluster, namespace, "real")
    return sorted(
        parse_time(job["metadata"]["annotations"][SCHEDULED_AT_ANNOTATION]) for job in jobs
    )


def wait_for_a_run_after(cluster: Cluster, namespace: str, moment: datetime) -> None:
    wait_for(
        lambda: any(minute > moment for minute in scheduled_minutes(cluster, namespace)),
        150,
        message=f"a run scheduled after {moment.isoformat()}",
    )


def assert_no_run_lost(cluster: Cluster, namespace: str) -> None:
    minutes = scheduled_minutes(cluster, namespace)
    gaps = [(a, b) for a, b in itertools.pairwise(minutes) if b - a != timedelta(minutes=1)]
    assert not gaps, f"runs were lost between {gaps} (all: {minutes})"


def last_scheduled(cluster: Cluster, namespace: str) -> datetime:
    return max(scheduled_minutes(cluster, namespace))


def test_a_new_manager_pod_takes_the_lease_and_loses_no_run(
    cluster: Cluster, namespace: str
) -> None:
    (old,) = cluster.ready_pods()
    last_before = last_scheduled(cluster, namespace)
    cluster.plane.kubectl("delete", "pod", old, "-n", SYSTEM, "--wait=false", check=True)
    wait_for(
        lambda: [pod for pod in cluster.ready_pods() if pod != old],
        ROLLOUT_TIMEOUT,
        message="a new manager Pod to be Ready",
    )
    (new,) = cluster.ready_pods()
    wait_for(lambda: cluster.lease_holder().startswith(f"{new}_"), 60, message="the new leader")
    wait_for_a_run_after(cluster, namespace, last_before)
    assert_no_run_lost(cluster, namespace)


def second_replica(cluster: Cluster) -> dict[str, Any]:
    """The overlay's Deployment as a second one (own ports and selector), same Lease."""
    rendered = cluster.plane.kubectl("kustomize", str(cluster.overlay), check=True).stdout
    deployment = next(
        doc for doc in yaml.safe_load_all(rendered) if doc and doc["kind"] == "Deployment"
    )
    second = copy.deepcopy(deployment)
    second["metadata"]["name"] = f"{DEPLOYMENT}-b"
    for labels in (
        second["spec"]["selector"]["matchLabels"],
        second["spec"]["template"]["metadata"]["labels"],
    ):
        labels["replica"] = "b"
    metrics, health = free_ports(2)
    container = second["spec"]["template"]["spec"]["containers"][0]
    container["args"] += [
        f"--metrics-bind-address=127.0.0.1:{metrics}",
        f"--health-probe-bind-address=127.0.0.1:{health}",
    ]
    container["ports"] = [
        {"name": "https", "containerPort": metrics, "protocol": "TCP"},
        {"name": "health", "containerPort": health, "protocol": "TCP"},
    ]
    return second


def test_two_replicas_fail_over(cluster: Cluster, namespace: str) -> None:
    cluster.apply(second_replica(cluster))
    wait_for(lambda: cluster.ready_pods("replica=b"), ROLLOUT_TIMEOUT, message="replica b Ready")
    (follower,) = cluster.ready_pods("replica=b")
    (leader,) = [pod for pod in cluster.ready_pods() if pod != follower]
    assert cluster.lease_holder().startswith(f"{leader}_")
    last_before = last_scheduled(cluster, namespace)
    started = time.monotonic()
    cluster.plane.kubectl(
        "scale", f"deployment/{DEPLOYMENT}", "-n", SYSTEM, "--replicas=0", check=True
    )
    wait_for(lambda: cluster.lease_holder().startswith(f"{follower}_"), 60, message="the failover")
    print(f"failover took {time.monotonic() - started:.1f}s")
    wait_for_a_run_after(cluster, namespace, last_before)
    assert_no_run_lost(cluster, namespace)


def helm(cluster: Cluster, home: Path, *args: str) -> str:
    env = {
        "HOME": str(home),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
        "KUBECONFIG": str(cluster.plane.kubeconfig),
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run(
        [tool("helm"), *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert result.returncode == 0, f"helm {' '.join(args)}: {result.stderr}"
    return result.stdout


def chart_values_for_the_node(cluster: Cluster) -> list[str]:
    """The chart's values for what the kustomize overlay patches in."""
    metrics, health = free_ports(2)
    placement = node_placement()
    env = [
        {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
        {"name": "KUBERNETES_SERVICE_PORT", "value": str(cluster.plane.ports.apiserver)},
    ]
    return [
        "--set=manager.hostNetwork=true",
        "--set=manager.bindAddress=127.0.0.1",
        f"--set=metrics.port={metrics}",
        f"--set=manager.healthProbe.port={health}",
        f"--set-json=manager.env={json.dumps(env)}",
        f"--set-json=manager.nodeSelector={json.dumps(placement['nodeSelector'])}",
        f"--set-json=manager.tolerations={json.dumps(placement['tolerations'])}",
    ]


def test_the_helm_chart_installs_the_same_and_uninstalls(cluster: Cluster, tmp_path: Path) -> None:
    """Last: kustomize's install is removed first, as the chart makes the same objects."""
    cluster.plane.kubectl("delete", "-k", str(cluster.overlay), "--wait=true", timeout=180)
    wait_for(
        lambda: cluster.plane.kubectl("get", "namespace", SYSTEM).returncode != 0,
        120,
        message=f"namespace {SYSTEM} to be deleted",
    )
    chart = str(REPO / "dist" / "chart")
    values = chart_values_for_the_node(cluster)
    install = ["install", "cronjob-operator", chart, "-n", SYSTEM, "--create-namespace"]
    helm(cluster, tmp_path, *install, "--wait", "--timeout=3m", *values)
    (pod,) = cluster.ready_pods()
    wait_for(lambda: cluster.lease_holder().startswith(f"{pod}_"), 60, message="the Lease")
    helm(cluster, tmp_path, "uninstall", "cronjob-operator", "-n", SYSTEM, "--wait")
    wait_for(lambda: not cluster.manager_pods(), 120, message="the chart's Pods to go")
    assert cluster.plane.kubectl("get", "deployment", DEPLOYMENT, "-n", SYSTEM).returncode != 0
