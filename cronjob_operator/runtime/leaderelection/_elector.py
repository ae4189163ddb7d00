"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's ``leaderelection``.

Several replicas of the operator run at once; only the one holding the Lease runs the
controllers, the others wait as warm standbys. ``LeaderElector.run`` blocks for the
whole life of a candidate:

1. Acquire: every ``retry_period`` (jittered up to 2.2x, as client-go's JitterUntil with
   factor 1.2) read the Lease and take it when it does not exist (create; AlreadyExists
   means someone was faster), when ``holderIdentity`` is empty (released), when we already
   hold it, or when the record has not changed for ``leaseDurationSeconds`` counted on
   OUR clock from the moment we first saw that record. The server's ``renewTime`` is
   never compared with our clock, so clock skew between nodes cannot cause two leaders.
   Writes carry the ``resourceVersion`` we read: a Conflict means another candidate
   wrote first and we try again next round.
2. Lead: call ``on_started_leading`` (it must return quickly; start threads from it),
   then renew every ``retry_period``, retrying failures every ``retry_period``.
3. Stop leading when:
   * no renewal has succeeded for ``renew_deadline`` (measured from the start of the
     last successful renewal; the REST calls of a round honour that deadline),
     or a renewal finds another holder in the Lease: the Lease is lost.
     ``on_stopped_leading`` is called at once and ``run`` returns; the manager then
     exits, as controller-runtime does, so two leaders never act at once;
   * ``stop`` is set: with ``release_on_cancel`` the Lease is released first (holder "",
     ``leaseDurationSeconds`` 1, as client-go does) so a standby takes over within one
     retry period; then ``on_stopped_leading`` is called and ``run`` returns. Set
     ``stop`` only after this process has stopped acting as leader.

``write_refusal`` is the write fence, one step past client-go: a leader's workers may
otherwise write in the instant between the Lease expiring and ``run`` noticing (a
process frozen by SIGSTOP or a long GC pause wakes up with writes in hand). It returns
a reason while this process is not leading, and once ``renew_deadline`` has passed on
``clock`` since the last successful renewal *began* (the earliest moment the others can
have started counting the Lease down, so ``lease_duration - renew_deadline`` is the
margin left for a request in flight and for clock rate differences); None otherwise.
The manager's REST client asks it right before each controller or event write is sent;
the elector's own Lease writes are not fenced (their resourceVersion fences them).

``stop`` set before the Lease is acquired makes ``run`` return without calling either
callback. API errors never escape ``run``: they are logged and count as a failed round.
An exception raised by a callback propagates out of ``run``. A Lease timestamp is
client-go's MicroTime (``2006-01-02T15:04:05.000000Z``), written from ``wall_clock``;
every decision uses ``clock`` (monotonic). The ``leader_election_master_status{name}``
gauge is 1 while leading and 0 otherwise.

The decisions are pure functions in ``_leaserecord`` (``observe``, ``may_acquire``,
``acquired_record``, ``released_record``), unit tested without a cluster; this module
is the elector that acts on them.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cronjob_operator.runtime import context, errors, kinds, objects
from cronjob_operator.runtime.client import LiveReader, RestClient, Writer
from cronjob_operator.runtime.leaderelection._leaserecord import (
    LeaderElectionRecord,
    Observation,
    acquired_record,
    lease_spec,
    may_acquire,
    observe,
    record_from_lease,
    released_record,
)
from cronjob_operator.runtime.metrics import DEFAULT, Metrics

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
"""Acquire retries wait ``retry_period * (1 + random * JITTER_FACTOR)``, as client-go."""


POD_NAME_ENV = "POD_NAME"
"""Set from the downward API by config/manager; names the holder after its Pod."""


def default_identity() -> str:
    """``<Pod name or host name>_<uuid>``: a Lease's holder says which Pod leads."""
    return f"{os.environ.get(POD_NAME_ENV) or socket.gethostname()}_{uuid.uuid4()}"


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Which Lease to contend for, as whom, and the timing (client-go's defaults)."""

    name: str
    namespace: str
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        if not self.name or not self.namespace or not self.identity:
            raise ValueError("leader election needs a lease name, namespace and identity")
        if self.lease_duration < 1:
            raise ValueError("lease_duration must be at least 1 second")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if self.retry_period <= 0 or self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"renew_deadline must be greater than {JITTER_FACTOR} x retry_period")


@dataclass(frozen=True, slots=True)
class _Outcome:
    """One acquire-or-renew round: did we hold the Lease after it, and what we saw."""

    acquired: bool
    observation: Observation | None
    lease: Mapping[str, Any] | None


class LeaderElector:
    """Contends for one Lease and calls back when this process starts and stops leading."""

    def __init__(
        self,
        rest: RestClient,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = _utc_now,
        metrics: Metrics | None = None,
    ) -> None:
        self._reader = LiveReader(rest)
        self._writer = Writer(rest)
        self._config = config
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._clock = clock
        self._wall_clock = wall_clock
        self._lease_seconds = int(config.lease_duration)
        self._gauge = (metrics or DEFAULT).leader_election_master_status.labels(config.name)
        self._observation: Observation | None = None
        self._lease: Mapping[str, Any] | None = None
        self._leading = False
        self._renewed_at = 0.0
        self._describe = f"{config.namespace}/{config.name}"

    @property
    def is_leader(self) -> bool:
        """True between ``on_started_leading`` and ``on_stopped_leading``."""
        return self._leading

    def write_refusal(self) -> str | None:
        """Why a write made for the leader must not be sent now, or None (module doc)."""
        if not self._leading:
            return f"this process does not hold lease {self._describe}"
        since = self._clock() - self._renewed_at
        if since >= self._config.renew_deadline:
            return (
                f"lease {self._describe} may have expired: the last successful renewal "
                f"began {since:.1f}s ago (renew deadline {self._config.renew_deadline:g}s)"
            )
        return None

    @property
    def identity(self) -> str:
        """The holder identity this elector writes into the Lease."""
        return self._config.identity

    def run(self, stop: threading.Event) -> None:
        """Block: acquire, lead while renewing, then stop leading (see the module doc)."""
        self._gauge.set(0)
        if not self._acquire(stop):
            return
        self._set_leading(True)
        try:
            self._on_started_leading()
            stopped = self._renew(stop)
        finally:
            self._set_leading(False)
        if stopped:
            if self._config.release_on_cancel:
                self._release()
            log.info("stopped leading lease %s", self._describe)
        else:
            log.error("lost lease %s: stopped leading", self._describe)
        self._on_stopped_leading()

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        self._gauge.set(1 if leading else 0)

    def _acquire(self, stop: threading.Event) -> bool:
        log.info("attempting to acquire leader lease %s", self._describe)
        while not stop.is_set():
            started = self._clock()
            ctx = self._until(started + self._config.renew_deadline, stop)
            outcome = self._attempt(self._try_acquire_or_renew, ctx)
            self._apply(outcome)
            if outcome.acquired:
                self._renewed_at = started
                log.info("successfully acquired lease %s as %s", self._describe, self.identity)
                return True
            period = self._config.retry_period * (1 + random.random() * JITTER_FACTOR)
            if stop.wait(period):
                break
        return False

    def _renew(self, stop: threading.Event) -> bool:
        """Renew until ``stop`` (returns True) or until the Lease is lost (False)."""
        config = self._config
        while not stop.wait(config.retry_period):
            deadline = self._renewed_at + config.renew_deadline
            while True:
                started = self._clock()
                outcome = self._attempt(self._try_acquire_or_renew, self._until(deadline))
                self._apply(outcome)
                if outcome.acquired:
                    self._renewed_at = started
                    log.debug("renewed lease %s", self._describe)
                    break
                if self._held_by_other():
                    return False
                remaining = deadline - self._clock()
                if remaining <= 0:
                    log.error(
                        "failed to renew lease %s within %.1fs",
                        self._describe,
                        config.renew_deadline,
                    )
                    return False
                if stop.wait(min(config.retry_period, remaining)):
                    return True
        return True

    def _held_by_other(self) -> bool:
        observation = self._observation
        if observation is None:
            return False
        holder = observation.record.holder_identity
        return bool(holder) and holder != self.identity

    def _attempt(
        self, attempt: Callable[[Observation | None], _Outcome], ctx: context.Context
    ) -> _Outcome:
        """Run one attempt on this thread, its REST calls bounded by ``ctx``.

        A request could otherwise block for the REST client's whole retry budget; a
        leader must not keep acting past its renew deadline while it waits, so the
        calls give up at the deadline (``DeadlineExceeded``, a failed round).
        """
        observation = self._observation
        with context.scope(ctx):
            try:
                return attempt(observation)
            except Exception:
                log.exception("leader election attempt on lease %s failed", self._describe)
                return _Outcome(False, observation, None)

    def _until(self, deadline: float, stop: threading.Event | None = None) -> context.Context:
        """A context ending at ``deadline`` (on ``clock``), or when ``stop`` is set."""
        seconds = max(0.0, deadline - self._clock())
        return context.Context(stop or threading.Event()).with_timeout(seconds)

    def _apply(self, outcome: _Outcome) -> None:
        previous = self._observation
        if outcome.observation is not None:
            holder = outcome.observation.record.holder_identity
            if previous is None or previous.record.holder_identity != holder:
                log.info("lease %s: holder is now %r", self._describe, holder or "<nobody>")
            self._observation = outcome.observation
        if outcome.lease is not None:
            self._lease = outcome.lease

    def _try_acquire_or_renew(self, previous: Observation | None) -> _Outcome:
        config = self._config
        try:
            lease = self._reader.get(kinds.LEASE, config.name, config.namespace)
        except errors.NotFound:
            return self._create(previous)
        except (errors.ApiError, errors.TransportError) as exc:
            log.warning("error retrieving lease %s: %s", self._describe, exc)
            return _Outcome(False, previous, None)
        observation = observe(previous, record_from_lease(lease), self._clock())
        if not may_acquire(observation, identity=config.identity, now=self._clock()):
            return _Outcome(False, observation, lease)
        record = acquired_record(
            observation.record,
            identity=config.identity,
            lease_duration_seconds=self._lease_seconds,
            now=self._wall_clock(),
        )
        try:
            updated = self._write(lease, record)
        except errors.Conflict:
            log.debug("lease %s changed while we wrote it", self._describe)
            return _Outcome(False, observation, lease)
        except (errors.ApiError, errors.TransportError) as exc:
            log.warning("error updating lease %s: %s", self._describe, exc)
            return _Outcome(False, observation, lease)
        return _Outcome(True, Observation(record_from_lease(updated), self._clock()), updated)

    def _create(self, previous: Observation | None) -> _Outcome:
        config = self._config
        record = acquired_record(
            None,
            identity=config.identity,
            lease_duration_seconds=self._lease_seconds,
            now=self._wall_clock(),
        )
        body = {
            "apiVersion": kinds.LEASE.api_version,
            "kind": kinds.LEASE.kind,
            "metadata": {"name": config.name, "namespace": config.namespace},
            "spec": lease_spec(record),
        }
        try:
            created = self._writer.create(kinds.LEASE, body)
        except errors.AlreadyExists:
            log.debug("lease %s was created by another candidate", self._describe)
            return _Outcome(False, previous, None)
        except (errors.ApiError, errors.TransportError) as exc:
            log.warning("error creating lease %s: %s", self._describe, exc)
            return _Outcome(False, previous, None)
        return _Outcome(True, Observation(record_from_lease(created), self._clock()), created)

    def _write(self, lease: Mapping[str, Any], record: LeaderElectionRecord) -> dict[str, Any]:
        body = objects.thaw(lease)
        body["spec"] = lease_spec(record)
        return self._writer.update(kinds.LEASE, body)

    def _release(self) -> None:
        """Give the Lease up if we still hold it (bounded by ``renew_deadline``)."""
        observation, lease = self._observation, self._lease
        if observation is None or lease is None or not self._holds(observation):
            return
        record = released_record(observation.record, now=self._wall_clock())

        def attempt(_previous: Observation | None) -> _Outcome:
            try:
                released = self._write(lease, record)
            except (errors.ApiError, errors.TransportError) as exc:
                log.warning("failed to release lease %s: %s", self._describe, exc)
                return _Outcome(False, None, None)
            return _Outcome(True, Observation(record_from_lease(released), self._clock()), released)

        outcome = self._attempt(attempt, self._until(self._clock() + self._config.renew_deadline))
        if outcome.acquired:
            self._apply(outcome)
            log.info("released lease %s", self._describe)

    def _holds(self, observation: Observation) -> bool:
        return observation.record.holder_identity == self.identity
