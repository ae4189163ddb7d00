"""Typed API errors, so callers branch on the kind of failure, not on status codes.

Every non-2xx answer of the API server becomes an ``ApiError`` subclass carrying the
``Status`` object the server sent. Connection failures and timeouts become
``TransportError``. ``is_transient`` is the one place that says what may be retried:
connection errors, timeouts, 429 and 5xx; never another 4xx. ``has_status_cause`` reads
the causes in a Status's details (apimachinery's ``errors.HasStatusCause``), e.g.
``NAMESPACE_TERMINATING_CAUSE`` on a create refused because the namespace is being
deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "NAMESPACE_TERMINATING_CAUSE",
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "DeadlineExceeded",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "api_error",
    "has_status_cause",
    "is_transient",
]


class ApiError(Exception):
    """The API server answered with an error ``Status``."""

    code: int = 0

    def __init__(
        self, status: Mapping[str, Any], *, code: int, retry_after: float | None = None
    ) -> None:
        self.status = dict(status)
        self.code = code
        self.reason = str(status.get("reason") or "")
        self.message = str(status.get("message") or f"HTTP {code}")
        self.retry_after = retry_after
        super().__init__(f"{self.message} (HTTP {code}{', ' + self.reason if self.reason else ''})")


class BadRequest(ApiError):
    """400: the request itself is malformed."""


class Unauthorized(ApiError):
    """401: the credentials were not accepted."""


class Forbidden(ApiError):
    """403: authenticated, but RBAC (or admission) does not allow it."""


class NotFound(ApiError):
    """404: the object (or the resource type) does not exist."""


class Conflict(ApiError):
    """409 with reason Conflict: the resourceVersion was stale."""


class AlreadyExists(ApiError):
    """409 with reason AlreadyExists: a create hit an existing name."""


class Gone(ApiError):
    """410: the resourceVersion is too old (compacted); relist."""


class Invalid(ApiError):
    """422: the object failed validation; ``causes`` names the fields."""

    @property
    def causes(self) -> list[dict[str, Any]]:
        return list((self.status.get("details") or {}).get("causes") or [])


class TooManyRequests(ApiError):
    """429: throttled; ``retry_after`` says when to try again."""


class ServerError(ApiError):
    """5xx: the server failed; usually transient."""


class TransportError(Exception):
    """The request never got an answer: connection refused or reset, or a timeout."""


class DeadlineExceeded(TransportError):
    """The caller's context was stopped or its deadline passed (never retried)."""


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def api_error(
    code: int, status: Mapping[str, Any] | None, retry_after: float | None = None
) -> ApiError:
    """Build the typed error for an HTTP ``code`` and the ``Status`` body (if any)."""
    body: Mapping[str, Any] = status or {}
    if code == 409:
        cls: type[ApiError] = AlreadyExists if body.get("reason") == "AlreadyExists" else Conflict
    elif code >= 500:
        cls = ServerError
    else:
        cls = _BY_CODE.get(code, ApiError)
    return cls(body, code=code, retry_after=retry_after)


def is_transient(error: BaseException) -> bool:
    """True for failures worth retrying: transport errors, 429 and 5xx (not a deadline)."""
    if isinstance(error, DeadlineExceeded):
        return False
    return isinstance(error, TransportError | TooManyRequests | ServerError)


NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"
"""The cause type of a 403 for a create in a namespace being deleted (corev1's
``NamespaceTerminatingCause``)."""


def has_status_cause(error: BaseException, cause_type: str) -> bool:
    """Whether ``error`` is an ``ApiError`` whose Status details list a cause of
    ``cause_type``. A cause's type is its JSON ``reason`` (metav1.StatusCause's ``Type``
    field is serialized under that name)."""
    if not isinstance(error, ApiError):
        return False
    details = error.status.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    return any(
        isinstance(cause, Mapping) and cause.get("reason") == cause_type for cause in causes or ()
    )
