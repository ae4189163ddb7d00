"""Leader election against a real API server: one leader, release, expiry, theft."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cronjob_operator import envtest
from cronjob_operator.runtime import kinds, metrics
from cronjob_operator.runtime.client import LiveReader, RestClient, Writer, load_configuration
from cronjob_operator.runtime.leaderelection import (
    LeaderElectionConfig,
    LeaderElector,
    record_from_lease,
)

LEASE = "cronjob-operator-lock"
LEASE_DURATION = 3.0
RENEW_DEADLINE = 2.0
RETRY_PERIOD = 0.5


def seconds_until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``condition`` until true; returns the seconds it took."""
    started = time.monotonic()
    envtest.wait_for(condition, timeout, interval=0.02, message=what)
    return time.monotonic() - started


class Candidate:
    """One elector on its own thread, with its callbacks recorded."""

    def __init__(
        self,
        rest: RestClient,
        namespace: str,
        identity: str,
        *,
        release_on_cancel: bool = True,
        lease_duration: float = LEASE_DURATION,
        renew_deadline: float = RENEW_DEADLINE,
    ) -> None:
        self.identity = identity
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.stop = threading.Event()
        config = LeaderElectionConfig(
            name=LEASE,
            namespace=namespace,
            identity=identity,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=RETRY_PERIOD,
            release_on_cancel=release_on_cancel,
        )
        self.elector = LeaderElector(
            rest, config, on_started_leading=self.started.set, on_stopped_leading=self.stopped.set
        )
        self.thread = threading.Thread(
            target=self.elector.run, args=(self.stop,), name=f"elector-{identity}", daemon=True
        )

    def start(self) -> Candidate:
        self.thread.start()
        return self

    def shutdown(self, timeout: float = 15.0) -> None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.identity} did not stop within {timeout}s"


@pytest.fixture
def rest(control_plane: envtest.ControlPlane) -> RestClient:
    return RestClient(load_configuration(str(control_plane.kubeconfig)))


@pytest.fixture
def candidates(rest: RestClient, namespace: str) -> Iterator[Callable[..., Candidate]]:
    made: list[Candidate] = []

    def make(identity: str, **kwargs: Any) -> Candidate:
        candidate = Candidate(rest, namespace, identity, **kwargs)
        made.append(candidate)
        return candidate.start()

    yield make
    for candidate in made:
        candidate.shutdown()


def lease_of(rest: RestClient, namespace: str) -> dict[str, Any]:
    return dict(LiveReader(rest).get(kinds.LEASE, LEASE, namespace))


def leader_of(*candidates: Candidate) -> Candidate:
    (leader,) = [c for c in candidates if c.elector.is_leader]
    return leader


def test_two_candidates_exactly_one_leads(
    rest: RestClient, namespace: str, candidates: Callable[..., Candidate]
) -> None:
    a, b = candidates("a"), candidates("b")
    seconds_until(lambda: a.started.is_set() or b.started.is_set(), 10, "a leader")
    leader = leader_of(a, b)
    follower = b if leader is a else a

    # across several renewals (and past one lease duration) nothing changes hands
    deadline = time.monotonic() + LEASE_DURATION + 2 * RETRY_PERIOD
    while time.monotonic() < deadline:
        assert leader_of(a, b) is leader
        assert not follower.started.is_set()
        time.sleep(0.1)

    spec = lease_of(rest, namespace)["spec"]
    assert spec["holderIdentity"] == leader.identity
    assert spec["leaseDurationSeconds"] == int(LEASE_DURATION)
    assert spec["leaseTransitions"] == 0
    assert spec["renewTime"] != spec["acquireTime"]  # it was renewed
    assert spec["renewTime"].endswith("Z")
    assert len(spec["renewTime"]) == len("2006-01-02T15:04:05.000000Z")
    assert not leader.stopped.is_set()


def test_a_released_lease_passes_on_sooner_than_it_could_expire(
    rest: RestClient, namespace: str, candidates: Callable[..., Candidate]
) -> None:
    # a long lease: only the release, never expiry, can explain a quick hand-over
    a = candidates("a", lease_duration=10.0)
    seconds_until(a.started.is_set, 10, "a to lead")
    b = candidates("b", lease_duration=10.0)
    seconds_until(
        lambda: lease_of(rest, namespace)["spec"]["holderIdentity"] == "a", 5, "a's lease"
    )

    a.shutdown()
    assert a.stopped.is_set()
    assert not a.elector.is_leader
    took = seconds_until(b.started.is_set, 10, "b to take over")
    # b takes it at its next try (about one retry period); an expiry could not happen
    # before the 10 s lease minus one jittered retry period since a's last renewal.
    assert took < 10.0 - (1 + 1.2) * RETRY_PERIOD, f"hand-over took {took:.2f}s"

    record = record_from_lease(lease_of(rest, namespace))
    assert record.holder_identity == "b"
    assert record.lease_transitions == 1
    assert record.lease_duration_seconds == 10


def test_an_expired_lease_is_taken_after_the_lease_duration(
    rest: RestClient, namespace: str, candidates: Callable[..., Candidate]
) -> None:
    a = candidates("a", release_on_cancel=False)
    seconds_until(a.started.is_set, 10, "a to lead")
    b = candidates("b")
    seconds_until(
        lambda: lease_of(rest, namespace)["spec"]["holderIdentity"] == "a", 5, "a's lease"
    )

    a.shutdown()  # stops renewing, keeps the lease: a crash, as far as b can tell
    assert a.stopped.is_set()
    assert lease_of(rest, namespace)["spec"]["holderIdentity"] == "a"
    # The wait's own deadline bounds it from above; the behaviour is the lower bound.
    took = seconds_until(b.started.is_set, 3 * LEASE_DURATION, "b to take over")
    # b counts the lease duration from when it saw a's last renewal (<= one retry ago)
    assert took >= LEASE_DURATION - RETRY_PERIOD - 0.3, f"took over early, after {took:.2f}s"

    record = record_from_lease(lease_of(rest, namespace))
    assert record.holder_identity == "b"
    assert record.lease_transitions == 1


def test_a_leader_whose_lease_is_stolen_stops_at_once(
    rest: RestClient, namespace: str, candidates: Callable[..., Candidate]
) -> None:
    # A long renew deadline: stopping before it can only be the stolen lease's doing.
    a = candidates("a", lease_duration=30.0, renew_deadline=20.0)
    seconds_until(a.started.is_set, 10, "a to lead")
    gauge = {"name": LEASE}
    assert metrics.DEFAULT.registry.get_sample_value("leader_election_master_status", gauge) == 1

    lease = lease_of(rest, namespace)
    lease["spec"] = {**lease["spec"], "holderIdentity": "intruder", "leaseDurationSeconds": 60}
    Writer(rest).update(kinds.LEASE, lease)

    took = seconds_until(a.stopped.is_set, 20.0, "a to stop leading")
    assert took < 20.0, "at its next renewal, not at the renew deadline"
    a.thread.join(5)
    assert not a.thread.is_alive()  # run returned: the manager exits
    assert not a.elector.is_leader
    assert metrics.DEFAULT.registry.get_sample_value("leader_election_master_status", gauge) == 0
    assert lease_of(rest, namespace)["spec"]["holderIdentity"] == "intruder"


def test_stop_before_acquiring_calls_no_callback(
    rest: RestClient,
    namespace: str,
    candidates: Callable[..., Candidate],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="cronjob_operator.runtime.leaderelection._elector")
    a = candidates("a")
    seconds_until(a.started.is_set, 10, "a to lead")
    b = candidates("b")

    def b_saw_a_lead() -> bool:  # b has tried at least once and is waiting
        return any(
            r.threadName == "elector-b" and "holder is now 'a'" in r.getMessage()
            for r in caplog.records
        )

    seconds_until(b_saw_a_lead, 10, "b to see a holding the lease")
    b.shutdown(timeout=2.0)
    assert not b.started.is_set()
    assert not b.stopped.is_set()
    assert a.elector.is_leader
