"""Which failures the REST client sends again, and when: client-go's ``Request.Do`` rules.

First the classification on its own (``errors.retry_delay``: method x error kind), then
``RestClient.request`` over a scripted connection pool: how many times a request really
went out, how long it waited in between (on a fake sleep), and that the call's timeout
and the context bound the retries. The same rules against a real API server, through a
proxy that loses responses, are in tests/integration/test_retries.py.
"""

from __future__ import annotations

import ssl
import time
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s_client

from cronjob_operator.runtime import context, errors
from cronjob_operator.runtime.client import RestClient, RetryPolicy, _rest

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def api(code: int, retry_after: float | None = None) -> errors.ApiError:
    return errors.api_error(code, {"message": f"HTTP {code}"}, retry_after)


# (error, delay for GET, delay for every other method); None: not retried.
TABLE: list[tuple[str, BaseException, float | None, float | None]] = [
    ("429 with Retry-After", api(429, 2.0), 2.0, 2.0),
    ("429 without Retry-After", api(429), None, None),
    ("500 with Retry-After", api(500, 3.0), 3.0, 3.0),
    ("503 with Retry-After 0", api(503, 0.0), 0.0, 0.0),
    ("503 without Retry-After", api(503), None, None),
    ("504 without Retry-After", api(504), None, None),
    ("400", api(400), None, None),
    ("404", api(404), None, None),
    ("409 conflict", api(409), None, None),
    ("410 gone", api(410), None, None),
    ("422 invalid", api(422), None, None),
    ("connection lost", errors.ConnectionLost("reset by peer"), 1.0, None),
    ("connection refused", errors.TransportError("connection refused"), None, None),
    ("read timeout", errors.TransportError("read timed out"), None, None),
    ("deadline", errors.DeadlineExceeded("stopped"), None, None),
]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    ("error", "get_delay", "other_delay"),
    [row[1:] for row in TABLE],
    ids=[row[0] for row in TABLE],
)
def test_retry_delay_by_method_and_error_kind(
    method: str, error: BaseException, get_delay: float | None, other_delay: float | None
) -> None:
    expected = get_delay if method == "GET" else other_delay
    assert errors.retry_delay(method, error) == expected


@pytest.mark.parametrize(
    ("raised", "lost"),
    [
        (urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104)), True),
        (urllib3.exceptions.ProtocolError("Connection aborted.", "Remote end closed"), True),
        (urllib3.exceptions.ProtocolError("Connection broken: IncompleteRead"), True),
        (ConnectionResetError(104, "reset"), True),
        (BrokenPipeError(32, "broken pipe"), True),
        (urllib3.exceptions.SSLError(ssl.SSLEOFError(8, "EOF in violation of protocol")), True),
        (urllib3.exceptions.SSLError(ssl.SSLError(1, "certificate verify failed")), False),
        (urllib3.exceptions.NewConnectionError(None, "Connection refused"), False),  # type: ignore[arg-type]
        (urllib3.exceptions.ReadTimeoutError(None, "/x", "read timed out"), False),  # type: ignore[arg-type]
        (urllib3.exceptions.ConnectTimeoutError("connect timed out"), False),
    ],
    ids=[
        "reset",
        "closed without response",
        "incomplete body",
        "bare reset",
        "broken pipe",
        "tls eof",
        "tls verify",
        "refused",
        "read timeout",
        "connect timeout",
    ],
)
def test_a_broken_connection_is_connection_lost_and_nothing_else_is(
    raised: BaseException, lost: bool
) -> None:
    error = _rest._transport_error("GET /x", raised)
    assert isinstance(error, errors.TransportError)
    assert isinstance(error, errors.ConnectionLost) is lost


class Response:
    def __init__(self, status: int, data: bytes = b"{}", headers: dict[str, str] | None = None):
        self.status, self.data, self.headers = status, data, headers or {}


class ScriptedPool:
    """Answers (or raises) from a script; counts what went out."""

    def __init__(self, script: list[Response | BaseException]) -> None:
        self.script = script
        self.sent: list[str] = []

    def request(self, method: str, url: str, **_: Any) -> Response:
        self.sent.append(method)
        answer = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []
    monkeypatch.setattr(_rest, "_sleep_within", lambda ctx: waits.append)
    return waits


def client(
    script: list[Response | BaseException], **kwargs: Any
) -> tuple[RestClient, ScriptedPool]:
    rest = RestClient(k8s_client.Configuration(host="http://127.0.0.1:1"), **kwargs)
    pool = ScriptedPool(script)
    rest._pool = pool  # type: ignore[assignment]
    return rest, pool


RESET = urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104))
CREATE = "/api/v1/namespaces/ns/configmaps"


def test_a_create_whose_response_was_lost_is_sent_once(slept: list[float]) -> None:
    rest, pool = client([RESET, Response(201)])
    with pytest.raises(errors.ConnectionLost):
        rest.request("POST", CREATE, body={"metadata": {"generateName": "x-"}})
    assert (pool.sent, slept) == (["POST"], [])


def test_a_get_whose_connection_broke_is_sent_again_after_a_second(slept: list[float]) -> None:
    rest, pool = client([RESET, Response(200, b'{"kind":"List"}')])
    assert rest.request("GET", CREATE) == {"kind": "List"}
    assert (pool.sent, slept) == (["GET", "GET"], [1.0])


@pytest.mark.parametrize(
    "failure",
    [
        urllib3.exceptions.NewConnectionError(None, "Connection refused"),  # type: ignore[arg-type]
        urllib3.exceptions.ReadTimeoutError(None, "/x", "read timed out"),  # type: ignore[arg-type]
        Response(503, b'{"message":"busy"}'),
    ],
    ids=["refused", "read timeout", "503 without Retry-After"],
)
def test_a_get_that_failed_otherwise_is_raised_at_once(
    slept: list[float], failure: Response | BaseException
) -> None:
    rest, pool = client([failure, Response(200)])
    with pytest.raises((errors.TransportError, errors.ServerError)):
        rest.request("GET", CREATE)
    assert (pool.sent, slept) == (["GET"], [])


def test_a_write_the_server_asked_for_again_is_retried_after_retry_after(
    slept: list[float],
) -> None:
    busy = Response(503, b'{"message":"shutting down"}', {"Retry-After": "2"})
    rest, pool = client([busy, Response(201, b'{"kind":"ConfigMap"}')])
    assert rest.request("POST", CREATE, body={}) == {"kind": "ConfigMap"}
    assert (pool.sent, slept) == (["POST", "POST"], [2.0])


def test_a_fractional_retry_after_is_no_retry_after() -> None:
    rest, pool = client([Response(429, b"{}", {"Retry-After": "0.5"}), Response(200)])
    with pytest.raises(errors.TooManyRequests) as raised:
        rest.request("POST", CREATE, body={})
    assert (raised.value.retry_after, pool.sent) == (None, ["POST"])


def test_retries_stop_after_max_retries(slept: list[float]) -> None:
    rest, pool = client([Response(429, b"{}", {"Retry-After": "0"})])
    with pytest.raises(errors.TooManyRequests):
        rest.request("PUT", CREATE, body={})
    assert len(pool.sent) == 11, "client-go: the first attempt and 10 retries"
    rest, pool = client([Response(429, b"{}", {"Retry-After": "0"})], retry=RetryPolicy(2))
    with pytest.raises(errors.TooManyRequests):
        rest.request("PUT", CREATE, body={})
    assert len(pool.sent) == 3


def test_a_wait_past_the_calls_timeout_is_not_started(slept: list[float]) -> None:
    rest, pool = client([Response(429, b"{}", {"Retry-After": "5"}), Response(200)])
    with pytest.raises(errors.TooManyRequests):
        rest.request("GET", CREATE, timeout=4.0)
    assert (pool.sent, slept) == (["GET"], [])


def test_a_wait_past_the_contexts_deadline_is_not_started(slept: list[float]) -> None:
    rest, pool = client([Response(429, b"{}", {"Retry-After": "5"}), Response(200)])
    with (
        context.scope(context.Context(deadline=time.monotonic() + 4.0)),
        pytest.raises(errors.TooManyRequests),
    ):
        rest.request("GET", CREATE)
    assert (pool.sent, slept) == (["GET"], [])
