"""Typed API errors, so callers branch on the kind of failure, not on status codes.

Every non-2xx answer of the API server becomes an ``ApiError`` subclass carrying the
``Status`` object the server sent. Connection failures and timeouts become
``TransportError``; a connection that broke mid-request (reset, or closed before a whole
response came) is the subclass ``ConnectionLost``.

Three questions are answered here, once each:

* ``retry_delay(method, error)``: may the REST client send this request again, and after
  how long? client-go's answer for ``Request.Do``/``DoRaw`` (rest/request.go
  ``request()`` with rest/with_retry.go ``IsNextRetry``/``checkWait``), exactly:
  a response is retried, whatever the method, only when the server asked: a 429 or a
  5xx carrying an integer ``Retry-After`` header, after that many seconds. A transport
  error is retried only for a GET and only when the connection was reset or closed
  (``isErrRetryableFunc``: ``net.IsConnectionReset``/``IsProbableEOF``/
  ``IsHTTP2ConnectionLost``), after client-go's artificial ``Retry-After: 1``. "We are
  not automatically retrying write operations, as they are not idempotent": a POST
  whose response was lost may have created its object, and a ``generateName`` create
  sent twice makes two. A timeout is not retried (``IsTimeout`` is only in the watch's
  list), nor a refused connection, nor a 5xx without ``Retry-After``: the caller (a
  controller's rate-limited requeue, the reflector's backoff) owns that policy.
* ``server_asked_retry(error)``: did the server ask for the retry (the first half of
  that table)? The reflector logs such a retry below WARNING until it lasts.
* ``is_transient(error)``: is this a failure of the moment (transport, 429, 5xx) rather
  than an answer about the request? The reflector asks it to tell a busy server from
  one that refuses a streaming list.

``has_status_cause`` reads the causes in a Status's details (apimachinery's
``errors.HasStatusCause``), e.g. ``NAMESPACE_TERMINATING_CAUSE`` on a create refused
because the namespace is being deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

__all__ = [
    "NAMESPACE_TERMINATING_CAUSE",
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "ConnectionLost",
    "DeadlineExceeded",
    "Forbidden",
    "Gone",
    "Invalid",
    "InvalidName",
    "NotFound",
    "NotLeader",
    "ServerError",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "api_error",
    "has_status_cause",
    "is_transient",
    "retry_delay",
    "server_asked_retry",
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


class InvalidName(NotFound):
    """A name no object can have as one path segment (``.``, ``..``; a namespace with
    ``/``), refused by the client before anything is sent: urllib3 would resolve it to
    another path (a LIST of the collection, the namespace itself). A ``NotFound``, as
    no such object can exist, so a caller that handles a missing object handles it."""

    def __init__(self, message: str) -> None:
        super().__init__({"reason": "NotFound", "message": message}, code=404)


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


class ConnectionLost(TransportError):
    """The connection was reset or closed before a whole response came.

    The request may have reached the server (and been carried out): client-go's
    ``IsConnectionReset``/``IsProbableEOF`` cases, retried for GET only.
    """


class DeadlineExceeded(TransportError):
    """The caller's context was stopped or its deadline passed (never retried)."""


class NotLeader(DeadlineExceeded):
    """A write made for the leader was refused before it was sent: this process does not
    hold the Lease, or may no longer (see ``LeaderElector.write_refusal``). Never retried."""


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


LOST_CONNECTION_RETRY_AFTER = 1.0
"""client-go's wait before retrying a GET whose connection broke (``retryAfterResponse``)."""


def server_asked_retry(error: BaseException) -> TypeGuard[ApiError]:
    """Whether the API server asked to be asked again: a 429 or a 5xx with ``Retry-After``
    (an answer of the moment, such as a just-created CRD's storage still starting)."""
    return isinstance(error, TooManyRequests | ServerError) and error.retry_after is not None


def retry_delay(method: str, error: BaseException) -> float | None:
    """Seconds to wait before sending ``method`` again after ``error``; None: never (module doc)."""
    if server_asked_retry(error):
        return error.retry_after
    if isinstance(error, ConnectionLost) and method == "GET":
        return LOST_CONNECTION_RETRY_AFTER
    return None


def is_transient(error: BaseException) -> bool:
    """True for failures of the moment: transport errors, 429 and 5xx (not a deadline)."""
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
