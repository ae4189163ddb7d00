"""The ConfigDeployment controller on the real local control plane (kwok runs the pods).

Each test runs a ``Manager`` in-process on a background thread with the controller set
up as ``cli`` would, its reconciler wrapped to record every call (request, result,
error, when) and its client's writes counted, so a test can assert both what the
cluster shows and what the controller did (no requeue timers, no writes on a no-op).
The test itself writes with its own uncached client and polls with deadlines.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from cronjob_operator.api.apps_v1 import CONFIG_DEPLOYMENT
from cronjob_operator.controllers.configdeployment import (
    CONFIG_MAP_INDEX,
    config_map_index,
    config_map_requests,
    decide,
    setup,
)
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.cache import UnindexedFieldError
from cronjob_operator.runtime.client import (
    Client,
    LiveReader,
    RestClient,
    Writer,
    load_configuration,
)
from cronjob_operator.runtime.controller import Controller, Reconciler, Request, Result
from cronjob_operator.runtime.kinds import CONFIG_MAP, DEPLOYMENT, EVENT, POD, REPLICA_SET, SECRET
from cronjob_operator.runtime.leaderelection import LeaderElectionConfig
from cronjob_operator.runtime.manager import Manager, Options
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
    """Every write the controller sent, in order: (method, kind, name)."""
    conflicts: list[tuple[str, str, str]] = field(default_factory=list)
    """The writes among them that the API server refused as conflicting with what it
    holds (a stale cache): an update's Conflict, a create's AlreadyExists."""


def count_writes(client: Client, operator: Operator) -> None:
    """Record (method, kind, name) for every write ``client`` sends, events included, and
    which of them were refused as conflicts."""
    for method in WRITE_METHODS:
        inner = getattr(client, method)

        def wrapper(kind: Any, *args: Any, _inner: Any = inner, _m: str = method, **kw: Any) -> Any:
            target = args[0] if args else kw.get("obj", kw.get("name"))
            name = target if isinstance(target, str) else objects.name_of(target or {})
            operator.writes.append((_m, kind.kind, name))
            try:
                return _inner(kind, *args, **kw)
            except (errors.Conflict, errors.AlreadyExists):
                operator.conflicts.append((_m, kind.kind, name))
                raise

        setattr(client, method, wrapper)


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


@pytest.fixture
def rest(control_plane: ControlPlane, crds: None) -> RestClient:
    return RestClient(load_configuration(str(control_plane.kubeconfig)))


@contextlib.contextmanager
def operator_running(
    control_plane: ControlPlane, namespace: str | None, options: Options | None = None
) -> Iterator[Operator]:
    """A manager with the (instrumented) ConfigDeployment controller, until the block ends."""
    made: list[Operator] = []

    def instrumented_setup(manager: Manager) -> Controller:
        controller = setup(manager)
        recording = RecordingReconciler(controller.reconciler)
        controller.reconciler = recording
        operator = Operator(manager, controller, recording)
        count_writes(manager.client, operator)
        made.append(operator)
        return controller

    with running_manager(
        control_plane,
        {"configdeployment": instrumented_setup},
        namespace=namespace,
        options=options,
    ):
        yield made[0]


@pytest.fixture
def start_operator(
    control_plane: ControlPlane, crds: None
) -> Iterator[Callable[[str | None], Operator]]:
    """Start a manager with the ConfigDeployment controller over one namespace (or all)."""
    with contextlib.ExitStack() as stack:

        def start(namespace: str | None) -> Operator:
            return stack.enter_context(operator_running(control_plane, namespace))

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
        return None if deployment is None else decide.rolled_out_hash(deployment)

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
            REPLICA_SET, namespace=namespace, label_selector={decide.SELECTOR_LABEL: name}
        )

    def ready_pods(self, namespace: str, name: str) -> list[str]:
        pods = self.read.list(
            POD, namespace=namespace, label_selector={decide.SELECTOR_LABEL: name}
        )
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
    assert decide.rolled_out_hash(deployment) == full_hash(data)
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["selector"] == {"matchLabels": {decide.SELECTOR_LABEL: "web"}}
    owner = objects.controller_ref(deployment)
    assert owner is not None
    assert (owner["uid"], owner["blockOwnerDeletion"]) == (created["metadata"]["uid"], True)
    status = cluster.status(namespace, "web")
    assert status["configMapHash"] == full_hash(data)[: decide.SHORT_HASH_LENGTH]
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

    created_at = time.monotonic()
    cluster.write.create(CONFIG_MAP, config_map_body(namespace, "later", {"k": "v"}))
    wait_until_rolled_out(cluster, namespace, "web", 1)
    assert cluster.condition(namespace, "web", "Degraded") == ("False", "AsExpected")
    assert cluster.deployment_hash(namespace, "web") == full_hash({"k": "v"})
    calls = operator.reconciler.calls("web")
    assert all(c.error is None and c.result == Result() for c in calls)
    assert seen, "the ConfigMap informer never delivered the new ConfigMap"
    # No reconcile had a timer or an error, so the ones after the create were brought by
    # the ConfigMap's watch event. (The event reaches this test's handler and the
    # controller's on threads of their own, so the order of the two is not a test.)
    assert any(c.started >= created_at for c in calls), "no reconcile after the create"


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
    assert decide.rolled_out_hash(after) == full_hash({"a": "1"})
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


# -- spec.secrets, key filters, restarts and leader changes (issue 23, item 6) -----------


SECRET_VALUE = "correct horse battery staple"


def secret_body(namespace: str, name: str, values: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "stringData": values}


def update_secret(cluster: Cluster, namespace: str, name: str, values: dict[str, str]) -> None:
    body = objects.thaw(cluster.read.get(SECRET, name, namespace))
    body["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}
    cluster.write.update(SECRET, body)


def with_sources(body: dict[str, Any], **sources_spec: Any) -> dict[str, Any]:
    body["spec"].update(sources_spec)
    return body


def namespace_event_text(cluster: Cluster, namespace: str) -> str:
    return json.dumps(cluster.read.list(EVENT, namespace=namespace))


def reconciled_after(operator: Operator, name: str, since: float) -> Callable[[], bool]:
    return lambda: any(c.started >= since for c in operator.reconciler.calls(name))


def deployment_writes(operator: Operator) -> list[tuple[str, str, str]]:
    """The Deployment writes the API server took: a write that a cache lagging the
    controller's own last write sent was refused (an update with a stale resourceVersion:
    Conflict; a create of the Deployment the cache did not hold yet: AlreadyExists) and
    changed nothing, so it is no rollout."""
    refused = list(operator.conflicts)
    taken = []
    for write in operator.writes:
        if write in refused:
            refused.remove(write)
        elif write[1] == "Deployment":
            taken.append(write)
    return taken


def test_a_secret_change_rolls_and_its_value_reaches_no_log_event_or_cache(
    start_operator: Callable[[str | None], Operator],
    cluster: Cluster,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    cluster.write.create(CONFIG_MAP, config_map_body(namespace, "settings", {"mode": "a"}))
    cluster.write.create(SECRET, secret_body(namespace, "db", {"password": SECRET_VALUE}))
    unnamed = secret_body(namespace, "unnamed", {"token": SECRET_VALUE})
    unnamed["metadata"]["annotations"] = {"copy-of-the-data": SECRET_VALUE}  # as kubectl apply
    cluster.write.create(SECRET, unnamed)
    created = cluster.write.create(
        CONFIG_DEPLOYMENT,
        with_sources(
            config_deployment_body(namespace, "web", "settings"), secrets=[{"name": "db"}]
        ),
    )
    operator = start_operator(namespace)
    wait_until_rolled_out(cluster, namespace, "web", 1)
    first = cluster.deployment_hash(namespace, "web")

    rotated = "another secret value"
    update_secret(cluster, namespace, "db", {"password": rotated})
    wait_for(
        lambda: cluster.deployment_hash(namespace, "web") not in (None, first),
        TIMEOUT,
        message="a new hash after the Secret changed",
    )
    wait_until_rolled_out(cluster, namespace, "web", 1)
    assert "RolledOut" in wait_for(
        lambda: cluster.event_reasons(created), TIMEOUT, message="RolledOut event"
    )
    assert [w[0] for w in deployment_writes(operator)] == ["create", "update"]

    cached = [operator.manager.cache.get(SECRET, name, namespace) for name in ("db", "unnamed")]
    for secret in cached:  # the informer is metadata-only: no data, digest or annotation
        assert set(secret) == {"apiVersion", "kind", "metadata"}
        assert "annotations" not in secret["metadata"]
    leaks = {
        "logs": caplog.text,
        "events": namespace_event_text(cluster, namespace),
        "cache": json.dumps(cached),
        "Deployment": json.dumps(cluster.read.get(DEPLOYMENT, "web", namespace)),
    }
    for value in (SECRET_VALUE, rotated):
        for encoded in (value, base64.b64encode(value.encode()).decode()):
            assert [where for where, text in leaks.items() if encoded in text] == []


def test_key_filters_roll_only_when_a_named_key_changes(
    start_operator: Callable[[str | None], Operator], cluster: Cluster, namespace: str
) -> None:
    cluster.write.create(
        CONFIG_MAP, config_map_body(namespace, "settings", {"app.conf": "a", "notes": "x"})
    )
    cluster.write.create(SECRET, secret_body(namespace, "db", {"password": "p", "owner": "o"}))
    cluster.write.create(
        CONFIG_DEPLOYMENT,
        with_sources(
            config_deployment_body(namespace, "web", "settings"),
            configMapKeys=["app.conf"],
            secrets=[{"name": "db", "keys": ["password"]}],
        ),
    )
    operator = start_operator(namespace)
    wait_until_rolled_out(cluster, namespace, "web", 1)
    first = cluster.deployment_hash(namespace, "web")

    # Keys outside the filters: reconciled, nothing written to the Deployment.
    unfiltered: list[Callable[[], None]] = [
        functools.partial(
            cluster.update_config_map, namespace, "settings", data={"app.conf": "a", "notes": "y"}
        ),
        functools.partial(update_secret, cluster, namespace, "db", {"password": "p", "owner": "q"}),
    ]
    for change in unfiltered:
        since = time.monotonic()
        change()
        wait_for(reconciled_after(operator, "web", since), TIMEOUT, message="a reconcile")
    assert deployment_writes(operator) == [("create", "Deployment", "web")]
    assert cluster.deployment_hash(namespace, "web") == first

    # A named key of each source rolls.
    hashes = [first]
    named: list[Callable[[], None]] = [
        functools.partial(
            cluster.update_config_map, namespace, "settings", data={"app.conf": "b", "notes": "y"}
        ),
        functools.partial(
            update_secret, cluster, namespace, "db", {"password": "p2", "owner": "q"}
        ),
    ]
    for change in named:
        change()
        wait_for(
            lambda: cluster.deployment_hash(namespace, "web") not in hashes,
            TIMEOUT,
            message="a new hash after a named key changed",
        )
        hashes.append(cluster.deployment_hash(namespace, "web"))
    assert [w[0] for w in deployment_writes(operator)] == ["create", "update", "update"]


@dataclass(frozen=True)
class Rollouts:
    """What a rollout changes, per Deployment: generation, ReplicaSets, config hash."""

    seen: dict[str, tuple[int, int, str | None]]

    @classmethod
    def now(cls, cluster: Cluster, namespace: str, names: list[str]) -> Rollouts:
        seen = {}
        for name in names:
            deployment = cluster.read.get(DEPLOYMENT, name, namespace)
            seen[name] = (
                int(deployment["metadata"]["generation"]),
                len(cluster.replica_sets(namespace, name)),
                decide.rolled_out_hash(deployment),
            )
        return cls(seen)


def mixed_config_deployments(cluster: Cluster, namespace: str) -> list[str]:
    """Three ConfigDeployments: the original form, one with a Secret, one with filters."""
    cluster.write.create(CONFIG_MAP, config_map_body(namespace, "settings", {"app.conf": "1"}))
    cluster.write.create(SECRET, secret_body(namespace, "db", {"password": "p"}))
    bodies = [
        config_deployment_body(namespace, "plain", "settings"),
        with_sources(
            config_deployment_body(namespace, "with-secret", "settings"),
            secrets=[{"name": "db"}],
        ),
        with_sources(
            config_deployment_body(namespace, "filtered", "settings"),
            configMapKeys=["app.conf"],
            secrets=[{"name": "db", "keys": ["password"]}],
        ),
    ]
    for body in bodies:
        cluster.write.create(CONFIG_DEPLOYMENT, body)
    return [body["metadata"]["name"] for body in bodies]


def wait_until_each_reconciled(operator: Operator, names: list[str]) -> None:
    """Every ConfigDeployment reconciled by this operator, and its queue drained."""
    wait_for(
        lambda: (
            all(operator.reconciler.calls(name) for name in names)
            and len(operator.controller.queue) == 0
        ),
        TIMEOUT,
        message=f"{names} reconciled by the new operator",
    )


def leader_options(namespace: str, identity: str) -> Options:
    return Options(
        namespace=namespace,
        health_probe_bind_address="0",
        leader_election=LeaderElectionConfig(
            name="configdeployment-test",
            namespace=namespace,
            identity=identity,
            lease_duration=4.0,
            renew_deadline=3.0,
            retry_period=0.5,
        ),
    )


def mixed_and_rolled_out(
    control_plane: ControlPlane, cluster: Cluster, namespace: str
) -> tuple[list[str], Rollouts]:
    """The mixed ConfigDeployments, each rolled out once by an operator that then stops,
    and their rollouts at that point."""
    names = mixed_config_deployments(cluster, namespace)
    with operator_running(control_plane, namespace):
        for name in names:
            wait_until_rolled_out(cluster, namespace, name, 1)
    return names, Rollouts.now(cluster, namespace, names)


def test_restarts_and_leader_changes_roll_nothing(
    control_plane: ControlPlane, crds: None, cluster: Cluster, namespace: str
) -> None:
    """Reloader #1089 and #299: a new process must not restart every workload."""
    names, settled = mixed_and_rolled_out(control_plane, cluster, namespace)

    with operator_running(control_plane, namespace) as restarted:
        wait_until_each_reconciled(restarted, names)
    assert deployment_writes(restarted) == []
    assert Rollouts.now(cluster, namespace, names) == settled

    with operator_running(control_plane, None, leader_options(namespace, "a")) as first:
        wait_until_each_reconciled(first, names)
        with operator_running(control_plane, None, leader_options(namespace, "b")) as second:
            assert second.reconciler.calls() == []  # a follower reconciles nothing
            first.manager.stop()  # releases the Lease: b takes over
            wait_until_each_reconciled(second, names)
            assert deployment_writes(second) == []
    assert deployment_writes(first) == []
    assert Rollouts.now(cluster, namespace, names) == settled


def moved_on(cluster: Cluster, namespace: str, name: str, old_hash: str | None) -> bool:
    return cluster.deployment_hash(namespace, name) not in (None, old_hash)


def test_a_change_made_while_the_operator_was_down_rolls_once_when_it_returns(
    control_plane: ControlPlane, crds: None, cluster: Cluster, namespace: str
) -> None:
    """Reloader #814: the change is not lost, and it is rolled out exactly once."""
    names, before = mixed_and_rolled_out(control_plane, cluster, namespace)

    update_secret(cluster, namespace, "db", {"password": "rotated while down"})
    with operator_running(control_plane, namespace) as returned:
        for name in names[1:]:  # the two that read the Secret
            wait_for(
                functools.partial(moved_on, cluster, namespace, name, before.seen[name][2]),
                TIMEOUT,
                message=f"{name} rolled after the operator returned",
            )
        for name in names:
            wait_until_rolled_out(cluster, namespace, name, 1)
        wait_until_each_reconciled(returned, names)
    after = Rollouts.now(cluster, namespace, names)
    assert sorted(deployment_writes(returned)) == [
        ("update", "Deployment", "filtered"),
        ("update", "Deployment", "with-secret"),
    ]
    assert after.seen["plain"] == before.seen["plain"]
    for name in names[1:]:
        generation, replica_sets, _ = before.seen[name]
        assert after.seen[name][:2] == (generation + 1, replica_sets + 1)
