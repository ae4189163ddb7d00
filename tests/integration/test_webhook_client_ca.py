"""``--webhook-client-ca`` with the real API server: it presents the client certificate of
its AdmissionConfiguration's kubeconfig, and only then are its reviews answered.

A control plane of its own, started with ``--admission-control-config-file`` naming a
kubeconfig whose one user, ``127.0.0.1:<port of the trusted server>``, holds a client
certificate signed by the webhook client CA. Two webhook servers require that CA: the
API server presents the certificate to the one its kubeconfig names, and its review is
answered; to the other it presents none, the server answers 401 and the write fails.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from cronjob_operator.envtest import Component, ControlPlane
from cronjob_operator.runtime.webhook import WebhookServer
from cronjob_operator.webhooks import manifests
from tests.integration.support import install_crds
from tests.integration.test_webhooks import a_cronjob, generate_certs
from tests.unit.test_webhook_client_ca import client_ca_server, client_certificate

WEBHOOK_PLUGINS = ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")


@dataclass
class Cluster:
    plane: ControlPlane
    certs: Path
    trusted: WebhookServer
    """The server the API server's kubeconfig names (it gets the client certificate)."""
    stranger: WebhookServer
    """A server the kubeconfig does not name (no certificate is presented to it)."""

    def register(self, server: WebhookServer) -> None:
        """Point every admission webhook at ``server``."""
        ca_pem = (self.certs / "ca.crt").read_bytes()
        client_config = manifests.url_client_config(f"https://127.0.0.1:{server.port}", ca_pem)
        documents = manifests.render_yaml(manifests.configurations(client_config))
        result = self.plane.kubectl("apply", "-f", "-", input=documents)
        assert result.returncode == 0, result.stderr

    def dry_run_create(self, schedule: str) -> subprocess.CompletedProcess[str]:
        obj = a_cronjob("client-ca", "default", schedule=schedule)
        return self.plane.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj))


def admission_configuration(kubeconfig: Path) -> dict[str, object]:
    return {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [
            {
                "name": plugin,
                "configuration": {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": "WebhookAdmissionConfiguration",
                    "kubeConfigFile": str(kubeconfig),
                },
            }
            for plugin in WEBHOOK_PLUGINS
        ],
    }


def webhook_kubeconfig(user: str, cert: Path, key: Path) -> dict[str, object]:
    """The API server's credentials for webhooks: one user, named after the host:port."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "users": [
            {"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    certs = tmp_path_factory.mktemp("client-ca")
    generate_certs(certs)
    cert, key = client_certificate(certs, "kube-apiserver", certs)
    trusted, stranger = client_ca_server(certs), client_ca_server(certs)
    kubeconfig = certs / "webhook-client.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(webhook_kubeconfig(f"127.0.0.1:{trusted.port}", cert, key))
    )
    admission = certs / "admission.yaml"
    admission.write_text(yaml.safe_dump(admission_configuration(kubeconfig)))
    flag = f"--admission-control-config-file={admission}"
    plane = ControlPlane(extra_args={str(Component.APISERVER): [flag]})
    plane.start()
    try:
        install_crds(plane)
        yield Cluster(plane, certs, trusted, stranger)
    finally:
        plane.stop()
        trusted.stop()
        stranger.stop()


def test_the_api_server_presents_its_client_certificate_and_is_answered(
    cluster: Cluster,
) -> None:
    cluster.register(cluster.trusted)
    rejected = cluster.dry_run_create("60 * * * *")
    assert "minute 60 is out of range" in rejected.stderr  # the webhook judged it
    assert cluster.dry_run_create("*/5 * * * *").returncode == 0


def test_a_webhook_the_kubeconfig_does_not_name_refuses_the_api_server(
    cluster: Cluster,
) -> None:
    cluster.register(cluster.stranger)
    refused = cluster.dry_run_create("*/5 * * * *")
    assert refused.returncode != 0
    assert "failed calling webhook" in refused.stderr
    assert "serves only clients with a certificate signed by its client CA" in refused.stderr
