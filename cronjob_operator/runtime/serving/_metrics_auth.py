"""Authentication and authorization of metrics requests by the API server, with a cache.

What controller-runtime's ``filters.WithAuthenticationAndAuthorization`` does for a
kubebuilder v4 project: the caller's bearer token goes to a TokenReview (who is it?),
the answer to a SubjectAccessReview (may this user ``get`` the non-resource URL
``/metrics``?). No or a bad token: 401; a valid token without the permission: 403; the
API server failing to answer: 500 (never a silent allow). The manager needs ``create``
on ``tokenreviews`` and ``subjectaccessreviews`` (config/rbac/metrics_auth_role.yaml); a
scraper binds to ``metrics-reader`` (config/rbac/metrics_reader_role.yaml).

Decisions are cached as controller-runtime caches them (token 1 min, allow 5 min, deny
30 s), in LRU caches of bounded size, so a scrape every 15 s costs no review and a flood
of random tokens cannot grow memory. Tokens are kept only as SHA-256 digests. The clock
is injected, so the expiry is tested without waiting.
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
from cronjob_operator.runtime.client import RestClient

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


class _TTLCache(Generic[_K, _V]):
    """A thread-safe LRU map whose entries also expire."""

    def __init__(self, max_entries: int, clock: Callable[[], float]) -> None:
        self._entries: OrderedDict[_K, tuple[float, _V]] = OrderedDict()
        self._max = max_entries
        self._clock = clock
        self._lock = threading.Lock()

    def get(self, key: _K) -> tuple[bool, _V | None]:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return False, None
            if entry[0] <= self._clock():
                del self._entries[key]
                return False, None
            self._entries.move_to_end(key)
            return True, entry[1]

    def put(self, key: _K, value: _V, ttl: float) -> None:
        with self._lock:
            self._entries[key] = (self._clock() + ttl, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class MetricsAuthorizer:
    """Decides one request: ``check`` returns None to serve it, else (status, reason)."""

    def __init__(
        self,
        reviewer: Reviewer,
        *,
        settings: CacheSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reviewer = reviewer
        self._settings = settings or CacheSettings()
        self._users: _TTLCache[bytes, User | None] = _TTLCache(self._settings.max_entries, clock)
        self._decisions: _TTLCache[tuple[User, str, str], tuple[bool, str]] = _TTLCache(
            self._settings.max_entries, clock
        )

    def check(self, authorization: str | None, verb: str, path: str) -> tuple[int, str] | None:
        """Never raises: a failed review is a 500 with the reason logged."""
        token = _bearer_token(authorization)
        if token is None:
            return HTTPStatus.UNAUTHORIZED, "Unauthorized: a bearer token is required"
        try:
            user = self._user(token)
            if user is None:
                return HTTPStatus.UNAUTHORIZED, "Unauthorized: the token was not accepted"
            allowed, reason = self._decision(user, verb, path)
        except (errors.ApiError, errors.TransportError) as exc:
            log.error("cannot review a metrics request: %s", exc)
            return HTTPStatus.INTERNAL_SERVER_ERROR, "Authentication or authorization failed"
        if not allowed:
            log.debug("metrics request by %s denied: %s", user.name, reason)
            return HTTPStatus.FORBIDDEN, f"Authorization denied for user {user.name}"
        return None

    def _user(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).digest()
        hit, user = self._users.get(key)
        if not hit:
            user = self._reviewer.authenticate(token)
            self._users.put(key, user, self._settings.token_ttl)
        return user

    def _decision(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        key = (user, verb, path)
        hit, decision = self._decisions.get(key)
        if not hit or decision is None:
            decision = self._reviewer.authorize(user, verb, path)
            ttl = self._settings.allow_ttl if decision[0] else self._settings.deny_ttl
            self._decisions.put(key, decision, ttl)
        return decision


def _bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token
