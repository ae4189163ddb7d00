"""Hostile bodies at the webhook server: every answer is a well-formed review or a 4xx.

Hypothesis throws malformed JSON, wrong kinds and versions, huge fields and truncated
reviews at the admission and conversion endpoints of a real ``WebhookServer`` (TLS on
127.0.0.1, no cluster: the routes are pure). After every example the server must still
answer a valid review, and the process's memory must stay bounded.
"""

from __future__ import annotations

import http.client
import json
import resource
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronjob_operator.runtime.webhook import MAX_BODY_BYTES, WebhookServer
from cronjob_operator.webhooks import configdeployment, cronjob, manifests
from tests.unit.test_webhooks import a_cronjob, a_review

PATHS = [cronjob.MUTATE_PATH, cronjob.VALIDATE_PATH, configdeployment.VALIDATE_PATH, "/convert"]
REVIEW_KINDS = {"AdmissionReview", "ConversionReview"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    cert_dir = tmp_path_factory.mktemp("certs")
    subprocess.run(
        ["openssl", "req", "-x509", "-nodes", "-newkey", "ec",
         "-pkeyopt", "ec_paramgen_curve:P-256", "-subj", "/CN=127.0.0.1", "-days", "1",
         "-keyout", str(cert_dir / "tls.key"), "-out", str(cert_dir / "tls.crt")],
        check=True, capture_output=True,
    )  # fmt: skip
    srv = WebhookServer(("127.0.0.1", 0), Path(cert_dir), manifests.routes())
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def post(port: int, path: str, body: bytes, headers: dict[str, str] | None = None) -> Any:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
    try:
        connection.request(
            "POST", path, body=body, headers=headers or {"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def assert_well_formed(status: int, answer: Any) -> None:
    assert status == 200 or 400 <= status < 500, (status, answer)
    if status == 200:
        assert answer["kind"] in REVIEW_KINDS
        assert isinstance(answer["response"]["uid"], str)
    else:
        assert answer["kind"] == "Status"
        assert answer["code"] == status
        assert answer["message"]


def assert_still_serving(port: int) -> None:
    status, answer = post(port, cronjob.VALIDATE_PATH, json.dumps(a_review(a_cronjob())).encode())
    assert status == 200
    assert answer["response"]["allowed"] is True


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=20,
)


def a_conversion_review() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "fuzz",
            "desiredAPIVersion": "batch.tutorial.kubebuilder.io/v2",
            "objects": [a_cronjob()],
        },
    }


def mangled_review(draw: st.DrawFn) -> Any:
    review: dict[str, Any] = a_review(a_cronjob()) if draw(st.booleans()) else a_conversion_review()
    if "object" in review["request"] and draw(st.booleans()):
        review["request"]["object"]["spec"]["schedule"] = "x" * draw(st.integers(1, 200_000))
    if draw(st.booleans()):
        review["kind"] = draw(st.sampled_from(["ConversionReview", "Pod", "", None, 7]))
    if draw(st.booleans()):
        review["apiVersion"] = draw(st.sampled_from(["admission.k8s.io/v1beta1", "v1", None]))
    request = review["request"]
    key = draw(st.sampled_from(sorted(request)))
    if draw(st.booleans()):
        request[key] = draw(json_values)
    return review


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return draw(st.binary(max_size=2000))
    if choice == 1:
        return json.dumps(draw(json_values)).encode()
    review = json.dumps(mangled_review(draw)).encode()
    if choice == 2:
        return review
    return review[: draw(st.integers(0, len(review) - 1))]  # truncated


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), body=bodies())
def test_any_body_gets_a_review_or_a_4xx(server: WebhookServer, path: str, body: bytes) -> None:
    status, answer = post(server.port, path, body)
    assert_well_formed(status, answer)


@pytest.mark.parametrize("path", PATHS)
def test_a_body_announced_too_large_is_413_and_never_read(server: WebhookServer, path: str) -> None:
    headers = {"Content-Type": "application/json", "Content-Length": str(MAX_BODY_BYTES + 1)}
    status, answer = post(server.port, path, b"{}", headers)
    assert status == 413
    assert_well_formed(status, answer)


def test_huge_fields_and_floods_keep_memory_bounded(server: WebhookServer) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    huge = a_review(a_cronjob(schedule="* " * 3_000_000))  # ~6 MB, under the body limit
    for path in [*PATHS, *PATHS]:
        status, answer = post(server.port, path, json.dumps(huge).encode())
        assert_well_formed(status, answer)
        assert len(json.dumps(answer)) < 10_000, "the answer does not echo the huge field"
    deep = b"[" * 100_000 + b"]" * 100_000
    assert_well_formed(*post(server.port, "/convert", deep))
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 200, f"peak memory grew by {grown_mib:.0f} MiB"
    assert_still_serving(server.port)


def test_the_server_keeps_serving_after_the_fuzzing(server: WebhookServer) -> None:
    assert_still_serving(server.port)
    assert server.ready() is None
