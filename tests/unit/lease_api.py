"""An in-memory API server for Leases, plugged in as a ``RestClient``'s connection pool.

Unit tests of the elector and of the manager's lost-Lease path need a Lease that can be
created, renewed with optimistic concurrency, and taken by another holder at a moment
the test chooses; everything else is answered ``201``/``200`` with the body sent back,
and every request is recorded, so a test can say what reached the "server".
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson
from kubernetes import client as k8s_client

from cronjob_operator.runtime.client import RestClient, RetryPolicy


@dataclass
class Response:
    status: int
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)


class LeaseApi:
    """Leases in memory; ``requests`` lists (method, path, user agent) of every request."""

    def __init__(self, *, on_lease_write: Callable[[], None] | None = None) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str]] = []
        self.on_lease_write = on_lease_write
        self._version = 0
        self._lock = threading.Lock()

    def client(self) -> RestClient:
        """A ``RestClient`` whose requests this API answers."""
        rest = RestClient(
            k8s_client.Configuration(host="http://127.0.0.1:1"),
            retry=RetryPolicy(max_retries=0),
            user_agent="unit-test",
        )
        rest._pool = self  # type: ignore[assignment]
        return rest

    def writes(self, *, leases: bool = False) -> list[tuple[str, str]]:
        """The (method, path) of every write received; Lease writes only with ``leases``."""
        with self._lock:
            return [
                (method, path)
                for method, path, _ in self.requests
                if method != "GET" and (leases or "/leases" not in path)
            ]

    def take(self, name: str, holder: str) -> None:
        """Another candidate takes Lease ``name`` (a new holder and a new renewTime)."""
        with self._lock:
            lease = self.leases[name]
            self._version += 1
            lease["metadata"]["resourceVersion"] = str(self._version)
            lease["spec"] = {**lease["spec"], "holderIdentity": holder, "renewTime": "stolen"}

    def holder(self, name: str) -> str | None:
        with self._lock:
            lease = self.leases.get(name)
            return None if lease is None else lease["spec"].get("holderIdentity")

    def request(self, method: str, url: str, **kwargs: Any) -> Response:
        path = urlsplit(url).path
        body = orjson.loads(kwargs["body"]) if kwargs.get("body") else None
        with self._lock:
            self.requests.append((method, path, kwargs["headers"]["User-Agent"]))
            if "/leases" not in path:
                return Response(201 if method == "POST" else 200, kwargs.get("body") or b"{}")
            response = self._lease(method, path, body)
        if method != "GET" and self.on_lease_write is not None:
            self.on_lease_write()
        return response

    def _lease(self, method: str, path: str, body: dict[str, Any] | None) -> Response:
        name = path.rsplit("/", 1)[1]
        if method == "GET":
            if name not in self.leases:
                return Response(404, orjson.dumps({"reason": "NotFound", "code": 404}))
            return Response(200, orjson.dumps(self.leases[name]))
        assert body is not None
        if method == "POST":
            name = body["metadata"]["name"]
            if name in self.leases:
                return Response(409, orjson.dumps({"reason": "AlreadyExists", "code": 409}))
        elif body["metadata"].get("resourceVersion") != self.leases[name]["metadata"].get(
            "resourceVersion"
        ):
            return Response(409, orjson.dumps({"reason": "Conflict", "code": 409}))
        self._version += 1
        body["metadata"]["resourceVersion"] = str(self._version)
        self.leases[name] = body
        return Response(201 if method == "POST" else 200, orjson.dumps(body))
