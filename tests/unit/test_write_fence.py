"""The write fence: a write made for the leader is refused before it is sent once the
Lease may have expired by our own clock, or while this process does not lead.

The REST client's side is checked with a fence the test controls; the elector's side
(``LeaderElector.write_refusal``) on a fake monotonic clock, against the in-memory Lease
API of ``lease_api``. The elector's retry period is long in real time (30 s), so its
renew loop sleeps through the test and only the fake clock moves.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from cronjob_operator.runtime import errors
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.leaderelection import LeaderElectionConfig, LeaderElector
from cronjob_operator.runtime.metrics import Metrics
from tests.unit.lease_api import LeaseApi

CONFIGMAPS = "/api/v1/namespaces/a/configmaps"


def test_a_fenced_client_sends_no_write_the_fence_refuses() -> None:
    api = LeaseApi()
    refusal: list[str | None] = ["lease lost"]
    fenced = api.client().fenced(lambda: refusal[0])
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        with pytest.raises(errors.NotLeader, match=f"{method} {CONFIGMAPS} not sent: lease lost"):
            fenced.request(method, CONFIGMAPS, body={})
    fenced.request("GET", CONFIGMAPS)
    assert [method for method, _, _ in api.requests] == ["GET"], "reads never ask the fence"
    refusal[0] = None
    fenced.request("POST", CONFIGMAPS, body={})
    assert api.writes() == [("POST", CONFIGMAPS)]


def test_a_refused_write_is_not_retried_and_is_not_transient() -> None:
    assert errors.retry_delay("POST", errors.NotLeader("x")) is None
    assert not errors.is_transient(errors.NotLeader("x"))


class Leader:
    """An elector leading the Lease of ``api`` on ``clock``, stopped after the test."""

    def __init__(self, api: LeaseApi, clock: FakeClock) -> None:
        self.started = threading.Event()
        self.stop = threading.Event()
        config = LeaderElectionConfig(
            name="lock",
            namespace="a",
            identity="me",
            lease_duration=60.0,
            renew_deadline=40.0,
            retry_period=30.0,
        )
        self.elector = LeaderElector(
            api.client(),
            config,
            on_started_leading=self.started.set,
            on_stopped_leading=lambda: None,
            clock=clock.monotonic,
            metrics=Metrics(),
        )
        self.thread = threading.Thread(target=self.elector.run, args=(self.stop,), daemon=True)


@pytest.fixture
def leader_of() -> Iterator[list[Leader]]:
    leaders: list[Leader] = []
    yield leaders
    for leader in leaders:
        leader.stop.set()
        leader.thread.join(10)


def test_writes_are_refused_until_the_lease_is_acquired(leader_of: list[Leader]) -> None:
    clock = FakeClock()
    leader = Leader(LeaseApi(), clock)
    leader_of.append(leader)
    assert leader.elector.write_refusal() == "this process does not hold lease a/lock"
    leader.thread.start()
    assert leader.started.wait(10)
    assert leader.elector.write_refusal() is None


def test_the_fence_closes_a_renew_deadline_after_the_last_renewal_began(
    leader_of: list[Leader],
) -> None:
    # Each Lease write takes 5 s on the fake clock: the fence counts from when the
    # acquiring round began, not from when its write came back.
    clock = FakeClock()
    leader = Leader(LeaseApi(on_lease_write=lambda: clock.advance(5.0)), clock)
    leader_of.append(leader)
    began = clock.monotonic()
    leader.thread.start()
    assert leader.started.wait(10)
    assert clock.monotonic() - began == pytest.approx(5.0)
    clock.advance(34.9)  # 39.9 s after the round began: inside the renew deadline
    assert leader.elector.write_refusal() is None
    clock.advance(0.1)
    refusal = leader.elector.write_refusal()
    assert refusal == (
        "lease a/lock may have expired: the last successful renewal began 40.0s ago "
        "(renew deadline 40s)"
    )


def test_after_stepping_down_writes_are_refused(leader_of: list[Leader]) -> None:
    clock = FakeClock()
    leader = Leader(LeaseApi(), clock)
    leader.thread.start()
    assert leader.started.wait(10)
    leader.stop.set()
    leader.thread.join(10)
    assert leader.elector.write_refusal() == "this process does not hold lease a/lock"
