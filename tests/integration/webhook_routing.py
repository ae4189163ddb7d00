"""The webhooks wired to a Service on the local control plane, as config/default wires them.

There is no Pod behind the Service: ``service_and_endpoints`` makes a Service that
selects nothing and an EndpointSlice to a server of the test's (on this host's own
address: an endpoint may not be a loopback one). kube-apiserver runs with
``--enable-aggregator-routing``, so it calls the Service at that endpoint (no kube-proxy
needed) and verifies the server's certificate against ``<service>.<namespace>.svc``.
``register`` points both webhook configurations and the CronJob CRD's conversion at the
Service, with no ``caBundle``; ``unregister`` undoes it.
"""

from __future__ import annotations

import subprocess
from typing import Any

from cronjob_operator.api import batch_v1
from cronjob_operator.envtest import ControlPlane
from cronjob_operator.webhooks import conversion, manifests
from tests.integration.support import conversion_patches

CRD = f"cronjobs.{batch_v1.CRONJOB.group}"


def host_address() -> str:
    """This host's first global IPv4 address."""
    shown = subprocess.run(
        ["ip", "-4", "-o", "address", "show", "scope", "global"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert "inet" in shown, "this host has no global IPv4 address for an endpoint"
    return shown[shown.index("inet") + 1].partition("/")[0]


def service_and_endpoints(
    service: str, namespace: str, address: str, port: int
) -> list[dict[str, Any]]:
    """The Service ``service``, selecting nothing, and an EndpointSlice to ``address:port``."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": service, "namespace": namespace},
            "spec": {"ports": [{"name": "webhook", "port": 443, "targetPort": port}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{service}-1",
                "namespace": namespace,
                "labels": {"kubernetes.io/service-name": service},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": "webhook", "port": port, "protocol": "TCP"}],
        },
    ]


def a_cronjob(name: str, namespace: str, schedule: str = "*/5 * * * *") -> dict[str, Any]:
    """A v1 CronJob the schema admits; the validating webhook refuses a bad ``schedule``."""
    pod = {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}
    return {
        "apiVersion": batch_v1.CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": pod}}}},
    }


def register(plane: ControlPlane, service: str, namespace: str, names: dict[str, str]) -> None:
    """Both webhook configurations (named by kind in ``names``) and the CRD's conversion
    at the Service, without a ``caBundle``."""

    def client_config(path: str) -> dict[str, Any]:
        return {"service": {"name": service, "namespace": namespace, "path": path}}

    configurations = manifests.configurations(client_config)
    for obj in configurations:
        obj["metadata"]["name"] = names[obj["kind"]]
    result = plane.kubectl("apply", "-f", "-", input=manifests.render_yaml(configurations))
    assert result.returncode == 0, result.stderr
    forward, _ = conversion_patches(client_config(conversion.PATH))
    result = plane.kubectl("patch", "crd", CRD, "--type=json", "-p", forward)
    assert result.returncode == 0, result.stderr


def unregister(plane: ControlPlane, names: dict[str, str]) -> None:
    """The CRD back to no conversion (v2 not served); the configurations deleted."""
    _, back = conversion_patches({"url": "https://unused"})
    plane.kubectl("patch", "crd", CRD, "--type=json", "-p", back, check=True)
    for kind, name in names.items():
        plane.kubectl("delete", kind, name, "--ignore-not-found")
