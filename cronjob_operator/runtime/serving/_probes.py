"""The manager's small HTTP servers: health probes and Prometheus metrics.

``/healthz`` and ``/readyz`` run named checks (a check returns None when fine, or a
reason); ``/readyz/<name>`` runs one; ``?verbose`` lists every check, as the API
server's own endpoints do. ``/metrics`` serves one registry (the manager's) in the
Prometheus text format. A server is a manager Runnable (``run(stop)``) that does not
need the lease: followers answer probes too. Addresses use controller-runtime's flag
syntax: ``":8081"`` binds every interface, ``"127.0.0.1:0"`` picks a free port (read it
back from ``port``), ``"0"`` or ``""`` disables the server. Every server is a
``httpserver.HardenedServer`` (connection cap, size limits, per-phase deadlines); the
metrics server may add TLS and an ``Authorize`` check (``metrics_auth``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from cronjob_operator.runtime.metrics import DEFAULT
from cronjob_operator.runtime.serving._httpserver import (
    HardenedHandler,
    HardenedServer,
    Limits,
    TLSContext,
)

log = logging.getLogger(__name__)

Check = Callable[[], str | None]
"""A named health or readiness check: None when healthy, else why not."""


class Refusal(NamedTuple):
    """Why a request is not served: its status, the reason in the body, and for a request
    shed under load the seconds after which to try again (sent as ``Retry-After``)."""

    status: int
    reason: str
    retry_after: int | None = None


Authorize = Callable[[str | None, str, str, str], Refusal | None]
"""(Authorization header, verb, path, client address) -> None to serve, or the refusal."""


def parse_address(address: str) -> tuple[str, int] | None:
    """``":8081"`` -> ("0.0.0.0", 8081); ``"0"`` or ``""`` -> None (disabled)."""
    if address in {"", "0"}:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"bind address {address!r} must look like ':8081' or '127.0.0.1:8081'")
    return (host or "0.0.0.0", int(port))


def _check_response(checks: Mapping[str, Check], path: str, verbose: bool) -> tuple[int, str]:
    group, _, only = path.strip("/").partition("/")
    selected = {name: check for name, check in checks.items() if not only or name == only}
    if only and not selected:
        return 404, f"no check named {only!r} in /{group}\n"
    lines, healthy = [], True
    for name, check in selected.items():
        try:
            problem = check()
        except Exception as exc:  # a failing check is an unhealthy check
            problem = f"check raised {exc!r}"
        healthy &= problem is None
        lines.append(f"[+]{name} ok" if problem is None else f"[-]{name} failed: {problem}")
    status = 200 if healthy else 500
    if verbose or not healthy:
        return status, "\n".join(
            [*lines, f"{group} check {'passed' if healthy else 'failed'}"]
        ) + "\n"
    return status, "ok"


class HttpServer:
    """Serves probes and/or metrics on one address, on a daemon thread."""

    needs_leader_election = False

    def __init__(
        self,
        address: tuple[str, int],
        *,
        health: Mapping[str, Check] | None = None,
        ready: Mapping[str, Check] | None = None,
        serve_metrics: bool = False,
        registry: CollectorRegistry | None = None,
        tls: TLSContext | None = None,
        authorize: Authorize | None = None,
        limits: Limits | None = None,
    ) -> None:
        served = registry if registry is not None else DEFAULT.registry
        self.scheme = "http" if tls is None else "https"
        routes: dict[str, Mapping[str, Check]] = {}
        if health is not None:
            routes["healthz"] = health
        if ready is not None:
            routes["readyz"] = ready

        class Handler(HardenedHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                url = urlsplit(self.path)
                if authorize is not None:
                    refusal = authorize(
                        self.headers.get("Authorization"), "get", url.path, self.source
                    )
                    if refusal is not None:
                        self._refuse(refusal)
                        return
                group = url.path.strip("/").partition("/")[0]
                if serve_metrics and url.path == "/metrics":
                    self._reply(200, generate_latest(served), CONTENT_TYPE_LATEST)
                elif group in routes:
                    status, body = _check_response(routes[group], url.path, "verbose" in url.query)
                    self._reply(status, body.encode(), "text/plain; charset=utf-8")
                else:
                    self._reply(404, b"not found\n", "text/plain; charset=utf-8")

            def _refuse(self, refusal: Refusal) -> None:
                headers = {}
                if refusal.retry_after is not None:
                    headers["Retry-After"] = str(refusal.retry_after)
                body = f"{refusal.reason}\n".encode()
                self._reply(refusal.status, body, "text/plain", headers)

            def _reply(
                self,
                status: int,
                body: bytes,
                content_type: str,
                headers: Mapping[str, str] | None = None,
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("http: " + format, *args)

        self._server = HardenedServer(address, Handler, limits=limits or Limits(), tls=tls)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"http-{address[1]}", daemon=True
        )

    @property
    def port(self) -> int:
        """The bound port (useful when the address asked for port 0)."""
        return self._server.port

    def start(self) -> None:
        """Serve on a daemon thread; returns at once."""
        self._thread.start()

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set, then close the socket (the Runnable entry point)."""
        self.start()
        log.info("serving %s", self.scheme, extra={"port": self.port})
        stop.wait()
        self.stop()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
