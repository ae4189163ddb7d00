"""The injectable clock: how a reconciler reads "now", so tests never wait for the wall clock.

A reconciler takes a ``Clock`` (any function returning an aware ``datetime``) and calls
it once per reconcile; production passes ``utc_now``. Tests pass a ``FakeClock``, which
only moves when told to (``set``, ``advance``), from any thread; its ``monotonic`` is the
same clock as float seconds, for code that takes a ``Callable[[], float]`` (the work
queue's delays and backoff, the client's token bucket), and its ``sleep`` moves it
instead of waiting, for code that takes a ``Callable[[float], None]``, remembering each
sleep in ``slept``. The clock is wall time in UTC: schedules and Kubernetes timestamps
are wall time. Durations that must not jump (backoff, deadlines, leases) use
``time.monotonic`` in the runtime instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "FakeClock", "utc_now"]

Clock = Callable[[], datetime]
"""Returns the current time as an aware datetime."""


def utc_now() -> datetime:
    """The wall clock in UTC, the default ``Clock``."""
    return datetime.now(UTC)


class FakeClock:
    """A ``Clock`` that stands still until a test moves it."""

    def __init__(self, now: datetime | None = None) -> None:
        self._lock = threading.Lock()
        self._now = _aware(now) if now is not None else utc_now()
        self._origin = self._now
        self.slept: list[float] = []
        """The seconds of each ``sleep`` call, in order."""

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    @property
    def now(self) -> datetime:
        """The time the clock shows."""
        return self()

    def set(self, moment: datetime) -> None:
        """Show ``moment`` from now on (it must be timezone-aware)."""
        with self._lock:
            self._now = _aware(moment)

    def advance(self, delta: timedelta | float) -> None:
        """Move the clock forward by ``delta`` (a timedelta, or seconds)."""
        step = delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        with self._lock:
            self._now += step

    def sleep(self, seconds: float) -> None:
        """Advance by ``seconds`` at once, as ``time.sleep`` would have taken that long."""
        with self._lock:
            self.slept.append(seconds)
            self._now += timedelta(seconds=seconds)

    def monotonic(self) -> float:
        """Seconds since the clock was made (small numbers keep float sums exact)."""
        with self._lock:
            return (self._now - self._origin).total_seconds()


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"FakeClock needs a timezone-aware datetime, got {moment!r}")
    return moment
