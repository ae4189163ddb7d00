"""Leader election decisions: when a candidate may take the Lease and what it writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from cronjob_operator.runtime.leaderelection import _elector as leaderelection
from cronjob_operator.runtime.leaderelection import _leaserecord as le

NOW = datetime(2016, 5, 19, 9, 59, 0, 123456, tzinfo=UTC)
ME = "host-a_1111"
OTHER = "host-b_2222"


def held_by(holder: str, *, duration: int = 15, renew: str = "r1") -> le.LeaderElectionRecord:
    return le.LeaderElectionRecord(holder, duration, "2016-05-19T09:00:00.000000Z", renew, 3)


class TestMayAcquire:
    def test_an_empty_holder_is_free(self) -> None:
        observation = le.Observation(held_by(""), observed_at=100.0)
        assert le.may_acquire(observation, identity=ME, now=100.0)

    def test_our_own_lease_is_ours(self) -> None:
        observation = le.Observation(held_by(ME), observed_at=100.0)
        assert le.may_acquire(observation, identity=ME, now=100.0)

    def test_a_live_lease_of_another_is_not(self) -> None:
        observation = le.Observation(held_by(OTHER), observed_at=100.0)
        assert not le.may_acquire(observation, identity=ME, now=100.0)
        assert not le.may_acquire(observation, identity=ME, now=114.9)

    def test_expiry_counts_the_record_duration_from_our_observation(self) -> None:
        observation = le.Observation(held_by(OTHER, duration=15), observed_at=100.0)
        assert le.may_acquire(observation, identity=ME, now=115.0)

    def test_a_released_lease_has_no_holder_and_a_one_second_duration(self) -> None:
        released = le.released_record(held_by(OTHER), now=NOW)
        assert (released.holder_identity, released.lease_duration_seconds) == ("", 1)
        assert le.may_acquire(le.Observation(released, 0.0), identity=ME, now=0.0)

    def test_a_one_second_lease_of_another_expires_after_one_second(self) -> None:
        # Through expiry, not the empty-holder rule: the holder is still named.
        observation = le.Observation(held_by(OTHER, duration=1), observed_at=100.0)
        assert not le.may_acquire(observation, identity=ME, now=100.9)
        assert le.may_acquire(observation, identity=ME, now=101.0)


class TestObserve:
    def test_an_unchanged_record_keeps_its_first_observation_time(self) -> None:
        first = le.observe(None, held_by(OTHER), 100.0)
        again = le.observe(first, held_by(OTHER), 110.0)
        assert again.observed_at == 100.0
        assert le.may_acquire(le.observe(again, held_by(OTHER), 115.0), identity=ME, now=115.0)

    def test_a_renewal_restarts_the_expiry(self) -> None:
        first = le.observe(None, held_by(OTHER, renew="r1"), 100.0)
        renewed = le.observe(first, held_by(OTHER, renew="r2"), 112.0)
        assert renewed.observed_at == 112.0
        assert not le.may_acquire(renewed, identity=ME, now=120.0)
        assert le.may_acquire(renewed, identity=ME, now=127.0)

    def test_the_servers_renew_time_is_never_compared_with_our_clock(self) -> None:
        # a renewTime far in the past (a holder with a skewed clock) is still a live lease
        stale_looking = le.LeaderElectionRecord(OTHER, 15, "1970-01-01T00:00:00.000000Z",
                                                "1970-01-01T00:00:00.000000Z", 0)  # fmt: skip
        observation = le.observe(None, stale_looking, 500.0)
        assert not le.may_acquire(observation, identity=ME, now=510.0)


class TestRecords:
    def test_a_new_lease(self) -> None:
        record = le.acquired_record(None, identity=ME, lease_duration_seconds=15, now=NOW)
        stamp = "2016-05-19T09:59:00.123456Z"
        assert record == le.LeaderElectionRecord(ME, 15, stamp, stamp, 0)

    def test_a_renewal_keeps_acquire_time_and_transitions(self) -> None:
        old = held_by(ME)
        record = le.acquired_record(old, identity=ME, lease_duration_seconds=15, now=NOW)
        assert record.acquire_time == old.acquire_time
        assert record.renew_time == "2016-05-19T09:59:00.123456Z"
        assert record.lease_transitions == old.lease_transitions

    @pytest.mark.parametrize("holder", [OTHER, ""])
    def test_taking_over_counts_a_transition(self, holder: str) -> None:
        old = held_by(holder)
        record = le.acquired_record(old, identity=ME, lease_duration_seconds=3, now=NOW)
        stamp = "2016-05-19T09:59:00.123456Z"
        assert record == le.LeaderElectionRecord(ME, 3, stamp, stamp, old.lease_transitions + 1)

    def test_released(self) -> None:
        record = le.released_record(held_by(ME), now=NOW)
        stamp = "2016-05-19T09:59:00.123456Z"
        assert record == le.LeaderElectionRecord("", 1, stamp, stamp, 3)
        assert le.lease_spec(record)["holderIdentity"] == ""

    def test_micro_time_is_utc_with_six_digits(self) -> None:
        plus_two = timezone(timedelta(hours=2))
        assert le.format_micro_time(datetime(2024, 1, 2, 5, 4, 5, tzinfo=plus_two)) == (
            "2024-01-02T03:04:05.000000Z"
        )

    def test_lease_round_trip(self) -> None:
        record = held_by(OTHER)
        lease = {"metadata": {"name": "x"}, "spec": le.lease_spec(record)}
        assert le.record_from_lease(lease) == record
        assert le.lease_spec(record) == {
            "holderIdentity": OTHER,
            "leaseDurationSeconds": 15,
            "acquireTime": "2016-05-19T09:00:00.000000Z",
            "renewTime": "r1",
            "leaseTransitions": 3,
        }

    def test_an_empty_lease(self) -> None:
        assert le.record_from_lease({"metadata": {"name": "x"}}) == le.LeaderElectionRecord()
        assert le.record_from_lease({"spec": {"holderIdentity": None}}).holder_identity == ""


class TestConfig:
    def test_defaults_are_client_gos(self) -> None:
        config = leaderelection.LeaderElectionConfig(name="lock", namespace="ns")
        assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15, 10, 2)
        assert config.release_on_cancel
        host, _, suffix = config.identity.rpartition("_")
        assert host
        assert len(suffix) == 36
        assert (
            leaderelection.LeaderElectionConfig(name="lock", namespace="ns").identity
            != config.identity
        )

    @pytest.mark.parametrize(
        ("lease", "renew", "retry"),
        [(10, 10, 2), (15, 2, 2), (15, 10, 0), (0.5, 0.4, 0.1)],
    )
    def test_inconsistent_timing_is_refused(self, lease: float, renew: float, retry: float) -> None:
        with pytest.raises(ValueError, match="must be"):
            leaderelection.LeaderElectionConfig(
                name="lock",
                namespace="ns",
                lease_duration=lease,
                renew_deadline=renew,
                retry_period=retry,
            )

    def test_a_name_is_required(self) -> None:
        with pytest.raises(ValueError, match="lease name"):
            leaderelection.LeaderElectionConfig(name="", namespace="ns")

    def test_short_test_timings_are_valid(self) -> None:
        leaderelection.LeaderElectionConfig(
            name="lock", namespace="ns", lease_duration=3, renew_deadline=2, retry_period=0.5
        )
