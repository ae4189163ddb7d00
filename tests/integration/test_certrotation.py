"""The manager's own webhook certificate on the real control plane, called through a Service.

Two replicas run in-process, each a ``CertRotator`` feeding the application's
``WebhookServer`` on this host's own (non-loopback) address: the leader, and a follower
that learns of each pair only from the Secret. Real webhook configurations and the
CronJob CRD's conversion webhook name a Service, as config/default's do, whose only
endpoint (an EndpointSlice made here: there is no Pod) is the follower's server: the local control
plane runs kube-apiserver with ``--enable-aggregator-routing``, so it calls a Service at
its endpoints, and verifies the certificate against ``<service>.<namespace>.svc``, the
name the rotator's certificate carries. The configurations have no ``caBundle`` until
the rotator injects one, so the API server admits and converts only once that worked.

Then: a rotation forced by a short validity while CronJobs are created through both
webhooks and read as v2 through the conversion webhook, counting the requests that
fail (none may); a deleted Secret made again at once (the watch), still trusted; a
configuration re-applied without its bundle gets it back.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from cronjob_operator.api import batch_v1, batch_v2
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime import errors, kinds
from cronjob_operator.runtime.certrotation import (
    CUSTOM_RESOURCE_DEFINITION,
    MUTATING_WEBHOOK_CONFIGURATION,
    VALIDATING_WEBHOOK_CONFIGURATION,
    CertRotator,
    RotatorConfig,
    Target,
    client_configs,
    dns_names,
    trusts,
)
from cronjob_operator.runtime.client import LiveReader, RestClient, Writer, load_configuration
from cronjob_operator.runtime.clock import utc_now
from cronjob_operator.runtime.webhook import LIMITS, WebhookServer
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

SECRET = "webhook-server-cert"
SERVICE = "webhook-service"
TIMEOUT = 60.0
SHORT_VALIDITY = timedelta(seconds=24)
"""Renewed after 16 s (two thirds): two rotations fit in well under a minute."""
PACE_SECONDS = 0.5
"""Between two requests of the load: longer than the routed server's idle timeout."""
ONE_REQUEST_PER_CONNECTION = dataclasses.replace(LIMITS, idle_timeout=0.2)
"""The routed server closes a connection idle for 0.2 s, so (with the pace above) every
request of the load opens a new one: a TLS handshake with the certificate served at that
moment, judged by the bundle the API server has at that moment. (The API server keeps
connections alive, and one opened before a rotation goes on with the old certificate,
which would hide a certificate served before its CA is trusted.)"""
WITHOUT_RESYNC = 600.0
"""A resync so rare that only the watch of the Secret can explain a quick reaction."""
WATCHED = 30.0
"""How soon a change of the Secret must be acted on (about 1 s is expected)."""
LONG_VALIDITY = timedelta(hours=1)
"""No rotation while a test runs."""


@dataclass
class Rig:
    plane: ControlPlane
    namespace: str
    rest: RestClient
    server: WebhookServer
    """The follower's server: the Service's only endpoint."""
    leader_server: WebhookServer
    address: str
    names: dict[str, str]
    failures: list[str] = field(default_factory=list)

    def targets(self) -> tuple[Target, ...]:
        return (
            Target(VALIDATING_WEBHOOK_CONFIGURATION, self.names["ValidatingWebhookConfiguration"]),
            Target(MUTATING_WEBHOOK_CONFIGURATION, self.names["MutatingWebhookConfiguration"]),
            Target(CUSTOM_RESOURCE_DEFINITION, CRD),
        )

    def secret(self) -> dict[str, bytes] | None:
        """The Secret's data; None while it is missing or empty (a missing Secret is
        created empty first, then filled in)."""
        try:
            secret = LiveReader(self.rest).get(kinds.SECRET, SECRET, self.namespace)
        except errors.NotFound:
            return None
        data = secret.get("data") or {}
        return {key: base64.b64decode(value) for key, value in data.items()} or None

    def bundles(self) -> list[bytes]:
        reader = LiveReader(self.rest)
        return [
            base64.b64decode(config.get("caBundle") or "")
            for target in self.targets()
            for config in client_configs(reader.get(target.kind, target.name))
        ]


@contextlib.contextmanager
def rotating(
    rig: Rig, validity: timedelta = LONG_VALIDITY, resync: float = 1.0
) -> Iterator[CertRotator]:
    """Two replicas for the length of the block, both ready: the leader, whose webhook
    server no Service routes to, and a follower feeding the server the Service's endpoint
    is, so the API server calls a replica that only learns of a new pair from the Secret
    (as most replicas do). Yields the follower's rotator."""
    config = RotatorConfig(
        namespace=rig.namespace,
        secret_name=SECRET,
        dns_names=dns_names(SERVICE, rig.namespace),
        cert_dir=rig.server.certs.cert_dir,
        targets=rig.targets(),
        validity=validity,
        resync=resync,
        propagation_delay=1.0,
    )
    leader_config = dataclasses.replace(config, cert_dir=rig.leader_server.certs.cert_dir)
    rotators = [
        CertRotator(
            LiveReader(rig.rest),
            Writer(rig.rest),
            replica_config,
            leading=lambda leads=leads: leads,  # type: ignore[misc]
            serving_address=(rig.address, server.port),
            watch=rig.rest,
        )
        for replica_config, server, leads in (
            (leader_config, rig.leader_server, True),
            (config, rig.server, False),
        )
    ]
    stop = threading.Event()
    threads = [threading.Thread(target=r.run, args=(stop,), daemon=True) for r in rotators]
    for thread in threads:
        thread.start()
    try:
        for rotator in rotators:
            wait_for(lambda r=rotator: r.ready() is None, TIMEOUT, message="the CA trusted")  # type: ignore[misc]
        yield rotators[1]
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
            assert not thread.is_alive(), "a rotator did not stop"


@pytest.fixture(scope="module")
def rig(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    install_crds(control_plane)
    namespace = f"test-certs-{secrets.token_hex(4)}"
    control_plane.kubectl("create", "namespace", namespace, check=True)
    names = {
        "MutatingWebhookConfiguration": f"{namespace}-mutating",
        "ValidatingWebhookConfiguration": f"{namespace}-validating",
    }
    address = host_address()
    server, leader_server = (
        WebhookServer(
            (address, 0), tmp_path_factory.mktemp("served"), manifests.routes(), limits=limits
        )
        for limits in (ONE_REQUEST_PER_CONNECTION, LIMITS)
    )
    rest = RestClient(load_configuration(str(control_plane.kubeconfig)))
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(control_plane.kubectl, "delete", "namespace", namespace, "--wait=false")
        cleanup.callback(rest.close)
        cleanup.callback(server.stop)
        cleanup.callback(leader_server.stop)
        cleanup.callback(unregister, control_plane, names)
        routing = service_and_endpoints(SERVICE, namespace, address, server.port)
        control_plane.kubectl("apply", "-f", "-", input=manifests.render_yaml(routing), check=True)
        register(control_plane, SERVICE, namespace, names)
        server.start()
        leader_server.start()
        yield Rig(control_plane, namespace, rest, server, leader_server, address, names)


def test_the_api_server_calls_the_webhooks_with_the_injected_ca(rig: Rig) -> None:
    with rotating(rig):
        stored = rig.secret()
        assert stored is not None
        assert set(rig.bundles()) == {stored["ca.crt"]}
        bad = json.dumps(a_cronjob("bad", rig.namespace, "60 * * * *"))
        refused = rig.plane.kubectl("create", "-f", "-", input=bad)
        assert "spec.schedule: Invalid value" in refused.stderr
        assert "minute 60 is out of range 0-59" in refused.stderr
        created = Writer(rig.rest).create(batch_v1.CRONJOB, a_cronjob("good", rig.namespace))
        assert created["spec"]["successfulJobsHistoryLimit"] == 3
        as_v2 = LiveReader(rig.rest).get(batch_v2.CRONJOB, "good", rig.namespace)
        assert as_v2["spec"]["schedule"] == {"minute": "*/5"}


def creates_and_reads(rig: Rig, stop: threading.Event, counts: dict[str, int]) -> None:
    """Create CronJobs (through both admission webhooks) and read each back as v2
    (through the conversion webhook) until ``stop``; every failure is noted."""
    writer, reader = Writer(rig.rest), LiveReader(rig.rest)
    while not stop.is_set():
        name = f"load-{counts['requests']}"
        try:
            writer.create(batch_v1.CRONJOB, a_cronjob(name, rig.namespace))
            reader.get(batch_v2.CRONJOB, name, rig.namespace)
        except Exception as exc:
            rig.failures.append(f"{name}: {exc}")
        counts["requests"] += 1
        stop.wait(PACE_SECONDS)


def test_rotation_under_load_fails_no_request(rig: Rig) -> None:
    stop = threading.Event()
    counts = {"requests": 0}
    load = threading.Thread(target=creates_and_reads, args=(rig, stop, counts), daemon=True)
    # The pair of an earlier test lives an hour: start from one made with the short validity.
    rig.plane.kubectl("delete", "secret", SECRET, "-n", rig.namespace, "--ignore-not-found")
    with rotating(rig, SHORT_VALIDITY):
        first = rig.secret()
        assert first is not None
        seen = [first["tls.crt"]]

        def rotated() -> bool:
            current = rig.secret()
            if current is not None and current["tls.crt"] != seen[-1]:
                seen.append(current["tls.crt"])
            return len(seen) >= 3

        started = time.monotonic()
        load.start()
        try:
            wait_for(rotated, 3 * SHORT_VALIDITY.total_seconds(), message="two rotations")
            after = counts["requests"]
            wait_for(
                lambda: counts["requests"] >= after + 10,
                TIMEOUT,
                message="requests under the newest certificate",
            )
        finally:
            stop.set()
            load.join(30)
    print(
        f"\n{counts['requests']} creates + v2 reads in {time.monotonic() - started:.1f}s, "
        f"2 rotations ({SHORT_VALIDITY.total_seconds():.0f}s validity): "
        f"{len(rig.failures)} failed"
    )
    assert rig.failures == []


def test_a_deleted_secret_is_made_again_at_once_and_stays_trusted(rig: Rig) -> None:
    with rotating(rig, resync=WITHOUT_RESYNC) as rotator:
        old = rig.secret()
        assert old is not None
        rig.plane.kubectl("delete", "secret", SECRET, "-n", rig.namespace, check=True)
        deleted = time.monotonic()
        wait_for(lambda: rig.secret() not in (None, old), TIMEOUT, message="the Secret made again")
        print(f"\nSecret made again {time.monotonic() - deleted:.2f}s after its deletion")
        new = rig.secret()
        assert new is not None
        assert trusts(new["ca.crt"], old["tls.crt"], now=utc_now())  # old servers trusted
        wait_for(lambda: rotator.ready() is None, TIMEOUT, message="ready with the new pair")
        Writer(rig.rest).create(batch_v1.CRONJOB, a_cronjob("after-delete", rig.namespace))


def test_a_configuration_reapplied_without_its_bundle_gets_it_back(rig: Rig) -> None:
    with rotating(rig):
        name = rig.names["ValidatingWebhookConfiguration"]
        hooks = LiveReader(rig.rest).get(VALIDATING_WEBHOOK_CONFIGURATION, name)["webhooks"]
        cleared = json.dumps(
            [
                {"op": "remove", "path": f"/webhooks/{i}/clientConfig/caBundle"}
                for i in range(len(hooks))
            ]
        )
        kind = "validatingwebhookconfiguration"
        rig.plane.kubectl("patch", kind, name, "--type=json", "-p", cleared, check=True)
        stored = rig.secret()
        assert stored is not None
        wait_for(
            lambda: set(rig.bundles()) == {stored["ca.crt"]}, TIMEOUT, message="the bundle back"
        )
