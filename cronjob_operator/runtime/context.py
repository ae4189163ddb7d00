"""One cancellation and deadline model: a stop ``Event`` plus an optional monotonic deadline.

Go passes a ``context.Context`` down every call; here a ``Context`` is the same two
facts, a ``threading.Event`` that says "stop" and an optional deadline on
``time.monotonic``. The manager hands each Runnable its stop Event. Code that runs on
behalf of someone with a deadline (a reconcile with a timeout, a leader renewing its
Lease) enters ``scope(ctx)``; every REST call made on that thread then honours it: no
new attempt starts once the context is done, the read timeout of an attempt never
outlasts the deadline, and retries stop at it (the call raises
``errors.DeadlineExceeded``).
Outside any scope, ``current()`` is ``BACKGROUND``: never done, as Go's
``context.Background()``.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from cronjob_operator.runtime.errors import DeadlineExceeded

__all__ = ["BACKGROUND", "Context", "current", "scope"]


@dataclass(frozen=True, slots=True)
class Context:
    """A stop signal and an optional deadline (``time.monotonic()`` seconds)."""

    stop: threading.Event = field(default_factory=threading.Event)
    deadline: float | None = None

    def remaining(self) -> float | None:
        """Seconds left until the deadline (never negative); None when there is none."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def done(self) -> bool:
        """True once stopped or past the deadline."""
        return self.stop.is_set() or self.remaining() == 0.0

    def wait(self, seconds: float | None = None) -> bool:
        """Sleep up to ``seconds`` (bounded by the deadline), waking early on stop; True if done."""
        remaining = self.remaining()
        if remaining is not None:
            seconds = remaining if seconds is None else min(seconds, remaining)
        self.stop.wait(seconds)
        return self.done()

    def with_timeout(self, seconds: float) -> Context:
        """The same stop signal, with a deadline ``seconds`` from now (or the earlier one)."""
        deadline = time.monotonic() + seconds
        if self.deadline is not None:
            deadline = min(deadline, self.deadline)
        return Context(self.stop, deadline)

    def check(self, what: str) -> None:
        """Raise ``DeadlineExceeded`` naming ``what`` when the context is done."""
        if self.stop.is_set():
            raise DeadlineExceeded(f"{what}: stopped")
        if self.remaining() == 0.0:
            raise DeadlineExceeded(f"{what}: deadline exceeded")


BACKGROUND = Context()
"""The context of code outside any scope: never stopped, no deadline."""

_current: contextvars.ContextVar[Context] = contextvars.ContextVar("runtime_context")


def current() -> Context:
    """The context of the calling thread's innermost ``scope``, else ``BACKGROUND``."""
    return _current.get(BACKGROUND)


@contextlib.contextmanager
def scope(ctx: Context) -> Iterator[Context]:
    """Make ``ctx`` the current context for the calls made inside the block."""
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)
