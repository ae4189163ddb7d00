"""The informer's initial sync on a real API server, streamed and, when refused, listed.

Every supported kube-apiserver (1.34 to 1.37) serves streaming lists by default (KEP-3157,
feature gate ``WatchList``: beta and on since 1.34; 1.32 had it on, 1.33 off), so the
session's control plane covers the streamed path. A second control plane started with
``--feature-gates=WatchList=false`` refuses them, as 1.33 does, which covers the
fallback to a paged LIST. hack/test.sh runs both on the oldest and the newest release.
Either way the cache must equal the server and keep following it afterwards.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache import Informer
from cronjob_operator.runtime.client import RestClient, load_configuration
from cronjob_operator.runtime.kinds import CONFIG_MAP


@pytest.fixture(scope="module")
def plane_without_watch_list() -> Iterator[ControlPlane]:
    plane = ControlPlane(feature_gates={"WatchList": False})
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


def configmap(name: str, namespace: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "data": {"v": name}}


def fresh_namespace(plane: ControlPlane) -> str:
    name = f"test-{secrets.token_hex(4)}"
    plane.kubectl("create", "namespace", name, check=True)
    return name


def sync_and_follow(plane: ControlPlane) -> Informer:
    """Sync an informer over 3 ConfigMaps, then check it follows a create and a delete."""
    rest = RestClient(load_configuration(str(plane.kubeconfig)))
    namespace = fresh_namespace(plane)
    path = CONFIG_MAP.collection_path(namespace)
    for i in range(3):
        rest.request("POST", path, body=configmap(f"before-{i}", namespace))
    informer = Informer(rest, CONFIG_MAP, namespace=namespace)
    informer.start()
    try:
        assert informer.wait_for_sync(60)
        names = {objects.name_of(obj) for obj in informer.store.list()}
        assert names == {"before-0", "before-1", "before-2"}
        rest.request("POST", path, body=configmap("after", namespace))
        rest.request("DELETE", CONFIG_MAP.object_path(namespace, "before-0"))
        wait_for(
            lambda: (
                {objects.name_of(obj) for obj in informer.store.list()}
                == {"before-1", "before-2", "after"}
            ),
            30,
            message="the cache follows the server after the initial sync",
        )
    finally:
        informer.stop()
        plane.kubectl("delete", "namespace", namespace, "--wait=false")
    return informer


def test_the_initial_state_is_streamed_when_the_server_serves_watch_lists(
    control_plane: ControlPlane,
) -> None:
    informer = sync_and_follow(control_plane)
    reflector = informer._reflector
    assert (reflector.streamed_syncs, reflector.listed_syncs) == (1, 0)


def test_a_server_without_watch_lists_is_listed_in_pages(
    plane_without_watch_list: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cronjob_operator.runtime.cache._reflector")
    informer = sync_and_follow(plane_without_watch_list)
    reflector = informer._reflector
    assert (reflector.streamed_syncs, reflector.listed_syncs) == (0, 1)
    assert any("refused a streaming list" in r.getMessage() for r in caplog.records)
