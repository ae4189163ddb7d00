"""No single stored object stops an informer; a watch ended at once is not reopened at once.

Issue 35, on the real control plane, without the webhooks in the path (as a cluster
whose webhook is down, or an object stored before it existed):

* A CronJob 4.5 KB long, nested 600 levels deep under its pod template's ``affinity``
  (``x-kubernetes-preserve-unknown-fields``), and a ConfigDeployment nested as deep in
  its ``template``, are created in one namespace. A CronJob and a ConfigDeployment
  created after them in another namespace must be served: the CronJob's Job of its next
  minute is created and the ConfigDeployment's Deployment appears, both while the
  manager runs (the watch carries the poison) and after a restart (the initial sync
  carries it). Before the fix the reflector's freeze raised RecursionError, the CronJob
  informer never synced again, and nothing created after the poison was ever seen.
* A reflector behind the fault-injecting proxy, which ends every watch at once without
  an event, must back off as client-go does: a bounded number of watches in a window,
  not thousands (6,089 in 3 s against a stub before the fix).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s_client

from cronjob_operator.api.apps_v1 import CONFIG_DEPLOYMENT
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers import configdeployment, cronjob
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache import Reflector, Store
from cronjob_operator.runtime.cache import _reflector as reflector_module
from cronjob_operator.runtime.client import RestClient
from cronjob_operator.runtime.controller import Controller
from cronjob_operator.runtime.controllerutil import parse_time
from cronjob_operator.runtime.kinds import CONFIG_MAP
from cronjob_operator.runtime.manager import Manager
from cronjob_operator.runtime.metrics import Metrics
from tests.faultproxy import FaultProxy
from tests.integration.support import install_crds, running_manager
from tests.integration.test_bad_input import cronjob_object
from tests.integration.test_configdeployment import (  # other_namespace: a fixture
    config_deployment_body,
    config_map_body,
    other_namespace,  # noqa: F401
)

POISON_DEPTH = 600
RUN_WAIT = 150.0
"""Long enough for a ``* * * * *`` CronJob's next minute and its Job's creation."""
WINDOW = 3.0
"""The window the issue counted watch requests in."""
SETUPS: dict[str, Callable[[Manager], Controller]] = {
    "cronjob": cronjob.setup,
    "configdeployment": configdeployment.setup,
}


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def poison_cronjob(namespace: str) -> dict[str, Any]:
    """The issue's CronJob: valid in every field the schema types, 600 deep in affinity.
    It never fires (its own runs are not what this test is about)."""
    obj = cronjob_object("poison", namespace, schedule="0 0 1 1 *")
    obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["affinity"] = nested(POISON_DEPTH)
    return obj


def affinity_of(cronjob: dict[str, Any]) -> Any:
    return cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["affinity"]


def poison_config_deployment(namespace: str) -> dict[str, Any]:
    obj = config_deployment_body(namespace, "poison", "settings")
    obj["spec"]["template"]["spec"]["affinity"] = nested(POISON_DEPTH)
    return {"apiVersion": CONFIG_DEPLOYMENT.api_version, "kind": "ConfigDeployment", **obj}


def create(control_plane: ControlPlane, obj: dict[str, Any]) -> None:
    result = control_plane.kubectl("create", "-f", "-", input=json.dumps(obj))
    assert result.returncode == 0, result.stderr


class Bystander:
    """A CronJob (``* * * * *``) and a ConfigDeployment in a namespace of their own."""

    def __init__(self, control_plane: ControlPlane, namespace: str) -> None:
        self.control_plane, self.namespace = control_plane, namespace

    def create(self, name: str) -> datetime:
        """Create both under ``name``; returns when the CronJob was created."""
        create(self.control_plane, cronjob_object(name, self.namespace, schedule="* * * * *"))
        body = config_deployment_body(self.namespace, name, "settings")
        create(
            self.control_plane,
            {"apiVersion": CONFIG_DEPLOYMENT.api_version, "kind": "ConfigDeployment", **body},
        )
        resource = f"{CRONJOB.plural}.{CRONJOB.group}"
        stored = self.control_plane.kubectl_json("get", resource, name, "-n", self.namespace)
        created = parse_time(stored["metadata"]["creationTimestamp"])
        assert created is not None
        return created

    def run_after(self, name: str, moment: datetime) -> float:
        """Wait for the CronJob's first Job scheduled after ``moment``; return how late it
        was created (seconds after its scheduled time)."""

        def late_by() -> float | None:
            jobs = self.control_plane.kubectl_json("get", "jobs", "-n", self.namespace)["items"]
            for job in jobs:
                prefix, _, stamp = job["metadata"]["name"].rpartition("-")
                scheduled = datetime.fromtimestamp(int(stamp), UTC) if stamp.isdigit() else None
                if prefix == name and scheduled is not None and scheduled > moment:
                    created = parse_time(job["metadata"]["creationTimestamp"])
                    assert created is not None
                    return (created - scheduled).total_seconds()
            return None

        wait_for(lambda: late_by() is not None, RUN_WAIT, message=f"a run of {name}")
        lateness = late_by()
        assert lateness is not None
        return lateness

    def deployment_of(self, name: str) -> None:
        wait_for(
            lambda: (
                self.control_plane.kubectl(
                    "get", "deployment", name, "-n", self.namespace
                ).returncode
                == 0
            ),
            60,
            message=f"the Deployment of ConfigDeployment {name}",
        )


def skipped(manager: Manager) -> dict[str, float]:
    """``informer_objects_skipped_total`` by kind, where not 0: what the manager skipped."""
    return {
        sample.labels["kind"]: sample.value
        for metric in manager.metrics.informer_objects_skipped.collect()
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.value
    }


def assert_config_deployment_served_whole(manager: Manager, namespace: str) -> None:
    """The poison ConfigDeployment is in ``manager``'s cache, its template as created."""
    cached = objects.thaw(manager.cache.get(CONFIG_DEPLOYMENT, "poison", namespace))
    sent = poison_config_deployment(namespace)["spec"]["template"]["spec"]["affinity"]
    assert cached["spec"]["template"]["spec"]["affinity"] == sent, "the poison, whole"


def test_a_poison_object_stops_no_other_namespace_running_or_after_a_restart(
    control_plane: ControlPlane,
    namespace: str,
    other_namespace: str,  # noqa: F811  (the fixture imported above)
) -> None:
    install_crds(control_plane)
    bystander = Bystander(control_plane, other_namespace)
    settings = config_map_body(other_namespace, "settings", {"k": "v"})
    create(control_plane, {"apiVersion": "v1", "kind": "ConfigMap", **settings})
    poison = poison_cronjob(namespace)
    assert 4_000 < len(json.dumps(poison)) < 5_000, "the issue's 4.5 KB object"

    with running_manager(control_plane, SETUPS) as running:
        create(control_plane, poison)
        create(control_plane, poison_config_deployment(namespace))
        created = bystander.create("first")  # after the poison: the watch must go on
        lateness = bystander.run_after("first", created)
        bystander.deployment_of("first")
        cached = objects.thaw(running.manager.cache.get(CRONJOB, "poison", namespace))
        assert affinity_of(cached) == affinity_of(poison), "the poison is served, whole"
        assert_config_deployment_served_whole(running.manager, namespace)
        assert skipped(running.manager) == {}, "decoded, not skipped"
    print(f"\nbystander CronJob run with the poison watched: {lateness:.1f}s after its time")

    with running_manager(control_plane, SETUPS) as running:  # the initial sync holds it
        created = bystander.create("second")
        lateness = bystander.run_after("second", created)
        bystander.deployment_of("second")
        cached = objects.thaw(running.manager.cache.get(CRONJOB, "poison", namespace))
        assert affinity_of(cached) == affinity_of(poison), "synced again, whole"
        assert_config_deployment_served_whole(running.manager, namespace)
        assert skipped(running.manager) == {}
    print(f"bystander CronJob run after a restart with the poison: {lateness:.1f}s late")


@contextlib.contextmanager
def reflecting_through(proxy: FaultProxy, namespace: str) -> Iterator[None]:
    """A ConfigMap reflector of ``namespace`` through ``proxy``, running in a thread (a
    paged LIST, which the proxy forwards, then watches), from its sync on."""
    rest = RestClient(k8s_client.Configuration(host=proxy.url), timeout=10.0)
    store, synced, stop = Store(), threading.Event(), threading.Event()

    class Sink:
        def on_add(self, obj: objects.Obj) -> None: ...
        def on_update(self, old: objects.Obj, new: objects.Obj) -> None: ...
        def on_delete(self, obj: objects.Obj) -> None: ...
        def on_synced(self) -> None:
            synced.set()

    reflector = Reflector(
        rest, CONFIG_MAP, store, Sink(), namespace=namespace, watch_list=False, metrics=Metrics()
    )
    thread = threading.Thread(target=reflector.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(synced.is_set, 30, message="the reflector's LIST through the proxy")
        yield
    finally:
        stop.set()
        reflector.stop()
        thread.join(10)
        rest.close()
        assert not thread.is_alive()


def most_watches_in(window: float) -> int:
    """The most watches the reflector's backoff allows in ``window`` seconds after its
    sync: one at once, then one after each delay (each at least 0.8 s doubling)."""
    count, elapsed, delay = 1, 0.0, reflector_module.BACKOFF_INITIAL
    while elapsed + delay <= window:
        count, elapsed, delay = count + 1, elapsed + delay, delay * 2
    return count


def test_watches_ended_at_once_by_a_proxy_are_reopened_with_backoff(
    control_plane: ControlPlane, namespace: str
) -> None:
    with FaultProxy(str(control_plane.kubeconfig)) as proxy:
        proxy.end_watches()
        with reflecting_through(proxy, namespace):
            wait_for(lambda: proxy.watches_ended >= 1, 30, message="the first watch")
            before = proxy.watches_ended
            time.sleep(WINDOW)  # the measurement window: how many watches does it open?
            opened = proxy.watches_ended - before
            wait_for(
                lambda: proxy.watches_ended > before + opened,
                reflector_module.BACKOFF_MAXIMUM * 2,
                message="one more watch: the reflector backs off, it does not give up",
            )
    print(f"\nwatches opened in {WINDOW:.0f}s against a proxy that ends each at once: {opened}")
    assert opened <= most_watches_in(WINDOW)  # before the fix: thousands
