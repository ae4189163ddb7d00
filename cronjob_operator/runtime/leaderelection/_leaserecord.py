"""The Lease record decisions of leader election, as pure functions (no I/O, no clock reads).

What client-go's ``leaderelection`` decides about a ``coordination.k8s.io/v1`` Lease,
separated from the elector that reads and writes it: the record a Lease holds
(``record_from_lease``, ``lease_spec``), when a record counts as unchanged
(``observe``: a record is timed from the moment WE first saw it, on our monotonic
clock, never by the server's ``renewTime``, so clock skew cannot make two leaders),
whether we may take the Lease (``may_acquire``), and the record that takes, renews
(``acquired_record``) or releases it (``released_record``). A timestamp is client-go's
MicroTime (``2006-01-02T15:04:05.000000Z``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class LeaderElectionRecord:
    """The Lease spec fields leader election reads and writes (times as sent)."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    lease_transitions: int = 0


@dataclass(frozen=True, slots=True)
class Observation:
    """A record and the time on OUR clock when we first saw it unchanged."""

    record: LeaderElectionRecord
    observed_at: float


def format_micro_time(moment: datetime) -> str:
    """A metav1.MicroTime in RFC 3339 with microseconds, in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def record_from_lease(lease: Mapping[str, Any]) -> LeaderElectionRecord:
    """The leader election record held in a Lease object."""
    spec = lease.get("spec") or {}
    return LeaderElectionRecord(
        holder_identity=str(spec.get("holderIdentity") or ""),
        lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=str(spec.get("acquireTime") or ""),
        renew_time=str(spec.get("renewTime") or ""),
        lease_transitions=int(spec.get("leaseTransitions") or 0),
    )


def lease_spec(record: LeaderElectionRecord) -> dict[str, Any]:
    """The Lease spec for ``record`` (what client-go's LeaderElectionRecordToLeaseSpec sends)."""
    spec: dict[str, Any] = {
        "holderIdentity": record.holder_identity,
        "leaseDurationSeconds": record.lease_duration_seconds,
        "leaseTransitions": record.lease_transitions,
    }
    if record.acquire_time:
        spec["acquireTime"] = record.acquire_time
    if record.renew_time:
        spec["renewTime"] = record.renew_time
    return spec


def observe(previous: Observation | None, record: LeaderElectionRecord, now: float) -> Observation:
    """``previous`` if the record is unchanged since then, else ``record`` seen ``now``."""
    if previous is not None and previous.record == record:
        return previous
    return Observation(record, now)


def may_acquire(observation: Observation, *, identity: str, now: float) -> bool:
    """True when we may write ourselves into the Lease.

    The Lease is free when nobody holds it, when we hold it already, or when its record
    has not changed for its ``leaseDurationSeconds`` since we first observed it.
    """
    record = observation.record
    if not record.holder_identity or record.holder_identity == identity:
        return True
    return now >= observation.observed_at + record.lease_duration_seconds


def acquired_record(
    old: LeaderElectionRecord | None,
    *,
    identity: str,
    lease_duration_seconds: int,
    now: datetime,
) -> LeaderElectionRecord:
    """The record that makes ``identity`` the holder (a renewal if it holds ``old``).

    A renewal keeps ``acquireTime`` and ``leaseTransitions``; taking the Lease from
    someone else (or from nobody) sets ``acquireTime`` and counts one more transition.
    A new Lease starts at zero transitions.
    """
    stamp = format_micro_time(now)
    if old is None:
        return LeaderElectionRecord(identity, lease_duration_seconds, stamp, stamp, 0)
    if old.holder_identity == identity:
        return LeaderElectionRecord(
            identity, lease_duration_seconds, old.acquire_time, stamp, old.lease_transitions
        )
    return LeaderElectionRecord(
        identity, lease_duration_seconds, stamp, stamp, old.lease_transitions + 1
    )


def released_record(old: LeaderElectionRecord, *, now: datetime) -> LeaderElectionRecord:
    """The record that gives the Lease up: no holder, 1 s duration (as client-go)."""
    stamp = format_micro_time(now)
    return LeaderElectionRecord("", 1, stamp, stamp, old.lease_transitions)
