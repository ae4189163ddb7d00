"""The client-side token bucket (``--kube-api-qps`` / ``--kube-api-burst``), on a fake clock.

The bucket is checked on its own (burst, refill, cap, arrival order across threads,
deadlines and stops), then inside ``RestClient``: every attempt takes a token, retries of
a 429 included, a 429's ``Retry-After`` is still what the retry waits, a token due past
the call's deadline is not waited for, and a component client has its own bucket.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kubernetes import client as k8s_client

from cronjob_operator.envtest import wait_for
from cronjob_operator.runtime import context, errors
from cronjob_operator.runtime.client import RestClient, RetryPolicy, TokenBucket, _rest
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.metrics import Metrics


def bucket(qps: float, burst: int, clock: FakeClock) -> TokenBucket:
    return TokenBucket(qps, burst, clock=clock.monotonic, sleep=clock.sleep)


def test_a_full_bucket_lets_the_burst_through_then_paces_at_qps() -> None:
    clock = FakeClock()
    limiter = bucket(20, 30, clock)
    assert [limiter.reserve() for _ in range(30)] == [0.0] * 30
    delays = [limiter.reserve() for _ in range(3)]
    assert delays == pytest.approx([0.05, 0.10, 0.15])


def test_tokens_refill_with_time_up_to_the_burst_only() -> None:
    clock = FakeClock()
    limiter = bucket(10, 5, clock)
    for _ in range(5):
        limiter.reserve()
    clock.advance(0.2)
    assert [limiter.reserve() for _ in range(2)] == [0.0, 0.0]
    assert limiter.reserve() == pytest.approx(0.1)
    clock.advance(3600)
    assert [limiter.reserve() for _ in range(5)] == [0.0] * 5
    assert limiter.reserve() == pytest.approx(0.1)


def test_acquire_sleeps_its_reserved_delay_and_keeps_the_rate() -> None:
    clock = FakeClock()
    limiter = bucket(4, 1, clock)
    start = clock.monotonic()
    waited = [limiter.acquire() for _ in range(9)]
    assert waited[0] == 0.0
    assert clock.slept == pytest.approx([0.25] * 8)
    assert clock.monotonic() - start == pytest.approx(2.0)


def test_concurrent_reservations_each_get_a_distinct_slot() -> None:
    clock = FakeClock()
    limiter = bucket(10, 1, clock)
    results: list[float] = []
    lock = threading.Lock()

    def take() -> None:
        delay = limiter.reserve()
        with lock:
            results.append(delay)

    threads = [threading.Thread(target=take) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == pytest.approx([i / 10 for i in range(20)])


@pytest.mark.parametrize(("qps", "burst"), [(0, 1), (-1, 1), (1, 0)])
def test_a_bucket_that_could_never_grant_is_refused(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="TokenBucket"):
        TokenBucket(qps, burst)


class FakeResponse:
    def __init__(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.status, self.data, self.headers = status, data, headers or {}


class FakePool:
    """Answers from a script and records when (on the fake clock) each request went out."""

    def __init__(self, clock: FakeClock, script: list[FakeResponse]) -> None:
        self.clock, self.script, self.sent_at = clock, script, list[float]()

        self.agents: list[str] = []

    def request(self, method: str, url: str, **kwargs: Any) -> FakeResponse:
        self.sent_at.append(self.clock.monotonic())
        self.agents.append(kwargs["headers"]["User-Agent"])
        return self.script.pop(0)


def limited_client(clock: FakeClock, script: list[FakeResponse]) -> tuple[RestClient, FakePool]:
    rest = RestClient(
        k8s_client.Configuration(host="http://127.0.0.1:1"),
        retry=RetryPolicy(max_retries=2),
        rate_limiter=bucket(2, 1, clock),
    )
    pool = FakePool(clock, script)
    rest._pool = pool  # type: ignore[assignment]
    return rest, pool


def test_every_request_of_the_client_takes_a_token() -> None:
    clock = FakeClock()
    rest, pool = limited_client(clock, [FakeResponse(200, b"{}") for _ in range(3)])
    for _ in range(3):
        assert rest.request("GET", "/api/v1/namespaces") == {}
    assert [t - pool.sent_at[0] for t in pool.sent_at] == pytest.approx([0.0, 0.5, 1.0])


def test_a_429_is_retried_after_retry_after_and_the_retry_takes_a_token_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(_rest, "_sleep_within", lambda ctx: clock.sleep)
    too_many = FakeResponse(429, b'{"message":"slow down"}', {"Retry-After": "3"})
    rest, pool = limited_client(clock, [too_many, FakeResponse(200, b'{"ok":true}')])
    assert rest.request("POST", "/apis/batch/v1/namespaces/a/jobs", body={}) == {"ok": True}
    assert len(pool.sent_at) == 2
    assert pool.sent_at[1] - pool.sent_at[0] == pytest.approx(3.0)
    assert clock.slept == pytest.approx([3.0])


def test_a_429_still_raises_its_typed_error_once_the_budget_is_spent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(_rest, "_sleep_within", lambda ctx: clock.sleep)
    too_many = FakeResponse(429, b'{"message":"slow down"}', {"Retry-After": "1"})
    rest, _ = limited_client(clock, [too_many] * 3)
    with pytest.raises(errors.TooManyRequests):
        rest.request("GET", "/api/v1/pods")


def test_the_limiter_wait_is_observed_in_the_clients_metrics() -> None:
    clock = FakeClock()
    rest, _ = limited_client(clock, [FakeResponse(200, b"{}") for _ in range(2)])
    metrics = Metrics()
    counted = rest.with_metrics(metrics)
    for _ in range(2):
        counted.request("GET", "/api/v1/namespaces")
    labels = {"verb": "GET", "host": "127.0.0.1:1"}
    total = metrics.registry.get_sample_value(
        "rest_client_rate_limiter_duration_seconds_sum", labels
    )
    count = metrics.registry.get_sample_value(
        "rest_client_rate_limiter_duration_seconds_count", labels
    )
    assert total == pytest.approx(0.5)
    assert count == 2.0


def test_a_token_due_after_the_deadline_is_not_waited_for() -> None:
    # Failed before: acquire took no context; the caller slept the whole 4 s.
    clock = FakeClock()
    limiter = bucket(0.25, 1, clock)
    limiter.acquire()
    with pytest.raises(errors.DeadlineExceeded, match="past the deadline"):
        limiter.acquire(context.BACKGROUND.with_timeout(0.5))
    assert clock.slept == []
    assert limiter.reserve() == pytest.approx(4.0), "the refused token went back"


def test_a_stop_ends_the_wait_for_a_token() -> None:
    limiter = TokenBucket(0.01, 1)  # the next token is 100 s away
    limiter.acquire()
    ctx = context.Context()
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            limiter.acquire(ctx)
        except errors.DeadlineExceeded as exc:
            raised.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    wait_for(lambda: limiter._tokens < 0, 5, message="the waiter to reserve its token")
    ctx.stop.set()
    waiter.join(30)
    assert not waiter.is_alive()
    assert [str(exc) for exc in raised] == [
        "client rate limiter: stopped while waiting for a token"
    ]


def test_a_request_whose_deadline_comes_before_its_token_is_not_sent() -> None:
    # Failed before: the request slept 4 s for its token past a 0.5 s deadline, then
    # was sent anyway.
    clock = FakeClock()
    rest, pool = limited_client(clock, [FakeResponse(200, b"{}") for _ in range(3)])
    rest._rate_limiter = bucket(0.25, 1, clock)
    rest.request("GET", "/api/v1/namespaces")
    with (
        context.scope(context.BACKGROUND.with_timeout(0.5)),
        pytest.raises(errors.DeadlineExceeded),
    ):
        rest.request("POST", "/api/v1/namespaces/a/configmaps", body={})
    with pytest.raises(errors.DeadlineExceeded):
        rest.request("POST", "/api/v1/namespaces/a/configmaps", body={}, timeout=0.5)
    assert len(pool.sent_at) == 1
    assert clock.slept == []


def test_a_component_client_has_its_own_bucket_and_user_agent() -> None:
    # Failed before: there was one bucket per process, so the elector waited behind
    # the controllers' requests.
    clock = FakeClock()
    rest, pool = limited_client(clock, [FakeResponse(200, b"{}") for _ in range(3)])
    elector = rest.for_component("leader-election")
    rest.request("GET", "/api/v1/pods")
    elector.request("GET", "/apis/coordination.k8s.io/v1/namespaces/a/leases/x")
    rest.request("GET", "/api/v1/pods")
    assert [t - pool.sent_at[0] for t in pool.sent_at] == pytest.approx([0.0, 0.0, 0.5])
    assert pool.agents[1] == f"{pool.agents[0]}/leader-election"


def test_a_request_whose_deadline_passed_while_it_waited_for_its_token_is_not_sent() -> None:
    # Failed before: the deadline was checked before the token wait only, so a leader
    # frozen (SIGSTOP) while waiting sent its Lease write on waking, past its renew
    # deadline (the audit log showed a 409 update after the new leader acquired).
    clock = FakeClock()
    rest, pool = limited_client(clock, [FakeResponse(200, b"{}") for _ in range(2)])

    def frozen(seconds: float) -> None:
        time.sleep(0.3)  # the process stood still past the 0.2 s deadline

    rest._rate_limiter = TokenBucket(10, 1, clock=clock.monotonic, sleep=frozen)
    rest.request("GET", "/api/v1/namespaces")
    with (
        context.scope(context.BACKGROUND.with_timeout(0.2)),
        pytest.raises(errors.DeadlineExceeded, match="deadline exceeded"),
    ):
        rest.request("PUT", "/apis/coordination.k8s.io/v1/namespaces/a/leases/x", body={})
    assert len(pool.sent_at) == 1
