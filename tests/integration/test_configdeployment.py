"""The ConfigDeployment controller on the real local control plane (kwok runs the pods).

Each test runs a ``Manager`` in-process on a background thread with the controller set
up as ``cli`` would, its reconciler wrapped to record every call (request, result,
error, when) and its client's writes counted, so a test can assert both what the
cluster shows and what the controller did (no requeue timers, no writes on a no-op).
The test itself writes with its own uncached client and polls with deadlines.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from cronjob_operator.api.apps_v1 import CONFIG_DEPLOYMENT
from cronjob_operator.controllers import configdeployment_state as state
from cronjob_operator.controllers.configdeployment import (
    CONFIG_MAP_INDEX,
    config_map_index,
    config_map_requests,
    setup,
)
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime._rest import RestClient, load_configuration
from cronjob_operator.runtime.cache import UnindexedFieldError
from cronjob_operator.runtime.client import Client, LiveReader, Writer
from cronjob_operator.runtime.controller import Controller
from cronjob_operator.runtime.kinds import CONFIG_MAP, DEPLOYMENT, EVENT, POD, REPLICA_SET
from cronjob_operator.runtime.manager import Manager, Options
from cronjob_operator.runtime.reconcile import Reconciler, Request, Result
from tests.integration.support import install_crds, running_manager

pytestmark = [pytest.mark.cluster]

TIMEOUT = 120.0
"""A deadline, not a wait: a rollout is a chain of kube-controller-manager, scheduler and
kwok steps, which on a loaded 2-core CI machine once took longer than 60 s."""
WRITE_METHODS = ("create", "update", "update_status", "patch", "delete")


# -- the operator under test -------------------------------------------------------------


@dataclass(frozen=True)
class Reconcile:
    """One call of the reconciler."""

    request: Request
    started: float
    result: Result | None
    error: BaseException | None


class RecordingReconciler:
    """Wraps a reconciler and records every call."""

    def __init__(self, inner: Reconciler) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._calls: list[Reconcile] = []

    def reconcile(self, request: Request) -> Result:
        started = time.monotonic()
        try:
            result = self._inner.reconcile(request)
        except BaseException as exc:
            self._add(Reconcile(request, started, None, exc))
            raise
        self._add(Reconcile(request, started, result, None))
        return result

    def _add(self, call: Reconcile) -> None:
        with self._lock:
            self._calls.append(call)

    def calls(self, name: str | None = None) -> list[Reconcile]:
        with self._lock:
            return [c for c in self._calls if name is None or c.request.name == name]


@dataclass
class Operator:
    """A running manager with the ConfigDeployment controller."""

    manager: Manager
    controller: Controller
    reconciler: RecordingReconciler
    writes: list[tuple[str, str, str]] = field(default_factory=list)


def count_writes(client: Client, writes: list[tuple[str, str, str]]) -> None:
    """Record (method, kind, name) for every write ``client`` sends, events included."""
    for method in WRITE_METHODS:
        inner = getattr(client, method)

        def wrapper(kind: Any, *args: Any, _inner: Any = inner, _m: str = method, **kw: Any) -> Any:
            target = args[0] if args else kw.get("obj", kw.get("name"))
            name = target if isinstance(target, str) else objects.name_of(target or {})
            writes.append((_m, kind.kind, name))
            return _inner(kind, *args, **kw)

        setattr(client, method, wrapper)


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


@pytest.fixture
def rest(control_plane: ControlPlane, crds: None) -> RestClient:
    return RestClient(load_configuration(str(control_plane.kubeconfig)))


@pytest.fixture
def start_operator(
    control_plane: ControlPlane, crds: None
) -> Iterator[Callable[[str | None], Operator]]:
    """Start a manager with the ConfigDeployment controller over one namespace (or all)."""
    with contextlib.ExitStack() as stack:

        def start(namespace: str | None) -> Operator:
            made: list[Operator] = []

            def instrumented_setup(manager: Manager) -> Controller:
                controller = setup(manager)
                recording = RecordingReconciler(controller.reconciler)
                controller.reconciler = recording
                operator = Operator(manager, controller, recording)
                count_writes(manager.client, operator.writes)
                made.append(operator)
                return controller

            stack.enter_context(
                running_manager(
                    control_plane, {"configdeployment": instrumented_setup}, namespace=namespace
                )
            )
            return made[0]

        yield start


@pytest.fixture
def other_namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = f"test-{secrets.token_hex(4)}"
    control_plane.kubectl("create", "namespace", name, check=True)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false")


# -- objects and reads ------------------------------------------------------------------


def config_map_body(
    namespace: str, name: str, data: dict[str, str], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "data": data,
    }


def config_deployment_body(
    namespace: str, name: str, config_map: str, replicas: int = 1
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "configMap": config_map,
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "busybox:1.36",
                            "command": ["sleep", "3600"],
                            "resources": {"requests": {"cpu": "0.01", "memory": "16Mi"}},
                            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
                        }
                    ],
                    "volumes": [{"name": "config", "configMap": {"name": config_map}}],
                },
            },
        },
    }


def full_hash(data: dict[str, str]) -> str:
    canonical = json.dumps({"binaryData": {}, "data": data}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class Cluster:
    """The test's own view of the cluster: uncached reads and plain writes."""

    def __init__(self, rest: RestClient) -> None:
        self.read = LiveReader(rest)
        self.write = Writer(rest)

    def get(self, kind: Any, name: str, namespace: str) -> objects.Obj | None:
        try:
            return self.read.get(kind, name, namespace)
        except errors.NotFound:
            return None

    def deployment_hash(self, namespace: str, name: str) -> str | None:
        deployment = self.get(DEPLOYMENT, name, namespace)
        return None if deployment is None else state.rolled_out_hash(deployment)

    def status(self, namespace: str, name: str) -> dict[str, Any]:
        config_deployment = self.get(CONFIG_DEPLOYMENT, name, namespace) or {}
        return dict(config_deployment.get("status") or {})

    def condition(self, namespace: str, name: str, type_: str) -> tuple[str, str] | None:
        for condition in self.status(namespace, name).get("conditions") or ():
            if condition["type"] == type_:
                return condition["status"], condition["reason"]
        return None

    def replica_sets(self, namespace: str, name: str) -> list[objects.Obj]:
        return self.read.list(
            REPLICA_SET, namespace=namespace, label_selector={state.SELECTOR_LABEL: name}
        )

    def ready_pods(self, namespace: str, name: str) -> list[str]:
        pods = self.read.list(POD, namespace=namespace, label_selector={state.SELECTOR_LABEL: name})
        return sorted(
            objects.name_of(pod)
            for pod in pods
            if not pod["metadata"].get("deletionTimestamp")
            and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (pod.get("status") or {}).get("conditions") or ()
            )
        )

    def event_reasons(self, obj: objects.Obj) -> dict[str, str]:
        found = self.read.list(
            EVENT,
            namespace=objects.namespace_of(obj),
            matching_fields={"involvedObject.uid": obj["metadata"]["uid"]},
        )
        return {e["reason"]: e["message"] for e in found}

    def update_config_map(self, namespace: str, name: str, **changes: Any) -> None:
        body = objects.thaw(self.read.get(CONFIG_MAP, name, namespace))
        for key, value in changes.items():
            if key == "labels":
                body["metadata"]["labels"] = value
            else:
                body[key] = value
        self.write.update(CONFIG_MAP, body)


@pytest.fixture
def cluster(rest: RestClient) -> Cluster:
    return Cluster(rest)


def rolled_to(cluster: Cluster, namespace: str, name: str, content_hash: str) -> bool:
    return cluster.deployment_hash(namespace, name) == content_hash


def wait_until_rolled_out(cluster: Cluster, namespace: str, name: str, replicas: int) -> None:
    """Wait for the rollout to finish and the ConfigDeployment's status to show it."""
    unmet: list[str] = []
    seen: dict[str, Any] = {}

    def settled() -> bool:
        status = cluster.status(namespace, name)
        deployment = cluster.get(DEPLOYMENT, name, namespace) or {}
        dep_status = deployment.get("status") or {}
        ready_pods = cluster.ready_pods(namespace, name)
        seen.update(status=status, deployment_status=dep_status, ready_pods=len(ready_pods))
        checks = {
            "status.readyReplicas": status.get("readyReplicas") == replicas,
            "status.replicas": status.get("replicas") == replicas,
            "Available=True": cluster.condition(namespace, name, "Available")
            == ("True", "MinimumReplicasAvailable"),
            "Progressing=False/RolloutComplete": cluster.condition(namespace, name, "Progressing")
            == ("False", "RolloutComplete"),
            "Deployment observed": dep_status.get("observedGeneration")
            == (deployment.get("metadata") or {}).get("generation"),
            "ready pods": len(ready_pods) == replicas,
        }
        unmet[:] = [what for what, ok in checks.items() if not ok]
        return not unmet

    wait_for(
        settled,
        TIMEOUT,
        message=f"{namespace}/{name} rolled out with {replicas} ready pods",
        detail=lambda: f"unmet: {unmet}; last seen: {seen}",
    )


# -- tests ------------------------------------------------------------------------------


def test_creates_a_deployment_with_the_hash_and_reports_ready_pods(
    start_operator: Callable[[str | None], Operator],
    cluster: Cluster,
    namespace: str,
    control_plane: ControlPlane,
) -> None:
    data = {"greeting": "hello", "settings.ini": "[server]\nport = 8080\n"}
    cluster.write.create(CONFIG_MAP, config_map_body(namespace, "settings", data))
    created = cluster.write.create(
        CONFIG_DEPLOYMENT, config_deployment_body(namespace, "web", "settings", replicas=2)
    )
    operator = start_operator(namespace)

    wait_until_rolled_out(cluster, namespace, "web", 2)
    deployment = cluster.get(DEPLOYMENT, "web", namespace)
    assert deployment is not None
    assert state.rolled_out_hash(deployment) == full_hash(data)
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["selector"] == {"matchLabels": {state.SELECTOR_LABEL: "web"}}
    owner = objects.controller_ref(deployment)
    assert owner is not None
    assert (owner["uid"], owner["blockOwnerDeletion"]) == (created["metadata"]["uid"], True)
    status = cluster.status(namespace, "web")
    assert status["configMapHash"] == full_hash(data)[: state.SHORT_HASH_LENGTH]
    assert status["observedGeneration"] == created["metadata"]["generation"]
    assert cluster.condition(namespace, "web", "Degraded") == ("False", "AsExpected")
    assert "DeploymentCreated" in wait_for(
        lambda: cluster.event_reasons(created), TIMEOUT, message="DeploymentCreated event"
    )
    table = control_plane.kubectl("get", "configdeployments", "-n", namespace, check=True)
    header, row = table.stdout.splitlines()
    assert header.split() == ["NAME", "CONFIGMAP", "READY", "HASH", "AGE"]
    assert row.split()[:4] == ["web", "settings", "2", status["configMapHash"]]
    # Created once and never updated: the server's defaults (and "0.01" CPU stored as
    # "10m") do not read as a difference.
    assert [w for w in operator.writes if w[1] == "Deployment"] == [("create", "Deployment", "web")]
    assert [call.error for call in operator.reconciler.calls() if call.error] == []
    assert all(call.result == Result() for call in operator.reconciler.calls())


def test_content_change_rolls_and_a_label_change_makes_no_writes(
    start_operator: Callable[[str | None], Operator], cluster: Cluster, namespace: str
) -> None:
    cluster.write.create(CONFIG_MAP, config_map_body(namespace, "settings", {"mode": "a"}))
    created = cluster.write.create(
        CONFIG_DEPLOYMENT, config_deployment_body(namespace, "web", "settings")
    )
    operator = start_operator(namespace)
    wait_until_rolled_out(cluster, namespace, "web", 1)
    assert len(cluster.replica_sets(namespace, "web")) == 1

    cluster.update_config_map(namespace, "settings", data={"mode": "b"})
    wait_for(
        lambda: cluster.deployment_hash(namespace, "web") == full_hash({"mode": "b"}),
        TIMEOUT,
        message="the new hash in the pod template",
    )
    wait_for(
        lambda: len(cluster.replica_sets(namespace, "web")) == 2,
        TIMEOUT,
        message="a second ReplicaSet",
    )
    wait_until_rolled_out(cluster, namespace, "web", 1)
    assert cluster.status(namespace, "web")["configMapHash"] == full_hash({"mode": "b"})[:10]
    rolled_out: str = wait_for(
        lambda: cluster.event_reasons(created).get("RolledOut") or "",
        TIMEOUT,
        message="RolledOut event",
    )
    old, new = full_hash({"mode": "a"})[:10], full_hash({"mode": "b"})[:10]
    assert f"{old} -> {new}" in rolled_out

    # A label edit changes the resourceVersion, so the controller reconciles; the content
    # hash is the same, so it writes nothing at all (no Deployment update, no status, no event).
    deployment = cluster.read.get(DEPLOYMENT, "web", namespace)
    before = cluster.read.get(CONFIG_DEPLOYMENT, "web", namespace)
    calls = len(operator.reconciler.calls("web"))
    writes = len(operator.writes)
    cluster.update_config_map(namespace, "settings", labels={"touched": "yes"})
    wait_for(
        lambda: len(operator.reconciler.calls("web")) > calls,
        TIMEOUT,
        message="a reconcile after the label change",
    )
    assert operator.writes[writes:] == []
    after = cluster.read.get(DEPLOYMENT, "web", namespace)
    assert after["metadata"]["generation"] == deployment["metadata"]["generation"]
    assert (
        cluster.read.get(CONFIG_DEPLOYMENT, "web", namespace)["metadata"]["resourceVersion"]
        == before["metadata"]["resourceVersion"]
    )
    assert len(cluster.replica_sets(namespace, "web")) == 2


def test_a_status_out_of_step_with_the_deployment_is_corrected_by_the_next_reconcile(
    start_operator: Callable[[str | None], Operator], cluster: Cluster, namespace: str
) -> None:
    """The status follows the Deployment even when the status the controller read was stale.

    A reconcile that reads its ConfigDeployment from a cache not yet holding the
    controller's own previous status write computes against an old status: it may skip a
    write it needed, or keep a field of the newer one on a Conflict merge. Only the watch
    event of that write, reconciled, brings the status back in line; when the watch
    passed spec changes alone, a rollout's last status could stay wrong (CI saw
    readyReplicas stuck). Another writer's status edit is the same situation made
    deterministic.
    """
    cluster.write.create(CONFIG_MAP, config_map_body(namespace, "settings", {"k": "v"}))
    cluster.write.create(CONFIG_DEPLOYMENT, config_deployment_body(namespace, "web", "settings"))
    operator = start_operator(namespace)
    wait_until_rolled_out(cluster, namespace, "web", 1)

    stale = objects.thaw(cluster.read.get(CONFIG_DEPLOYMENT, "web", namespace))
    stale["status"]["readyReplicas"] = 3
    stale["status"]["replicas"] = 3
    edited = time.monotonic()
    writes = len(operator.writes)
    cluster.write.update_status(CONFIG_DEPLOYMENT, stale)

    wait_for(
        lambda: any(c.started >= edited for c in operator.reconciler.calls("web")),
        TIMEOUT,
        message="a reconcile after the status edit",
    )
    wait_until_rolled_out(cluster, namespace, "web", 1)
    assert ("update_status", "ConfigDeployment", "web") in operator.writes[writes:]


def test_a_config_map_rolls_exactly_its_users_in_its_namespace(
    start_operator: Callable[[str | None], Operator],
    cluster: Cluster,
    namespace: str,
    other_namespace: str,
) -> None:
    for ns in (namespace, other_namespace):
        cluster.write.create(CONFIG_MAP, config_map_body(ns, "shared", {"v": "1"}))
    cluster.write.create(CONFIG_MAP, config_map_body(namespace, "unrelated", {"v": "1"}))
    users = {(namespace, "one"), (namespace, "two")}
    bystanders = {(namespace, "three"), (other_namespace, "four")}
    for ns, name in sorted(users):
        cluster.write.create(CONFIG_DEPLOYMENT, config_deployment_body(ns, name, "shared"))
    cluster.write.create(CONFIG_DEPLOYMENT, config_deployment_body(namespace, "three", "unrelated"))
    cluster.write.create(
        CONFIG_DEPLOYMENT, config_deployment_body(other_namespace, "four", "shared")
    )
    operator = start_operator(None)  # all namespaces
    for ns, name in users | bystanders:
        wait_until_rolled_out(cluster, ns, name, 1)
    before = {key: cluster.deployment_hash(*key) for key in users | bystanders}

    started = time.monotonic()
    cluster.update_config_map(namespace, "shared", data={"v": "2"})
    for ns, name in users:
        wait_for(
            functools.partial(rolled_to, cluster, ns, name, full_hash({"v": "2"})),
            TIMEOUT,
            message=f"{ns}/{name} rolled",
        )

    def mapped() -> set[tuple[str, str]]:
        return {
            (c.request.namespace, c.request.name)
            for c in operator.reconciler.calls()
            if c.started >= started
        }

    # A reconcile already running when the ConfigMap changed may roll a user first; the
    # ConfigMap event still enqueues it, and it is reconciled again right after.
    wait_for(lambda: users <= mapped(), TIMEOUT, message="every user reconciled after the change")
    shared = cluster.read.get(CONFIG_MAP, "shared", namespace)
    assert set(config_map_requests(operator.manager.client)(shared)) == {
        Request(ns, name) for ns, name in users
    }
    for key in bystanders:
        assert cluster.deployment_hash(*key) == before[key], f"{key} must not roll"

    # The same-named ConfigMap in the other namespace rolls its user there, and only it.
    cluster.update_config_map(other_namespace, "shared", data={"v": "3"})
    wait_for(
        lambda: cluster.deployment_hash(other_namespace, "four") == full_hash({"v": "3"}),
        TIMEOUT,
        message="four rolled",
    )
    for ns, name in users:
        assert cluster.deployment_hash(ns, name) == full_hash({"v": "2"})
    assert cluster.deployment_hash(namespace, "three") == before[(namespace, "three")]


def test_a_missing_config_map_degrades_until_created_without_polling(
    start_operator: Callable[[str | None], Operator], cluster: Cluster, namespace: str
) -> None:
    created = cluster.write.create(
        CONFIG_DEPLOYMENT, config_deployment_body(namespace, "web", "later")
    )
    operator = start_operator(namespace)
    seen: list[float] = []

    class ConfigMapWatch:
        """Records when the manager's ConfigMap informer delivers the ConfigMap."""

        def on_add(self, obj: objects.Obj) -> None:
            if objects.name_of(obj) == "later":
                seen.append(time.monotonic())

        def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
            self.on_add(new)

        def on_delete(self, obj: objects.Obj) -> None:
            pass

    operator.manager.cache.informer(CONFIG_MAP).add_handler(ConfigMapWatch())

    wait_for(
        lambda: cluster.condition(namespace, "web", "Degraded") == ("True", "ConfigMapNotFound"),
        TIMEOUT,
        message="Degraded=True ConfigMapNotFound",
    )
    message: str = wait_for(
        lambda: cluster.event_reasons(created).get("ConfigMapNotFound") or "",
        TIMEOUT,
        message="ConfigMapNotFound event",
    )
    assert "spec.configMap" in message
    assert "'later'" in message
    assert repr(namespace) in message
    assert cluster.get(DEPLOYMENT, "web", namespace) is None
    degraded_calls = operator.reconciler.calls("web")
    # Every reconcile so far finished without error and without a requeue timer, so
    # nothing but a watch event can bring the request back.
    assert degraded_calls
    assert [(c.error, c.result) for c in degraded_calls if c.error or c.result != Result()] == []

    cluster.write.create(CONFIG_MAP, config_map_body(namespace, "later", {"k": "v"}))
    wait_until_rolled_out(cluster, namespace, "web", 1)
    assert cluster.condition(namespace, "web", "Degraded") == ("False", "AsExpected")
    assert cluster.deployment_hash(namespace, "web") == full_hash({"k": "v"})
    calls = operator.reconciler.calls("web")
    assert all(c.error is None and c.result == Result() for c in calls)
    assert seen, "the ConfigMap informer never delivered the new ConfigMap"
    resolving = calls[len(degraded_calls)]
    assert resolving.started >= seen[0], "resolved before the ConfigMap event: not by the watch"


def test_switching_the_config_map_switches_the_hash(
    start_operator: Callable[[str | None], Operator], cluster: Cluster, namespace: str
) -> None:
    cluster.write.create(CONFIG_MAP, config_map_body(namespace, "blue", {"colour": "blue"}))
    cluster.write.create(CONFIG_MAP, config_map_body(namespace, "green", {"colour": "green"}))
    cluster.write.create(CONFIG_DEPLOYMENT, config_deployment_body(namespace, "web", "blue"))
    operator = start_operator(namespace)
    wait_until_rolled_out(cluster, namespace, "web", 1)
    assert cluster.deployment_hash(namespace, "web") == full_hash({"colour": "blue"})

    cluster.write.patch(
        CONFIG_DEPLOYMENT, "web", {"spec": {"configMap": "green"}}, namespace=namespace
    )
    wait_for(
        lambda: cluster.deployment_hash(namespace, "web") == full_hash({"colour": "green"}),
        TIMEOUT,
        message="the green hash",
    )
    wait_until_rolled_out(cluster, namespace, "web", 1)
    # The index moved with the spec: green's changes roll it; blue no longer maps to it.
    cluster.update_config_map(namespace, "green", data={"colour": "teal"})
    wait_for(
        lambda: cluster.deployment_hash(namespace, "web") == full_hash({"colour": "teal"}),
        TIMEOUT,
        message="the teal hash",
    )
    mapper = config_map_requests(operator.manager.client)
    blue = cluster.read.get(CONFIG_MAP, "blue", namespace)
    green = cluster.read.get(CONFIG_MAP, "green", namespace)
    assert mapper(blue) == []
    assert mapper(green) == [Request(namespace, "web")]


def test_deleting_the_config_map_keeps_the_deployment_and_its_pods(
    start_operator: Callable[[str | None], Operator], cluster: Cluster, namespace: str
) -> None:
    cluster.write.create(CONFIG_MAP, config_map_body(namespace, "settings", {"a": "1"}))
    cluster.write.create(
        CONFIG_DEPLOYMENT, config_deployment_body(namespace, "web", "settings", replicas=2)
    )
    operator = start_operator(namespace)
    wait_until_rolled_out(cluster, namespace, "web", 2)
    pods = cluster.ready_pods(namespace, "web")
    deployment = cluster.read.get(DEPLOYMENT, "web", namespace)

    writes = len(operator.writes)
    cluster.write.delete(CONFIG_MAP, "settings", namespace=namespace)
    wait_for(
        lambda: cluster.condition(namespace, "web", "Degraded") == ("True", "ConfigMapNotFound"),
        TIMEOUT,
        message="Degraded=True ConfigMapNotFound",
    )
    after = cluster.read.get(DEPLOYMENT, "web", namespace)
    assert after["metadata"]["uid"] == deployment["metadata"]["uid"]
    assert after["metadata"]["generation"] == deployment["metadata"]["generation"]
    assert state.rolled_out_hash(after) == full_hash({"a": "1"})
    assert cluster.ready_pods(namespace, "web") == pods
    status = cluster.status(namespace, "web")
    assert status["configMapHash"] == full_hash({"a": "1"})[:10]
    assert status["readyReplicas"] == 2
    assert all(kind != "Deployment" for _, kind, _ in operator.writes[writes:])


def test_the_map_function_refuses_an_unindexed_field(
    control_plane: ControlPlane, crds: None, namespace: str
) -> None:
    rest = RestClient(load_configuration(str(control_plane.kubeconfig)))
    manager = Manager(rest, Options(health_probe_bind_address="0", namespace=namespace))
    config_map = objects.freeze(
        {"metadata": {"name": "settings", "namespace": namespace}, "data": {}}
    )
    try:
        with pytest.raises(UnindexedFieldError, match=CONFIG_MAP_INDEX):
            config_map_requests(manager.client)(config_map)
        manager.cache.index_field(CONFIG_DEPLOYMENT, CONFIG_MAP_INDEX, config_map_index)
        assert config_map_requests(manager.client)(config_map) == []
        with pytest.raises(UnindexedFieldError, match=r"\.spec\.template"):
            manager.client.list(
                CONFIG_DEPLOYMENT, namespace=namespace, matching_fields={".spec.template": "x"}
            )
    finally:
        manager.cache.stop()
