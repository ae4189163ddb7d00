"""Polling with a deadline: the one way tests and the harness wait for the cluster.

Everything a test observes in a real control plane happens asynchronously (a Job
controller syncs, kwok moves a pod on, a namespace finishes deleting), so tests must
poll for the state they expect instead of sleeping for a guessed time. ``wait_for``
calls a predicate until it returns something truthy and returns that value, or raises
``WaitTimeout`` (a ``TimeoutError``) naming what it waited for and the last value seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["WaitTimeout", "wait_for"]

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """The predicate did not become truthy before the deadline."""


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    *,
    interval: float = 0.1,
    message: str | None = None,
    ignore: tuple[type[Exception], ...] = (),
    detail: Callable[[], object] | None = None,
) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns a truthy value.

    Blocks for at most ``timeout`` seconds (the predicate is always called at least once,
    and once more at the deadline). Returns the first truthy value. Exceptions of the
    types in ``ignore`` count as "not yet"; any other exception propagates at once.
    Raises ``WaitTimeout`` with ``message`` (or the predicate's name), the last value and
    the last ignored exception when the deadline passes, followed by what ``detail()``
    says then (the state the predicate looked at, so a timeout says why).
    """
    deadline = time.monotonic() + timeout
    last_value: object = None
    last_error: Exception | None = None
    while True:
        try:
            value = predicate()
        except ignore as error:
            last_error = error
        else:
            if value:
                return value
            last_value = value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(interval, remaining))
    what = message or getattr(predicate, "__name__", repr(predicate))
    last = f"last value {last_value!r}"
    if last_error is not None:
        last += f", last error {last_error!r}"
    said = f"; {detail()}" if detail is not None else ""
    raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what} ({last}){said}")
