"""``cronjob-operator run`` with the flags config/default gives it, on the real control plane.

The manager runs as a process (leader election on, as in a cluster), outside a Pod, so
its namespace is ``default``: the Secret, the Lease and the webhook Service are there.
The webhook configurations and the CronJob CRD name the Service, whose only endpoint
is the manager's webhook port on this host's address (``webhook_routing``), and carry no
``caBundle``: the API server can call the webhooks only once the manager has made its
certificate and injected its CA. The test waits for ``/readyz``, then has the API server
refuse a CronJob through the validating webhook (the mutating one is called on the same
create) and convert one to v2, and stops the manager with SIGTERM (exit 0).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronjob_operator.api import batch_v1, batch_v2
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.envtest._components import free_ports
from cronjob_operator.runtime.client import LiveReader, RestClient, Writer, load_configuration
from cronjob_operator.webhooks import manifests
from tests.integration.support import install_crds
from tests.integration.webhook_routing import (
    CRD,
    a_cronjob,
    host_address,
    register,
    service_and_endpoints,
    unregister,
)

pytestmark = pytest.mark.cluster

NAMESPACE = "default"
"""The manager's namespace outside a Pod (no service account namespace file)."""
MANAGER = Path(sys.executable).parent / "cronjob-operator"
TIMEOUT = 90.0


def readyz(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code
    except OSError:
        return None


@contextlib.contextmanager
def manager_process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen([str(MANAGER), "run", *args], stdout=out, stderr=out)
        try:
            yield process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def test_the_manager_makes_injects_and_serves_its_webhook_certificate(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    install_crds(control_plane)
    suffix = secrets.token_hex(4)
    service, secret, lease = f"webhook-{suffix}", f"cert-{suffix}", f"lease-{suffix}"
    names = {
        "MutatingWebhookConfiguration": f"mutating-{suffix}",
        "ValidatingWebhookConfiguration": f"validating-{suffix}",
    }
    webhook_port, health_port = free_ports(2)
    routing = service_and_endpoints(service, NAMESPACE, host_address(), webhook_port)
    args = [
        f"--kubeconfig={control_plane.kubeconfig}",
        "--leader-elect",
        f"--leader-election-id={lease}",
        f"--health-probe-bind-address=127.0.0.1:{health_port}",
        "--metrics-bind-address=0",
        "--log-format=json",
        f"--webhook-port={webhook_port}",
        f"--webhook-cert-dir={tmp_path / 'certs'}",
        f"--webhook-cert-secret={secret}",
        f"--webhook-service={service}",
        f"--inject-ca-bundle=validatingwebhookconfiguration/{names['ValidatingWebhookConfiguration']}",
        f"--inject-ca-bundle=mutatingwebhookconfiguration/{names['MutatingWebhookConfiguration']}",
        f"--inject-ca-bundle=customresourcedefinition/{CRD}",
    ]
    (tmp_path / "certs").mkdir()
    rest = RestClient(load_configuration(str(control_plane.kubeconfig)))
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(rest.close)
        for kind, name in (("secret", secret), ("lease", lease), ("service", service),
                           ("endpointslice", f"{service}-1")):  # fmt: skip
            cleanup.callback(control_plane.kubectl, "delete", kind, name, "-n", NAMESPACE)
        cleanup.callback(unregister, control_plane, names)
        control_plane.kubectl("apply", "-f", "-", input=manifests.render_yaml(routing), check=True)
        register(control_plane, service, NAMESPACE, names)
        started = time.monotonic()
        manager = cleanup.enter_context(manager_process(args, tmp_path / "manager.log"))
        try:
            wait_for(lambda: readyz(health_port) == 200, TIMEOUT, message="the manager ready")
        except Exception:
            print((tmp_path / "manager.log").read_text())
            raise
        ready = time.monotonic() - started
        print(f"\nthe manager Ready (certificate made and injected) {ready:.1f}s after start")
        bad = a_cronjob("bad", NAMESPACE, "60 * * * *")
        refused = control_plane.kubectl("create", "-f", "-", input=json.dumps(bad))
        assert "minute 60 is out of range 0-59" in refused.stderr
        created = Writer(rest).create(batch_v1.CRONJOB, a_cronjob(f"good-{suffix}", NAMESPACE))
        cleanup.callback(
            control_plane.kubectl, "delete", "cronjobs.v1.batch.tutorial.kubebuilder.io",
            created["metadata"]["name"], "-n", NAMESPACE,
        )  # fmt: skip
        as_v2 = LiveReader(rest).get(batch_v2.CRONJOB, f"good-{suffix}", NAMESPACE)
        assert as_v2["spec"]["schedule"] == {"minute": "*/5"}
        manager.send_signal(signal.SIGTERM)
        assert manager.wait(60) == 0
