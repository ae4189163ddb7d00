"""Metrics authentication and authorization: 401/403/200, the decision caches, HTTPS.

The reviewer is a fake that counts its calls (the real one is exercised against the API
server in tests/e2e/test_deploy.py); the clock is injected, so expiry needs no waiting.
"""

from __future__ import annotations

import contextlib
import http.client
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from cronjob_operator.runtime import RestClient, errors
from cronjob_operator.runtime.client import TokenBucket
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.manager import Manager, Options
from cronjob_operator.runtime.metrics import Metrics
from cronjob_operator.runtime.serving import (
    CacheSettings,
    HttpServer,
    MetricsAuthorizer,
    Refusal,
    ReviewLimits,
    User,
    self_signed_context,
)
from cronjob_operator.runtime.serving._metrics_auth import TOKEN_REJECTED

ROOT = Path(__file__).resolve().parents[2]
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
    assert authorizer.check("Bearer garbage", "get", "/metrics") == Refusal(
        401, "Unauthorized: the token was not accepted"
    )
    refusal = authorizer.check("Bearer stranger-token", "get", "/metrics")
    assert refusal == Refusal(403, f"Authorization denied for user {STRANGER.name}")
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
    assert reviewer.calls == ["token", "access", "access"]  # the user was still cached


def test_a_flood_of_tokens_keeps_the_caches_bounded_and_the_scrapers_token_cached(
    authorizer: MetricsAuthorizer, reviewer: FakeReviewer
) -> None:
    # Failed before: rejected tokens shared the LRU with accepted ones, so 100 random
    # tokens evicted the scraper's and its next scrape cost a TokenReview again.
    assert authorizer.check("Bearer scraper-token", "get", "/metrics") is None
    for n in range(100):
        authorizer.check(f"Bearer random-{n}", "get", "/metrics")
    assert len(authorizer._rejected) == 4
    reviews = len(reviewer.calls)
    assert authorizer.check("Bearer scraper-token", "get", "/metrics") is None
    assert len(reviewer.calls) == reviews


def test_a_rejected_token_is_not_reviewed_again_for_a_minute(
    authorizer: MetricsAuthorizer, reviewer: FakeReviewer, clock: Clock
) -> None:
    for _ in range(3):
        assert authorizer.check("Bearer garbage", "get", "/metrics") == TOKEN_REJECTED
    assert reviewer.calls == ["token"]
    clock.now += 60
    authorizer.check("Bearer garbage", "get", "/metrics")
    assert reviewer.calls == ["token", "token"]


class BlockingReviewer(FakeReviewer):
    """Holds every review of a ``slow-`` token until ``release``; counts reviews entered."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self._entered = threading.Condition()
        self.waiting = 0

    def authenticate(self, token: str) -> User | None:
        if token.startswith("slow-"):
            with self._entered:
                self.waiting += 1
                self._entered.notify_all()
            assert self.release.wait(LONG)
        return super().authenticate(token)

    def wait_for_waiting(self, count: int) -> None:
        with self._entered:
            assert self._entered.wait_for(lambda: self.waiting == count, LONG)


LONG = 30.0
"""A bound only a bug reaches: the waits in these tests end on an event."""


@contextlib.contextmanager
def slow_reviews(
    authorizer: MetricsAuthorizer, reviewer: BlockingReviewer, sources: list[str]
) -> Iterator[list[Refusal | None]]:
    """One review of a ``slow-`` token per source held in flight for the ``with`` block."""
    answers: list[Refusal | None] = []
    threads = [
        threading.Thread(
            target=lambda n=n, source=source: answers.append(
                authorizer.check(f"Bearer slow-{n}", "get", "/metrics", source)
            )
        )
        for n, source in enumerate(sources)
    ]
    for thread in threads:
        thread.start()
    reviewer.wait_for_waiting(len(sources))
    try:
        yield answers
    finally:
        reviewer.release.set()
        for thread in threads:
            thread.join(LONG)


def test_beyond_8_reviews_in_flight_new_tokens_get_429_at_once_cached_tokens_pass() -> None:
    # Failed before: nothing bounded the reviews; the 9th unknown token was reviewed
    # too (a 401 after its TokenReview, not a 429 before any).
    reviewer, clock, metrics = BlockingReviewer(), Clock(), Metrics()
    authorizer = MetricsAuthorizer(reviewer, clock=clock, metrics=metrics)
    assert authorizer.check("Bearer scraper-token", "get", "/metrics", "10.0.0.99") is None
    with slow_reviews(authorizer, reviewer, [f"10.0.0.{n}" for n in range(8)]) as answers:
        reviews = len(reviewer.calls)
        refusal = authorizer.check("Bearer random-x", "get", "/metrics", "10.0.1.1")
        assert refusal == Refusal(
            429, "Too many requests: tokens are being reviewed; retry later", 1
        )
        assert authorizer.check("Bearer scraper-token", "get", "/metrics", "10.0.1.1") is None
        assert len(reviewer.calls) == reviews  # neither cost a review
    assert metrics.registry.get_sample_value("metrics_auth_requests_shed_total") == 1.0
    assert answers == [TOKEN_REJECTED] * 8
    assert authorizer.check("Bearer random-x", "get", "/metrics", "10.0.1.1") == TOKEN_REJECTED


def test_one_source_holds_at_most_2_review_slots() -> None:
    reviewer = BlockingReviewer()
    authorizer = MetricsAuthorizer(reviewer, clock=Clock())
    with slow_reviews(authorizer, reviewer, ["10.0.0.1", "10.0.0.1"]):
        refusal = authorizer.check("Bearer random-x", "get", "/metrics", "10.0.0.1")
        assert refusal is not None
        assert refusal.status == 429
        other = authorizer.check("Bearer random-x", "get", "/metrics", "10.0.0.2")
        assert other == TOKEN_REJECTED
    assert authorizer._slots.try_take("10.0.0.1"), "every slot was given back"


def test_a_shed_request_gets_retry_after_over_http() -> None:
    context = self_signed_context()
    shed = Refusal(429, "Too many requests", retry_after=1)
    sources: list[str] = []

    def authorize(header: str | None, verb: str, path: str, source: str) -> Refusal:
        sources.append(source)
        return shed

    server = HttpServer(
        ("127.0.0.1", 0), serve_metrics=True, tls=lambda: context, authorize=authorize
    )
    server.start()
    try:
        status, headers = scrape_response(server.port, "any-token")
    finally:
        server.stop()
    assert (status, headers.get("Retry-After")) == (429, "1")
    assert sources == ["127.0.0.1"]


def test_reviews_go_through_a_client_of_their_own_never_the_controllers_bucket() -> None:
    # Failed before: the authorizer reviewed through the manager's client, so 20 random
    # tokens took 20 tokens of the controllers' bucket (and made them wait 10 s).
    clock = FakeClock()
    controllers = TokenBucket(2, 1, clock=clock.monotonic, sleep=clock.sleep)
    rest = RestClient(k8s_client.Configuration(host="http://127.0.0.1:1"), rate_limiter=controllers)
    pool = ReviewPool()
    rest._pool = pool  # type: ignore[assignment]
    limits = ReviewLimits(burst=20)
    authorizer = Manager(rest, Options(metrics_review_limits=limits))._metrics_authorizer()
    for n in range(20):
        assert authorizer.check(f"Bearer random-{n}", "get", "/metrics") == TOKEN_REJECTED
    assert len(pool.agents) == 20
    assert all(agent.endswith("/metrics-auth") for agent in pool.agents)
    assert clock.slept == []
    assert controllers.reserve() == 0.0, "the controllers' bucket is still full"


class ReviewPool:
    """Answers every TokenReview "not authenticated"; records each request's user agent."""

    def __init__(self) -> None:
        self.agents: list[str] = []

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        assert url.endswith("/tokenreviews")
        self.agents.append(kwargs["headers"]["User-Agent"])
        return PoolResponse(b'{"kind":"TokenReview","status":{"authenticated":false}}')


class PoolResponse:
    """What ``RestClient`` reads of a urllib3 response: a 201 with ``data``."""

    def __init__(self, data: bytes) -> None:
        self.status, self.data, self.headers = 201, data, dict[str, str]()


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
    return scrape_response(port, token, ciphers=ciphers)[0]


def scrape_response(
    port: int, token: str | None, *, ciphers: str | None = None
) -> tuple[int, http.client.HTTPMessage]:
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
        return response.status, response.headers
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


def _write_pair(directory: Path, name: str) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-nodes", "-newkey", "ec",
         "-pkeyopt", "ec_paramgen_curve:P-256", "-subj", f"/CN={name}", "-days", "1",
         "-keyout", str(directory / "tls.key.new"), "-out", str(directory / "tls.crt.new")],
        check=True, capture_output=True,
    )  # fmt: skip
    (directory / "tls.key.new").replace(directory / "tls.key")
    (directory / "tls.crt.new").replace(directory / "tls.crt")


def _served_subject(port: int) -> str:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    text = subprocess.run(
        ["openssl", "x509", "-inform", "DER", "-noout", "-subject"],
        input=der, check=True, capture_output=True,
    ).stdout.decode()  # fmt: skip
    return text.strip()


def test_the_managers_metrics_certificate_from_a_directory_is_reloaded(tmp_path: Path) -> None:
    _write_pair(tmp_path, "first")
    options = Options(
        metrics_bind_address="127.0.0.1:0", metrics_secure=True, metrics_cert_dir=str(tmp_path)
    )
    manager = Manager(RestClient(k8s_client.Configuration(host="http://127.0.0.1:9")), options)
    server = manager._metrics_server(("127.0.0.1", 0))
    server.start()
    try:
        assert _served_subject(server.port).endswith("first")
        assert scrape(server.port, None) == 401  # authn/authz is on
        _write_pair(tmp_path, "second")
        assert _served_subject(server.port).endswith("second")  # no restart
    finally:
        server.stop()


def test_config_renders_https_metrics_the_auth_role_and_the_network_policies() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(ROOT / "config" / "default")],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    docs = [doc for doc in yaml.safe_load_all(rendered) if doc]
    by_kind = {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs}
    manager = by_kind["Deployment", "cronjob-operator-controller-manager"]
    args = manager["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--metrics-bind-address=:8443" in args
    assert not any(arg.startswith("--no-metrics-secure") for arg in args)
    auth = by_kind["ClusterRole", "cronjob-operator-metrics-auth-role"]
    assert {(r["apiGroups"][0], r["resources"][0], tuple(r["verbs"])) for r in auth["rules"]} == {
        ("authentication.k8s.io", "tokenreviews", ("create",)),
        ("authorization.k8s.io", "subjectaccessreviews", ("create",)),
    }
    binding = by_kind["ClusterRoleBinding", "cronjob-operator-metrics-auth-rolebinding"]
    assert (
        binding["subjects"][0]["name"] == manager["spec"]["template"]["spec"]["serviceAccountName"]
    )
    service = by_kind["Service", "cronjob-operator-controller-manager-metrics-service"]
    assert service["spec"]["ports"][0]["port"] == 8443
    policies = {name for kind, name in by_kind if kind == "NetworkPolicy"}
    assert policies == {
        "cronjob-operator-allow-metrics-traffic",
        "cronjob-operator-allow-webhook-traffic",
    }
    monitor = yaml.safe_load((ROOT / "config" / "prometheus" / "monitor.yaml").read_text())
    endpoint = monitor["spec"]["endpoints"][0]
    assert (endpoint["scheme"], endpoint["port"]) == ("https", "https")
    assert endpoint["bearerTokenFile"].endswith("serviceaccount/token")
