"""Hostile bodies at the webhook server: every answer is a well-formed review or a 4xx.

Hypothesis throws malformed JSON, wrong kinds and versions, huge fields, deep nesting
and truncated reviews at the admission and conversion endpoints of a real
``WebhookServer`` (TLS on 127.0.0.1, no cluster: the routes are pure), and the same
values at the decoding of a CronJob's and a ConfigDeployment's spec. After every example
the server must still answer a valid review, and the process's memory must stay bounded.
The budget is fixed (``FUZZ``: a few seconds); under CI the draw is too (tests/conftest.py).
Each attack of issue 35 also has its own example: a token-dense body is refused before
it is decoded, deep nesting is a 400, and no answer or log line repeats a huge value.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import logging
import resource
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronjob_operator.api import apps_v1, batch_v1
from cronjob_operator.runtime.serving import ECHO_LIMIT
from cronjob_operator.runtime.webhook import LIMITS, MAX_BODY_BYTES, WebhookServer
from cronjob_operator.runtime.webhook._server import decode_cost
from cronjob_operator.webhooks import configdeployment, cronjob, manifests, nesting
from tests.unit.test_webhooks import a_cronjob, a_review

FUZZ = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""The fuzz budget of every property here: examples, not time (a few seconds in all)."""

PATHS = [cronjob.MUTATE_PATH, cronjob.VALIDATE_PATH, configdeployment.VALIDATE_PATH, "/convert"]
REVIEW_KINDS = {"AdmissionReview", "ConversionReview"}


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("certs")
    subprocess.run(
        ["openssl", "req", "-x509", "-nodes", "-newkey", "ec",
         "-pkeyopt", "ec_paramgen_curve:P-256", "-subj", "/CN=127.0.0.1", "-days", "1",
         "-keyout", str(directory / "tls.key"), "-out", str(directory / "tls.crt")],
        check=True, capture_output=True,
    )  # fmt: skip
    return directory


@pytest.fixture(scope="module")
def server(cert_dir: Path) -> Iterator[WebhookServer]:
    srv = WebhookServer(("127.0.0.1", 0), cert_dir, manifests.routes())
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def insecure_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def post_raw(
    port: int, path: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, bytes, http.client.HTTPResponse]:
    """(status, body, response) of one POST over TLS."""
    connection = http.client.HTTPSConnection(
        "127.0.0.1", port, timeout=30, context=insecure_context()
    )
    try:
        connection.request(
            "POST", path, body=body, headers=headers or {"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        return response.status, response.read(), response
    finally:
        connection.close()


def post(port: int, path: str, body: bytes, headers: dict[str, str] | None = None) -> Any:
    status, raw, _ = post_raw(port, path, body, headers)
    return status, json.loads(raw)


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


@st.composite
def deep_values(draw: st.DrawFn) -> Any:
    """A value nested 100 to 3,000 levels deep in lists and objects (Python's own limit
    is 1,000 frames: every recursive walk over it must be bounded or caught)."""
    value: Any = draw(json_values)
    for is_list in draw(st.lists(st.booleans(), min_size=100, max_size=3000)):
        value = [value] if is_list else {"a": value}
    return value


@st.composite
def large_values(draw: st.DrawFn) -> Any:
    """A long string, or a long list of small values (up to ~1 MB of JSON)."""
    size = draw(st.integers(1_000, 200_000))
    element = draw(st.sampled_from(["x", {}, [], 0, 1.5, "ab", {"a": 1}]))
    return "x" * size * 5 if element == "x" else [element] * size


any_value = json_values | deep_values() | large_values()


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
    obj = request["object"] if "object" in request else request["objects"][0]
    if draw(st.booleans()):
        target = obj if draw(st.booleans()) else obj["spec"]
        field = draw(st.sampled_from(["metadata", "kind", "apiVersion", "schedule", "x"]))
        target[field] = draw(any_value)
    key = draw(st.sampled_from(sorted(request)))
    if draw(st.booleans()):
        request[key] = draw(any_value)
    return review


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return draw(st.binary(max_size=2000))
    if choice == 1:
        return json.dumps(draw(any_value)).encode()
    review = json.dumps(mangled_review(draw)).encode()
    if choice == 2:
        return review
    return review[: draw(st.integers(0, len(review) - 1))]  # truncated


@FUZZ
@given(path=st.sampled_from(PATHS), body=bodies())
def test_any_body_gets_a_review_or_a_4xx(server: WebhookServer, path: str, body: bytes) -> None:
    status, raw, _ = post_raw(server.port, path, body)
    answer = json.loads(raw)
    assert_well_formed(status, answer)
    assert len(raw) < 64 * 1024 or status == 200, "an error repeats a huge value"


@FUZZ
@given(obj=any_value)
def test_decoding_any_spec_raises_a_validation_error_or_succeeds(obj: Any) -> None:
    """The controllers' view of a CronJob or a ConfigDeployment, from any stored JSON."""
    for read_settings in (batch_v1.read_settings, apps_v1.read_settings):
        with contextlib.suppress(pydantic.ValidationError):
            read_settings({"spec": obj} if isinstance(obj, dict) else {"spec": {"x": obj}})


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


def a_conversion_review_of(obj: dict[str, Any]) -> bytes:
    review = a_conversion_review()
    review["request"]["objects"] = [obj]
    return json.dumps(review).encode()


def test_a_token_dense_body_is_refused_before_it_is_decoded(server: WebhookServer) -> None:
    """Issue 35: 16 MiB of ``{},{},...`` took the process from 53 to 471 MiB while it was
    decoded. Under the body cap, 6 MiB of it would still take ~150 MiB: its cost is
    counted before decoding (80 bytes a token here: over the half of the budget that one
    request may take, ``LIMITS.max_reservation``)."""
    dense = b"[" + b"{}," * (2 * 1024 * 1024) + b"{}]"
    body = a_conversion_review_of({"spec": {"x": 1}}).replace(b'{"x": 1}', dense)
    assert len(body) < MAX_BODY_BYTES
    assert len(body) + decode_cost(body) > LIMITS.max_reservation
    status, answer = post(server.port, "/convert", body)
    assert status == 413
    assert "to read and decode" in answer["message"]


def test_a_review_nested_900_deep_is_answered_and_one_past_the_decoder_is_a_400(
    server: WebhookServer,
) -> None:
    """Issue 35: converting this raised RecursionError: a 500 with a traceback. It is
    converted, refused by validation (``nesting.MAX_DEPTH``) and defaulted; a body nested
    past what the JSON decoder takes (1,000 levels) is a 400 that says so."""
    deep: Any = {}
    for _ in range(900):
        deep = {"a": deep}
    obj = a_cronjob()
    obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["affinity"] = deep
    answers = {}
    for path, body in [
        ("/convert", a_conversion_review_of(obj)),
        (cronjob.VALIDATE_PATH, json.dumps(a_review(obj)).encode()),
        (cronjob.MUTATE_PATH, json.dumps(a_review(obj)).encode()),
    ]:
        status, answer = post(server.port, path, body)
        assert status in (200, 400), (path, answer)
        assert_well_formed(status, answer)
        answers[path] = answer["response"]
    assert answers["/convert"]["result"]["status"] == "Success"
    assert answers[cronjob.VALIDATE_PATH]["allowed"] is False
    assert (
        f"nest at most {nesting.MAX_DEPTH} levels"
        in answers[cronjob.VALIDATE_PATH]["status"]["message"]
    )
    assert answers[cronjob.MUTATE_PATH]["allowed"] is True
    levels = 3000  # json.dumps itself cannot write it: spliced in as bytes
    too_deep = b'{"a":' * levels + b"1" + b"}" * levels
    body = a_conversion_review_of({"spec": {"x": 1}}).replace(b'{"x": 1}', too_deep)
    status, answer = post(server.port, "/convert", body)
    assert status == 400
    assert answer["message"] == "the request is nested too deeply to handle; send a real review"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/convert", {"apiVersion": "x" * 1_000_000, "kind": "ConversionReview"}),
        (cronjob.VALIDATE_PATH, {"apiVersion": "x" * 1_000_000, "kind": "AdmissionReview"}),
        ("/convert", json.loads(a_conversion_review_of({"apiVersion": "v" * 1_000_000}))),
        (cronjob.VALIDATE_PATH, a_review(a_cronjob(name="n" * 1_000_000))),
        (cronjob.VALIDATE_PATH, a_review(a_cronjob(startingDeadlineSeconds="9" * 1_000_000))),
        (configdeployment.VALIDATE_PATH, a_review(a_cronjob(), kind=("x" * 1_000_000, "", ""))),
    ],
)
def test_no_answer_or_log_line_repeats_a_huge_value(
    server: WebhookServer, path: str, body: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 35: a 15 MiB apiVersion gave a 15.7 MB log line and answer. Values are cut
    to ECHO_LIMIT characters, with their length."""
    with caplog.at_level(logging.DEBUG):
        _, raw, _ = post_raw(server.port, path, json.dumps(body).encode())
    assert len(raw) < 8 * ECHO_LIMIT
    assert b" characters)" in raw  # the original length is shown
    assert all(len(record.getMessage()) < 8 * ECHO_LIMIT for record in caplog.records)


def test_with_the_budget_held_by_reviews_in_progress_a_review_gets_503_and_retry_after(
    cert_dir: Path,
) -> None:
    """Two addresses' reviews, decoded and being answered, hold the whole budget: a third
    review waits ``budget_wait`` for it, then is told when to come back."""
    limits = dataclasses.replace(LIMITS, body_budget_bytes=2 * 1024 * 1024, budget_wait=0.2)
    answering = threading.Event()
    routes = {**manifests.routes(), "/hold": lambda body: answering.wait(30) and {}}
    srv = WebhookServer(("127.0.0.1", 0), cert_dir, routes, limits=limits)
    srv.start()
    pad = "x" * ((limits.max_reservation - 1024) // 3)  # raw + decode: nearly a half each
    holders = [
        threading.Thread(target=post_from, args=(srv.port, "/hold", {"pad": pad}, source))
        for source in ("127.0.0.2", "127.0.0.3")
    ]
    try:
        for holder in holders:
            holder.start()
        deadline = time.monotonic() + 10
        while srv.budget_held() < 2 * len(pad) * 3:
            assert time.monotonic() < deadline, "the held reviews never reserved the budget"
            time.sleep(0.01)
        review = json.dumps(a_review(a_cronjob())).encode()
        status, _, response = post_raw(srv.port, cronjob.VALIDATE_PATH, review)
        assert status == 503
        assert response.getheader("Retry-After") == "1"
    finally:
        answering.set()
        for holder in holders:
            holder.join(10)
        srv.stop()


def post_from(port: int, path: str, body: Any, source: str) -> None:
    raw = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0))
    with insecure_context().wrap_socket(raw) as sock:
        data = json.dumps(body).encode()
        head = f"POST {path} HTTP/1.1\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
        sock.recv(100)


def test_stalled_bodies_holding_the_budget_do_not_stop_a_review(cert_dir: Path) -> None:
    """Issue 35: bodies that stall while holding the budget would refuse every review
    until their 10 s deadline; the longest stalled of the heaviest address is evicted."""
    limits = dataclasses.replace(LIMITS, body_budget_bytes=2 * 1024 * 1024)
    srv = WebhookServer(("127.0.0.1", 0), cert_dir, manifests.routes(), limits=limits)
    srv.start()
    stalled = []
    try:
        for source in ("127.0.0.2", "127.0.0.3"):
            raw = socket.create_connection(("127.0.0.1", srv.port), source_address=(source, 0))
            sock = insecure_context().wrap_socket(raw)
            sock.sendall(b"POST /convert HTTP/1.1\r\nContent-Type: application/json\r\n")
            sock.sendall(b"Content-Length: %d\r\n\r\n{" % (1024 * 1024))
            stalled.append(sock)
        deadline = time.monotonic() + 10
        while srv.budget_held() < 2 * 1024 * 1024:
            assert time.monotonic() < deadline, "the stalled bodies never held the budget"
            time.sleep(0.01)
        assert_still_serving(srv.port)
    finally:
        for sock in stalled:
            sock.close()
        srv.stop()
