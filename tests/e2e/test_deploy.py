"""config/local on the local cluster, and the manager running with exactly its RBAC.

``kubectl apply -k config/local`` (config/default without the webhooks and their
certificate) installs the CRDs, the namespace, the service account and the roles;
``config/default`` itself is rendered and checked for the same pieces. The manager then
runs out of cluster with a token of that service account, so it has the permissions in
config/rbac and nothing more, while the test drives both controllers through every
write they make: Job create, history pruning (delete), status updates, events, the
leader-election Lease, Deployment create and roll, and the TokenReviews and
SubjectAccessReviews of its HTTPS /metrics (a reader-bound token gets metrics, others
401/403). Any 403 the manager receives fails the test: a code change that needs a verb
config/rbac lacks is caught here. Finally
``kubectl delete -k config/local`` removes everything.
"""

from __future__ import annotations

import http.client
import ssl
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronjob_operator.controllers import configdeployment, cronjob
from cronjob_operator.controllers.configdeployment import CONFIG_HASH_ANNOTATION
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.client import RestClient, load_configuration
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controllerutil import parse_time
from cronjob_operator.runtime.leaderelection import LeaderElectionConfig
from cronjob_operator.runtime.manager import Manager, Options
from tests.integration.support import (
    REPO,
    Denials,
    RunningManager,
    install_crds,
    spy_on_events,
)

LOCAL = REPO / "config" / "local"
SYSTEM_NAMESPACE = "cronjob-operator-system"
SERVICE_ACCOUNT = "cronjob-operator-controller-manager"


@pytest.fixture
def deployed(control_plane: ControlPlane) -> Iterator[None]:
    try:
        applied = control_plane.kubectl("apply", "-k", str(LOCAL))
        assert applied.returncode == 0, applied.stderr
        yield
    finally:
        deleted = control_plane.kubectl("delete", "-k", str(LOCAL), "--timeout=120s")
        install_crds(control_plane)  # other tests in this session still need the CRDs
        assert deleted.returncode == 0, deleted.stderr
        wait_for(
            lambda: control_plane.kubectl("get", "namespace", SYSTEM_NAMESPACE).returncode != 0,
            120,
            message="config/default removed, namespace included",
        )
        assert (
            control_plane.kubectl("get", "clusterrole", "cronjob-operator-manager-role").returncode
            != 0
        )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def manager_as_service_account(
    control_plane: ControlPlane,
    deployed: None,
    clock: FakeClock,
    tmp_path: Path,
    denials: Denials,
) -> Iterator[RunningManager]:
    kubeconfig = tmp_path / "manager.kubeconfig"
    control_plane.token_kubeconfig(SYSTEM_NAMESPACE, SERVICE_ACCOUNT, kubeconfig)
    rest = RestClient(load_configuration(str(kubeconfig)))
    options = Options(
        health_probe_bind_address="0",
        metrics_bind_address="127.0.0.1:0",
        metrics_secure=True,  # its reviews run with the service account's RBAC too
        leader_election=LeaderElectionConfig(
            name="cronjob-operator.tutorial.kubebuilder.io", namespace=SYSTEM_NAMESPACE
        ),
    )
    manager = Manager(rest, options)
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
        yield RunningManager(manager, controllers, thread, events)
    finally:
        manager.stop()
        thread.join(60)
        assert codes == [0]


def test_manager_does_its_whole_job_with_only_config_rbac(
    control_plane: ControlPlane,
    namespace: str,
    manager_as_service_account: RunningManager,
    clock: FakeClock,
    denials: Denials,
) -> None:
    operator = manager_as_service_account
    applied = control_plane.kubectl(
        "apply", "-k", str(REPO / "config" / "samples"), "-n", namespace
    )
    assert applied.returncode == 0, applied.stderr

    def get(kind: str, name: str) -> dict[str, Any]:
        return control_plane.kubectl_json("get", kind, name, "-n", namespace)  # type: ignore[no-any-return]

    # CronJob: four runs with successfulJobsHistoryLimit 3 (default) -> one pruned.
    created = parse_time(
        get("cronjobs.batch.tutorial.kubebuilder.io", "cronjob-sample")["metadata"][
            "creationTimestamp"
        ]
    )
    assert created is not None
    first = created.replace(second=0, microsecond=0) + timedelta(minutes=1)
    for n in range(4):
        scheduled = first + timedelta(minutes=n)
        clock.set(scheduled + timedelta(seconds=1))
        operator.kick("cronjob", namespace, "cronjob-sample")
        job_name = f"cronjob-sample-{int(scheduled.timestamp())}"
        wait_for(
            lambda j=job_name: any(  # type: ignore[misc]
                c["type"] == "Complete" and c["status"] == "True"
                for c in (get("job", j).get("status") or {}).get("conditions") or []
            ),
            60,
            interval=0.5,
            message=f"{job_name} complete",
            ignore=(Exception,),
        )
    operator.kick("cronjob", namespace, "cronjob-sample")
    wait_for(
        lambda: len(control_plane.kubectl_json("get", "jobs", "-n", namespace)["items"]) == 3,
        60,
        message="history pruned to 3",
    )
    status = get("cronjobs.batch.tutorial.kubebuilder.io", "cronjob-sample")["status"]
    assert status["lastSuccessfulTime"]
    events = control_plane.kubectl_json("get", "events", "-n", namespace)["items"]
    assert {"SuccessfulCreate", "SuccessfulDelete", "SawCompletedJob"} <= {
        e["reason"] for e in events
    }

    # ConfigDeployment: a Deployment with the hash; editing the ConfigMap rolls it.
    def pod_hash() -> str | None:
        deployment = get("deployment", "configdeployment-sample")
        return (deployment["spec"]["template"]["metadata"].get("annotations") or {}).get(
            CONFIG_HASH_ANNOTATION
        )

    old_hash = wait_for(pod_hash, 60, message="deployment with hash", ignore=(Exception,))
    patched = control_plane.kubectl(
        "patch", "configmap", "configdeployment-sample-config", "-n", namespace,
        "--type=merge", "-p", '{"data": {"greeting": "changed by the e2e test"}}',
    )  # fmt: skip
    assert patched.returncode == 0, patched.stderr
    wait_for(lambda: pod_hash() not in {None, old_hash}, 60, message="deployment rolled")
    seen: dict[str, Any] = {}

    def status_shows_two_ready() -> bool:
        seen["status"] = get(
            "configdeployments.apps.tutorial.kubebuilder.io", "configdeployment-sample"
        ).get("status")
        seen["deployment_status"] = get("deployment", "configdeployment-sample").get("status")
        return (seen["status"] or {}).get("readyReplicas") == 2

    wait_for(
        status_shows_two_ready,
        90,
        message="configdeployment status shows ready replicas",
        detail=lambda: f"last seen: {seen}",
    )

    assert denials.lines == [], "config/rbac lacks a verb the manager needs"


def scrape(port: int, token: str | None) -> tuple[int, bytes]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # self-signed, as the ServiceMonitor's insecureSkipVerify
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
    try:
        connection.request(
            "GET", "/metrics", headers={"Authorization": f"Bearer {token}"} if token else {}
        )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def token_for(control_plane: ControlPlane, namespace: str, name: str) -> str:
    control_plane.kubectl("create", "serviceaccount", name, "-n", namespace, check=True)
    created = control_plane.kubectl("create", "token", name, "-n", namespace, check=True)
    return created.stdout.strip()


def test_metrics_are_served_only_to_tokens_bound_to_the_reader_role(
    control_plane: ControlPlane,
    namespace: str,
    manager_as_service_account: RunningManager,
    denials: Denials,
) -> None:
    (metrics_server,) = manager_as_service_account.manager.servers
    port = metrics_server.port
    binding = f"test-metrics-reader-{namespace}"
    control_plane.kubectl(
        "create", "clusterrolebinding", binding,
        "--clusterrole=cronjob-operator-metrics-reader",
        f"--serviceaccount={namespace}:scraper",
        check=True,
    )  # fmt: skip
    try:
        scraper = token_for(control_plane, namespace, "scraper")
        stranger = token_for(control_plane, namespace, "stranger")
        wait_for(
            lambda: scrape(port, scraper)[0] == 200,
            60,  # a denial cached before the binding reached the authorizer lasts 30 s
            message="the reader-bound token gets metrics",
        )
        assert b"# HELP" in scrape(port, scraper)[1]
        assert scrape(port, stranger)[0] == 403
        assert scrape(port, "not-a-token")[0] == 401
        assert scrape(port, None)[0] == 401
    finally:
        control_plane.kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")
    assert denials.lines == [], "config/rbac lacks a verb the metrics reviews need"


def test_config_default_renders_the_same_install_plus_webhooks(control_plane: ControlPlane) -> None:
    def kinds(overlay: str) -> set[tuple[str, str]]:
        rendered = control_plane.kubectl("kustomize", str(REPO / "config" / overlay), check=True)
        return {
            (doc["kind"], doc["metadata"]["name"])
            for doc in yaml.safe_load_all(rendered.stdout)
            if doc
        }

    local, default, certmanager = kinds("local"), kinds("default"), kinds("certmanager")
    assert local < default
    assert {kind for kind, _ in default - local} >= {
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "Service",
        "NetworkPolicy",
        "Role",  # the manager's own certificate: its Secret
        "ClusterRole",  # and the caBundles it injects
    }
    assert {kind for kind, _ in certmanager - default} == {"Certificate", "Issuer"}
