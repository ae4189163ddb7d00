"""Authentication and authorization of metrics requests by the API server, with a cache.

What controller-runtime's ``filters.WithAuthenticationAndAuthorization`` does for a
kubebuilder v4 project: the caller's bearer token goes to a TokenReview (who is it?),
the answer to a SubjectAccessReview (may this user ``get`` the non-resource URL
``/metrics``?). No or a bad token: 401; a valid token without the permission: 403; the
API server failing to answer: 500 (never a silent allow). The manager needs ``create``
on ``tokenreviews`` and ``subjectaccessreviews`` (config/rbac/metrics_auth_role.yaml); a
scraper binds to ``metrics-reader`` (config/rbac/metrics_reader_role.yaml).

Decisions are cached as controller-runtime caches them (token 1 min, accepted or not, as
the API server's delegating authenticator; allow 5 min, deny 30 s), in LRU caches of
bounded size, so a scrape every 15 s costs no review and a flood of random tokens cannot
grow memory. Rejected tokens have a cache of their own, so such a flood cannot evict a
scraper's accepted token either. Tokens are kept only as SHA-256 digests. The clock is
injected, so the expiry is tested without waiting.

What reviews may cost is bounded (``ReviewLimits``), so that load on /metrics is shed,
not passed on to the API server or to the controllers: the manager gives the reviewer a
REST client of its own (``RestClient.for_component``) with its own token bucket, so
reviews never take the controllers' tokens; at most 8 reviews are in flight, at most 2
for one client address. A request that needs a review beyond that is answered 429 with
``Retry-After`` at once (counted in ``metrics_auth_requests_shed_total``), while
requests whose token and decision are cached are served as always.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Generic, Protocol, TypeVar

from cronjob_operator.runtime import errors
from cronjob_operator.runtime.client import RestClient, TokenBucket
from cronjob_operator.runtime.metrics import DEFAULT, Metrics
from cronjob_operator.runtime.serving._probes import Refusal

log = logging.getLogger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
REVIEW_TIMEOUT = 10.0  # controller-runtime's TokenAccessReviewTimeout

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class User:
    """Who a token belongs to, as the TokenReview said."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class Reviewer(Protocol):
    """Asks the API server; raises on failure (the request then gets a 500)."""

    def authenticate(self, token: str) -> User | None: ...

    def authorize(self, user: User, verb: str, path: str) -> tuple[bool, str]: ...


class ApiReviewer:
    """A ``Reviewer`` that creates TokenReviews and SubjectAccessReviews."""

    def __init__(self, rest: RestClient) -> None:
        self._rest = rest

    def authenticate(self, token: str) -> User | None:
        review = self._rest.request(
            "POST",
            TOKEN_REVIEWS,
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                  "spec": {"token": token}},
            timeout=REVIEW_TIMEOUT,
        )  # fmt: skip
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        return User(
            name=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            groups=tuple(user.get("groups") or ()),
            extra=tuple(sorted((key, tuple(values)) for key, values in extra.items())),
        )

    def authorize(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        review = self._rest.request(
            "POST",
            SUBJECT_ACCESS_REVIEWS,
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": _access_spec(user, verb, path),
            },
            timeout=REVIEW_TIMEOUT,
        )
        status = review.get("status") or {}
        return bool(status.get("allowed")), str(status.get("reason", ""))


def _access_spec(user: User, verb: str, path: str) -> dict[str, Any]:
    return {
        "user": user.name,
        "uid": user.uid,
        "groups": list(user.groups),
        "extra": {key: list(values) for key, values in user.extra},
        "nonResourceAttributes": {"path": path, "verb": verb},
    }


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """Cache lifetimes (controller-runtime's) and the size bound of each cache."""

    token_ttl: float = 60.0
    allow_ttl: float = 300.0
    deny_ttl: float = 30.0
    max_entries: int = 1024


@dataclass(frozen=True, slots=True)
class ReviewLimits:
    """What reviewing the tokens of /metrics requests may cost (docs/security.md says why)."""

    qps: float = 5.0
    """TokenReviews and SubjectAccessReviews per second, on the reviewer's own bucket."""
    burst: int = 10
    """Reviews that may go at once above ``qps``."""
    in_flight: int = 8
    """Reviews waiting or running at once; a request that needs one more is shed."""
    in_flight_per_source: int = 2
    """Of those, at most this many for one client address."""
    retry_after: int = 1
    """The ``Retry-After`` seconds of a shed request."""

    def bucket(self) -> TokenBucket:
        """A full token bucket of ``qps`` and ``burst`` for the reviewer's client."""
        return TokenBucket(self.qps, self.burst)


class _ReviewSlots:
    """Counts reviews in flight, overall and per client address; never blocks."""

    def __init__(self, limits: ReviewLimits) -> None:
        self._limits = limits
        self._total = 0
        self._by_source: dict[str, int] = {}
        self._lock = threading.Lock()

    def try_take(self, source: str) -> bool:
        """Take a slot for ``source``: False when every slot, or its share, is taken."""
        with self._lock:
            held = self._by_source.get(source, 0)
            if self._total >= self._limits.in_flight or held >= self._limits.in_flight_per_source:
                return False
            self._total += 1
            self._by_source[source] = held + 1
            return True

    def give_back(self, source: str) -> None:
        """Return a slot ``try_take`` gave ``source``."""
        with self._lock:
            self._total -= 1
            held = self._by_source.pop(source) - 1
            if held:
                self._by_source[source] = held


class _TTLCache(Generic[_K, _V]):
    """A thread-safe LRU map whose entries also expire."""

    def __init__(self, max_entries: int, clock: Callable[[], float]) -> None:
        self._entries: OrderedDict[_K, tuple[float, _V]] = OrderedDict()
        self._max = max_entries
        self._clock = clock
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        """The unexpired value for ``key``, else None (no value stored is None)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= self._clock():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: _K, value: _V, ttl: float) -> None:
        with self._lock:
            self._entries[key] = (self._clock() + ttl, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


NO_TOKEN = Refusal(HTTPStatus.UNAUTHORIZED, "Unauthorized: a bearer token is required")
TOKEN_REJECTED = Refusal(HTTPStatus.UNAUTHORIZED, "Unauthorized: the token was not accepted")
REVIEW_FAILED = Refusal(HTTPStatus.INTERNAL_SERVER_ERROR, "Authentication or authorization failed")


class MetricsAuthorizer:
    """Decides one request: ``check`` returns None to serve it, else the ``Refusal``."""

    def __init__(
        self,
        reviewer: Reviewer,
        *,
        settings: CacheSettings | None = None,
        limits: ReviewLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        metrics: Metrics | None = None,
    ) -> None:
        self._reviewer = reviewer
        self._shed_total = (metrics or DEFAULT).metrics_auth_shed
        self._settings = settings or CacheSettings()
        self._limits = limits or ReviewLimits()
        self._slots = _ReviewSlots(self._limits)
        size = self._settings.max_entries
        self._users: _TTLCache[bytes, User] = _TTLCache(size, clock)
        self._rejected: _TTLCache[bytes, bool] = _TTLCache(size, clock)
        self._decisions: _TTLCache[tuple[User, str, str], tuple[bool, str]] = _TTLCache(size, clock)

    def check(
        self, authorization: str | None, verb: str, path: str, source: str = ""
    ) -> Refusal | None:
        """Never raises: a failed review is a 500 with the reason logged. ``source`` is
        the client's address, for the per-source bound on reviews."""
        token = _bearer_token(authorization)
        if token is None:
            return NO_TOKEN
        try:
            return self._verdict(hashlib.sha256(token.encode()).digest(), token, verb, path, source)
        except (errors.ApiError, errors.TransportError) as exc:
            log.error("cannot review a metrics request: %s", exc)
            return REVIEW_FAILED

    def _verdict(self, key: bytes, token: str, verb: str, path: str, source: str) -> Refusal | None:
        if self._rejected.get(key):
            return TOKEN_REJECTED
        user = self._users.get(key)
        decision = None if user is None else self._decisions.get((user, verb, path))
        if user is None or decision is None:  # a review is due, within the bound in flight
            if not self._slots.try_take(source):
                return self._shed(source)
            try:
                if user is None:
                    user = self._authenticate(key, token)
                    if user is None:
                        return TOKEN_REJECTED
                    decision = self._decisions.get((user, verb, path))
                decision = decision or self._authorize(user, verb, path)
            finally:
                self._slots.give_back(source)
        allowed, reason = decision
        if not allowed:
            log.debug("metrics request by %s denied: %s", user.name, reason)
            return Refusal(HTTPStatus.FORBIDDEN, f"Authorization denied for user {user.name}")
        return None

    def _shed(self, source: str) -> Refusal:
        log.debug("metrics request from %s shed: reviews in flight at their bound", source)
        self._shed_total.inc()
        return Refusal(
            HTTPStatus.TOO_MANY_REQUESTS,
            "Too many requests: tokens are being reviewed; retry later",
            self._limits.retry_after,
        )

    def _authenticate(self, key: bytes, token: str) -> User | None:
        user = self._reviewer.authenticate(token)
        if user is None:
            self._rejected.put(key, True, self._settings.token_ttl)
        else:
            self._users.put(key, user, self._settings.token_ttl)
        return user

    def _authorize(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        decision = self._reviewer.authorize(user, verb, path)
        ttl = self._settings.allow_ttl if decision[0] else self._settings.deny_ttl
        self._decisions.put((user, verb, path), decision, ttl)
        return decision


def _bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token
