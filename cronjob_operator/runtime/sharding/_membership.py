"""Membership of a shard group, decided from the members' Leases (pure functions).

Every member holds one Lease named after itself, labelled with its group, with itself as
``holderIdentity``, renewed by the leader elector's loop. What the assigner concludes
from a Lease it has observed (``_leaserecord.Observation``, timed on the assigner's own
monotonic clock, never by the server's ``renewTime``) is one of:

* ``LIVE``: the member holds its Lease and the record changed less than
  ``leaseDurationSeconds`` ago on our clock;
* ``EXPIRED``: the member holds it but the record has not changed for that long. The
  member's own write fence refused its writes ``renew_deadline`` after its last
  renewal began, before this point; the assigner takes the Lease over (writes itself as
  holder, with the resourceVersion it read: a renewal in between makes that a Conflict)
  and only then treats the member as gone;
* ``GONE``: somebody else holds it (taken over) or nobody (released on shutdown, after
  the member stopped its controllers): its objects move at once, without a drain.

A member's name is also a label value and a Lease name, so it is at most 63 characters
of ``[a-z0-9-]``; each process picks a fresh one (``member_name``), so a name that has
gone never comes back and a restarted replica is a new member.
"""

from __future__ import annotations

import enum
import re
import uuid

from cronjob_operator.runtime.leaderelection import Observation

_MAX_NAME = 63
_SUFFIX = 8


class MemberState(enum.Enum):
    """What the assigner may do with a member's objects (module doc)."""

    LIVE = "live"
    EXPIRED = "expired"
    GONE = "gone"


def member_name(base: str, *, suffix: str | None = None) -> str:
    """``<base>-<8 hex>``: a valid Lease name and label value, unique per process."""
    tail = suffix if suffix is not None else uuid.uuid4().hex[:_SUFFIX]
    cleaned = re.sub(r"[^a-z0-9-]+", "-", base.lower()).strip("-")
    head = cleaned[: _MAX_NAME - len(tail) - 1].rstrip("-") or "member"
    return f"{head}-{tail}"


def member_state(lease_name: str, observation: Observation, now: float) -> MemberState:
    """The state of the member owning Lease ``lease_name`` as observed (module doc)."""
    record = observation.record
    if record.holder_identity != lease_name:
        return MemberState.GONE
    if now >= observation.observed_at + record.lease_duration_seconds:
        return MemberState.EXPIRED
    return MemberState.LIVE
