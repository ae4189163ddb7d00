"""Metrics authentication and authorization: 401/403/200, the decision caches, HTTPS.

The reviewer is a fake that counts its calls (the real one is exercised against the API
server in tests/e2e/test_deploy.py); the clock is injected, so expiry needs no waiting.
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Iterator

import pytest

from cronjob_operator.runtime import errors
from cronjob_operator.runtime.metrics_auth import CacheSettings, MetricsAuthorizer, User
from cronjob_operator.runtime.selfsigned import self_signed_context
from cronjob_operator.runtime.serving import HttpServer

SCRAPER = User(name="system:serviceaccount:monitoring:prometheus", groups=("system:authenticated",))
STRANGER = User(name="system:serviceaccount:default:default")


class FakeReviewer:
    def __init__(self) -> None:
        self.tokens = {"scraper-token": SCRAPER, "stranger-token": STRANGER}
        self.allowed = {SCRAPER.name}
        self.calls: list[str] = []
        self.failing = False

    def authenticate(self, token: str) -> User | None:
        self.calls.append("token")
        if self.failing:
            raise errors.TransportError("the API server is down")
        return self.tokens.get(token)

    def authorize(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        self.calls.append("access")
        return user.name in self.allowed and (verb, path) == ("get", "/metrics"), "RBAC"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def reviewer() -> FakeReviewer:
    return FakeReviewer()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def authorizer(reviewer: FakeReviewer, clock: Clock) -> MetricsAuthorizer:
    return MetricsAuthorizer(reviewer, settings=CacheSettings(max_entries=4), clock=clock)


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer  ", "Basic dXNlcjpwYXNz"])
def test_no_bearer_token_is_401_without_a_review(
    authorizer: MetricsAuthorizer, reviewer: FakeReviewer, header: str | None
) -> None:
    refusal = authorizer.check(header, "get", "/metrics")
    assert refusal is not None
    assert refusal[0] == 401
    assert reviewer.calls == []


def test_a_bad_token_is_401_a_token_without_the_role_403_a_scraper_passes(
    authorizer: MetricsAuthorizer,
) -> None:
    assert authorizer.check("Bearer garbage", "get", "/metrics") == (
        401,
        "Unauthorized: the token was not accepted",
    )
    refusal = authorizer.check("Bearer stranger-token", "get", "/metrics")
    assert refusal == (403, f"Authorization denied for user {STRANGER.name}")
    assert authorizer.check("Bearer scraper-token", "get", "/metrics") is None
    assert authorizer.check("bearer scraper-token", "get", "/other") is not None


def test_a_scrape_every_15s_costs_no_review_until_the_cache_expires(
    authorizer: MetricsAuthorizer, reviewer: FakeReviewer, clock: Clock
) -> None:
    assert authorizer.check("Bearer scraper-token", "get", "/metrics") is None
    assert reviewer.calls == ["token", "access"]
    for _ in range(3):
        clock.now += 15
        assert authorizer.check("Bearer scraper-token", "get", "/metrics") is None
    assert reviewer.calls == ["token", "access"]
    clock.now += 60  # the token's minute is over; the allow decision lasts 5 minutes
    authorizer.check("Bearer scraper-token", "get", "/metrics")
    assert reviewer.calls == ["token", "access", "token"]


def test_a_denial_is_remembered_only_30_seconds(
    authorizer: MetricsAuthorizer, reviewer: FakeReviewer, clock: Clock
) -> None:
    authorizer.check("Bearer stranger-token", "get", "/metrics")
    reviewer.allowed.add(STRANGER.name)  # someone binds the role
    clock.now += 29
    assert authorizer.check("Bearer stranger-token", "get", "/metrics") is not None
    clock.now += 2
    assert authorizer.check("Bearer stranger-token", "get", "/metrics") is None


def test_a_flood_of_tokens_keeps_the_caches_bounded(
    authorizer: MetricsAuthorizer, reviewer: FakeReviewer
) -> None:
    for n in range(100):
        authorizer.check(f"Bearer random-{n}", "get", "/metrics")
    assert len(authorizer._users) == 4
    assert authorizer.check("Bearer scraper-token", "get", "/metrics") is None


def test_an_api_failure_is_a_500_and_not_cached(
    authorizer: MetricsAuthorizer, reviewer: FakeReviewer
) -> None:
    reviewer.failing = True
    refusal = authorizer.check("Bearer scraper-token", "get", "/metrics")
    assert refusal is not None
    assert refusal[0] == 500
    reviewer.failing = False
    assert authorizer.check("Bearer scraper-token", "get", "/metrics") is None


@pytest.fixture
def secure_server(authorizer: MetricsAuthorizer) -> Iterator[HttpServer]:
    context = self_signed_context()
    server = HttpServer(
        ("127.0.0.1", 0), serve_metrics=True, tls=lambda: context, authorize=authorizer.check
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def scrape(port: int, token: str | None, *, ciphers: str | None = None) -> int:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # self-signed, as a ServiceMonitor's insecureSkipVerify
    if ciphers is not None:  # a TLS 1.2 client offering only these suites
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        context.set_ciphers(ciphers)
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        connection.request("GET", "/metrics", headers=headers)
        response = connection.getresponse()
        body = response.read()
        if response.status == 200:
            assert b"# HELP" in body
        return response.status
    finally:
        connection.close()


def test_the_https_metrics_server_answers_401_403_and_200(secure_server: HttpServer) -> None:
    assert scrape(secure_server.port, None) == 401
    assert scrape(secure_server.port, "garbage") == 401
    assert scrape(secure_server.port, "stranger-token") == 403
    assert scrape(secure_server.port, "scraper-token") == 200


def test_tls_1_2_gets_forward_secret_aead_suites_only(secure_server: HttpServer) -> None:
    context = self_signed_context()
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    tls12 = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert tls12
    assert all(name.startswith("ECDHE-") and ("GCM" in name or "CHACHA" in name) for name in tls12)
    assert scrape(secure_server.port, "scraper-token", ciphers="ECDHE+AESGCM") == 200
    with pytest.raises(ssl.SSLError):
        scrape(secure_server.port, "scraper-token", ciphers="AES128-SHA:AES256-SHA")


def test_plain_http_to_the_https_port_gets_no_metrics(secure_server: HttpServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", secure_server.port, timeout=10)
    try:
        connection.request("GET", "/metrics")
        with pytest.raises((OSError, http.client.HTTPException)):
            connection.getresponse()
    finally:
        connection.close()
