"""What running the manager as a Pod on a real node showed was wrong (issue 21, item 4).

* ``config/manager`` left the pull policy to Kubernetes, which means Always for the
  ``:latest`` tag: the Pod never starts on a cluster whose images are imported.
* The leader-election identity was the host name, which in a Pod is the Pod name only
  by accident of the default ``hostname``; the manifests now pass ``POD_NAME`` from the
  downward API and the identity uses it.
* The HTTPS metrics server logged "serving http".
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronjob_operator.runtime.leaderelection import LeaderElectionConfig
from cronjob_operator.runtime.serving import HttpServer

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


def test_leader_identity_names_the_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "cronjob-operator-controller-manager-7d9f-abcde")
    identity = LeaderElectionConfig(name="lease", namespace="system").identity
    assert identity.startswith("cronjob-operator-controller-manager-7d9f-abcde_")


def test_leader_identity_falls_back_to_the_host_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAME", raising=False)
    identity = LeaderElectionConfig(name="lease", namespace="system").identity
    assert identity.startswith(f"{socket.gethostname()}_")


def test_two_configs_in_one_pod_have_distinct_identities(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POD_NAME", "manager-0")
    first = LeaderElectionConfig(name="lease", namespace="system").identity
    second = LeaderElectionConfig(name="lease", namespace="system").identity
    assert first != second


@pytest.mark.parametrize(
    ("tls", "scheme"),
    [(None, "http"), (lambda: ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), "https")],
)
def test_metrics_server_logs_its_scheme(
    caplog: pytest.LogCaptureFixture, tls: Any, scheme: str
) -> None:
    server = HttpServer(("127.0.0.1", 0), serve_metrics=True, tls=tls)
    stop = threading.Event()
    stop.set()
    with caplog.at_level(logging.INFO, logger="cronjob_operator.runtime.serving._probes"):
        server.run(stop)
    assert [record.getMessage() for record in caplog.records] == [f"serving {scheme}"]
