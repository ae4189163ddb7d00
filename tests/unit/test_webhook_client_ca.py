"""``--webhook-client-ca``: with real TLS sockets, an admission webhook serves only a
client holding a certificate signed by the configured CA (what the API server presents
when its AdmissionConfiguration names a kubeconfig with a client certificate for the
webhook); conversion, to which the API server presents no certificate, stays open.

The CA and the serving pair come from ``hack/gen-webhook-certs.sh``; client certificates
are issued here with ``openssl``: one signed by that CA (the API server's) and one
self-signed (a stranger's).
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronjob_operator.runtime.webhook import WebhookServer
from cronjob_operator.webhooks import conversion, cronjob, manifests
from tests.images import REPO
from tests.unit.test_webhook_fuzz import a_conversion_review
from tests.unit.test_webhooks import a_cronjob, a_review


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def client_certificate(directory: Path, name: str, ca_dir: Path | None) -> tuple[Path, Path]:
    """A P-256 client pair: signed by the CA in ``ca_dir``, or self-signed without one."""
    key, cert, request = directory / f"{name}.key", directory / f"{name}.crt", directory / "csr"
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key))
    if ca_dir is None:
        openssl("req", "-x509", "-key", str(key), "-subj", f"/CN={name}", "-days", "1",
                "-out", str(cert))  # fmt: skip
        return cert, key
    openssl("req", "-new", "-key", str(key), "-subj", f"/CN={name}", "-out", str(request))
    extensions = directory / "client.ext"
    extensions.write_text("extendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", str(request), "-CA", str(ca_dir / "ca.crt"),
            "-CAkey", str(ca_dir / "ca.key"), "-CAcreateserial", "-days", "1",
            "-extfile", str(extensions), "-out", str(cert))  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("client-ca")
    subprocess.run(
        ["bash", str(REPO / "hack" / "gen-webhook-certs.sh"), str(directory)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return directory


def client_ca_server(certs: Path) -> WebhookServer:
    """A started server of the real routes that requires the CA in ``certs`` (the
    manager's with ``--webhook-client-ca``: conversion stays open)."""
    server = WebhookServer(
        ("127.0.0.1", 0),
        certs,
        manifests.routes(),
        client_ca=certs / "ca.crt",
        anonymous=[conversion.PATH],
    )
    server.start()
    return server


@pytest.fixture(scope="module")
def server(certs: Path) -> Iterator[WebhookServer]:
    srv = client_ca_server(certs)
    try:
        yield srv
    finally:
        srv.stop()


def review_status(
    port: int, certs: Path, client: tuple[Path, Path] | None, path: str = cronjob.VALIDATE_PATH
) -> int:
    """The HTTP status of one review to ``path``, presenting ``client`` (cert, key)."""
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    if client is not None:
        context.load_cert_chain(*client)
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    review = a_conversion_review() if path == conversion.PATH else a_review(a_cronjob())
    try:
        connection.request(
            "POST",
            path,
            body=json.dumps(review).encode(),
            headers={"Content-Type": "application/json"},
        )
        return connection.getresponse().status
    finally:
        connection.close()


def test_a_client_certificate_signed_by_the_ca_is_served(
    server: WebhookServer, certs: Path, tmp_path: Path
) -> None:
    apiserver = client_certificate(tmp_path, "kube-apiserver", certs)
    assert review_status(server.port, certs, apiserver) == 200


def test_a_client_without_a_certificate_gets_401_from_admission_but_converts(
    server: WebhookServer, certs: Path
) -> None:
    assert review_status(server.port, certs, None) == 401
    assert review_status(server.port, certs, None, conversion.PATH) == 200


def test_a_certificate_the_ca_did_not_sign_fails_the_handshake(
    server: WebhookServer, certs: Path, tmp_path: Path
) -> None:
    stranger = client_certificate(tmp_path, "stranger", None)
    for path in (cronjob.VALIDATE_PATH, conversion.PATH):
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
            review_status(server.port, certs, stranger, path)


def test_the_readiness_check_holds_with_a_client_ca(server: WebhookServer) -> None:
    """The check completes a handshake without a certificate (TLS 1.3: the server's
    verdict on the client comes after), so it proves the server serves its pair."""
    assert server.ready() is None
