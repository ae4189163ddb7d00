"""What a reconciler is: a function of a namespaced name, returning when to look again.

As in controller-runtime: ``Request`` names the object, ``Result`` says whether and when
to requeue, and an exception means "retry with backoff" unless it is a ``TerminalError``,
which is logged and counted but not retried (the next event for the object will bring
it back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Request:
    """The object to reconcile: its namespace ("" when cluster-scoped) and name."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    """``requeue_after`` > 0 reconciles again after that many seconds; 0 means done.

    ``follow_up`` reconciles again as soon as the work queue's timers that came due are
    done (it queues the request like an event does): how a reconciler that did the
    urgent part of its work lets other objects' urgent work go before its own rest.
    """

    requeue_after: float = 0.0
    follow_up: bool = False


class TerminalError(Exception):
    """A failure that retrying cannot fix; the controller logs it and does not requeue."""


class Reconciler(Protocol):
    """Brings the world in line with one object. Must be safe to call repeatedly."""

    def reconcile(self, request: Request) -> Result: ...
