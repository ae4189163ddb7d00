"""Retries against the real API server, through a proxy that loses responses.

A ``generateName`` create whose response is lost after the server made the object must
not be sent again (a second POST makes a second object); a GET whose response is lost
is sent again; a write the server asks to retry (429 with ``Retry-After``) is. The
proxy counts what reached it, and the API server itself says how many objects exist.
The classification on its own is in tests/unit/test_retries.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client

from cronjob_operator.envtest import ControlPlane
from cronjob_operator.runtime import errors
from cronjob_operator.runtime.client import RestClient, load_configuration
from tests.faultproxy import FaultProxy

PREFIX = "lost-"


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy(str(control_plane.kubeconfig)) as running:
        yield running


@pytest.fixture
def through_proxy(proxy: FaultProxy) -> RestClient:
    return RestClient(k8s_client.Configuration(host=proxy.url), timeout=10.0)


@pytest.fixture
def direct(control_plane: ControlPlane) -> RestClient:
    return RestClient(load_configuration(str(control_plane.kubeconfig)))


def configmaps(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps"


def made(direct: RestClient, namespace: str) -> list[str]:
    """The names of the configmaps the creates made, as the API server lists them."""
    items = direct.request("GET", configmaps(namespace))["items"]
    return [i["metadata"]["name"] for i in items if i["metadata"]["name"].startswith(PREFIX)]


def test_a_generate_name_create_whose_response_is_lost_reaches_the_server_once(
    proxy: FaultProxy, through_proxy: RestClient, direct: RestClient, namespace: str
) -> None:
    proxy.lose_responses("POST", times=20)
    body = {"metadata": {"generateName": PREFIX}, "data": {"k": "v"}}
    with pytest.raises(errors.ConnectionLost):
        through_proxy.request("POST", configmaps(namespace), body=body)
    assert proxy.count("POST", configmaps(namespace)) == 1
    assert len(made(direct, namespace)) == 1


def test_a_get_whose_response_is_lost_is_sent_again(
    proxy: FaultProxy, through_proxy: RestClient, namespace: str
) -> None:
    proxy.lose_responses("GET", times=1)
    listed = through_proxy.request("GET", configmaps(namespace))
    assert listed["kind"] == "ConfigMapList"
    assert proxy.count("GET", configmaps(namespace)) == 2


def test_a_create_the_server_asks_to_retry_is_retried_and_made_once(
    proxy: FaultProxy, through_proxy: RestClient, direct: RestClient, namespace: str
) -> None:
    proxy.answer("POST", 429, retry_after="1", times=1)
    body = {"metadata": {"generateName": PREFIX}}
    created = through_proxy.request("POST", configmaps(namespace), body=body)
    assert proxy.count("POST", configmaps(namespace)) == 2
    assert made(direct, namespace) == [created["metadata"]["name"]]
