"""The webhook HTTPS server: admission and conversion reviews over TLS, on every replica.

The API server POSTs a JSON review to a path and waits for the JSON answer; each path is a
``Route``, a function from the decoded body to the decoded answer. This module knows
nothing of reviews: it does TLS (a fresh certificate from ``CertWatcher`` for every new
connection, so a rotation needs no restart), HTTP/1.1 and JSON, and turns what goes wrong
into answers instead of crashes:

- not a POST of ``application/json`` to a known path, a body that is not JSON, or one a
  route rejects by raising ``BadRequest``: 4xx with a ``Status`` naming the problem;
  a body nested too deep to handle (``RecursionError`` anywhere): 400;
- a route that raises anything else: 500, logged with its traceback;
- a client that fails the TLS handshake, goes silent, trickles, stalls in its body, or
  sends too much: cut off by ``runtime.serving``'s limits (``LIMITS``), while other
  connections are served (a thread per connection, at most ``LIMITS.max_connections``,
  ``LIMITS.max_connections_per_source`` from one address);
- a body whose decoding would cost more memory than the budget allows: refused before it
  is decoded (``decode_cost``; 413 beyond what one request may take, 503 with
  ``Retry-After`` while other large bodies hold the budget).

Values from the request that an answer or a log repeats are cut to
``runtime.serving.ECHO_LIMIT`` characters.

With ``client_ca``, a route answers only a client that presented a certificate signed by
that CA (401 otherwise; a certificate it did not sign fails the TLS handshake): the API
server presents one to admission webhooks when its AdmissionConfiguration names a
kubeconfig with a client certificate for the webhook's host. It presents none to CRD
conversion webhooks (their client has no kubeconfig), so routes in ``anonymous`` are
served without one.

HTTP/2: ALPN offers only ``http/1.1``. Go clients (the API server) then speak HTTP/1.1,
which is also controller-runtime's default since the HTTP/2 "rapid reset" CVEs; the
standard library has no HTTP/2 server, so there is nothing to enable.

Unlike the controllers, webhooks run on every replica, leader or not: the Service sends
reviews to any ready pod. ``ready`` is the readiness check: a TLS handshake with the
server itself succeeds.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Collection, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any, Final

from cronjob_operator.runtime.runnable import run_between
from cronjob_operator.runtime.serving import (
    CertWatcher,
    HardenedHandler,
    HardenedServer,
    Limits,
    Refused,
    clipped,
    shortened,
)

log = logging.getLogger(__name__)

MAX_BODY_BYTES: Final = 7 * 1024 * 1024
"""The largest review accepted. The API server refuses requests over 3 MiB and an object
over ~1.5 MiB (etcd's limit), so the largest AdmissionReview it sends (an UPDATE: the
object and the old one, JSON-escaped) stays near 6 MiB; a ConversionReview of a list
larger than this is a list read without paging (``kubectl`` pages by 500)."""

DECODE_COST_PER_TOKEN: Final = 80
"""Bytes that decoding costs per ``{``, ``[``, ``,`` or ``:`` of a body, at most: each
marks at most one new dict, list, entry or value (measured on CPython 3.11: a dict of
one entry 64 bytes per token, ``{}`` 36, a number 36, a CJK string 86 with its payload)."""

DECODE_COST_PER_BYTE: Final = 2
"""Bytes that decoding costs per body byte beyond the tokens (string payloads, the body
itself while it is decoded)."""

LIMITS: Final = Limits(
    max_connections=128,
    idle_timeout=90.0,  # the API server's idle connections live 90 s
    read_header_timeout=10.0,
    max_body_bytes=MAX_BODY_BYTES,
    read_timeout=10.0,  # the API server's timeoutSeconds default; it waits no longer
    write_timeout=30.0,
    body_budget_bytes=64 * 1024 * 1024,  # a quarter of the manifest's 256 MiB
    budget_wait=3.0,  # a review waits this long for a busy budget, well within 10 s
)
"""Per-connection bounds (see ``runtime.serving``); at most 128 threads for webhooks."""


def decode_cost(raw: bytes) -> int:
    """An upper bound of the memory ``json.loads(raw)`` takes (counted in C, no decoding)."""
    tokens = sum(raw.count(token) for token in (b"{", b"[", b",", b":"))
    return DECODE_COST_PER_TOKEN * tokens + DECODE_COST_PER_BYTE * len(raw)


Route = Callable[[Any], Any]
"""Answers one decoded JSON body with a JSON-serialisable answer; raises ``BadRequest``."""


class BadRequest(ValueError):
    """The body is not a request the route can answer (the client gets a 400)."""


def _status(code: HTTPStatus, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": code.phrase.replace(" ", ""),
        "code": int(code),
    }


def _handler_class(
    routes: Mapping[str, Route], authenticated: Collection[str]
) -> type[HardenedHandler]:
    """The handler serving ``routes``; those in ``authenticated`` need a verified client
    certificate (the TLS context verifies one that is shown)."""

    class _Handler(HardenedHandler):
        server_version = "cronjob-operator-webhook"

        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            code, answer, retry_after = self._answer()
            body = json.dumps(answer).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            if retry_after is not None:
                self.send_header("Retry-After", str(retry_after))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _answer(self) -> tuple[HTTPStatus, Any, int | None]:
            """The status, the answer and the ``Retry-After`` seconds (None: no header)."""
            path, path_only = shortened(self.path), self.path.partition("?")[0]
            try:
                route = routes.get(path_only)
                if route is None:
                    raise Refused(
                        HTTPStatus.NOT_FOUND, f"no webhook at {path}; serving {sorted(routes)}"
                    )
                if path_only in authenticated and not self._client_certified():
                    raise Refused(
                        HTTPStatus.UNAUTHORIZED,
                        f"the webhook at {path} serves only clients with a certificate signed "
                        "by its client CA (--webhook-client-ca): the API server's "
                        "AdmissionConfiguration kubeconfig",
                    )
                body = self._body()
                return HTTPStatus.OK, route(body), None
            except Refused as refusal:
                self.close_connection = True  # its body may be unread: no next request
                return refusal.code, _status(refusal.code, str(refusal)), refusal.retry_after
            except RecursionError:
                problem = "the request is nested too deeply to handle; send a real review"
                log.warning("bad webhook request to %s: %s", path, problem)
                return HTTPStatus.BAD_REQUEST, _status(HTTPStatus.BAD_REQUEST, problem), None
            except BadRequest as exc:
                log.warning("bad webhook request to %s: %s", path, exc)
                return HTTPStatus.BAD_REQUEST, _status(HTTPStatus.BAD_REQUEST, str(exc)), None
            except TimeoutError:
                raise  # the client is too slow: the connection is closed, without an answer
            except Exception:
                log.exception("webhook %s failed", path)
                return (
                    HTTPStatus.INTERNAL_SERVER_ERROR,
                    _status(HTTPStatus.INTERNAL_SERVER_ERROR, f"the webhook at {path} failed"),
                    None,
                )

        def _body(self) -> Any:
            """The decoded JSON body; raises ``Refused`` for anything else."""
            content_type = self.headers.get("Content-Type", "").partition(";")[0].strip()
            if content_type != "application/json":
                given = clipped(content_type or "unset")
                raise Refused(
                    HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                    f"Content-Type must be application/json, not {given}",
                )
            raw = self.read_body()
            if not raw:
                raise Refused(HTTPStatus.BAD_REQUEST, "the body is empty; send a review")
            self.reserve(decode_cost(raw))  # before a byte is decoded
            try:
                return json.loads(raw)
            except ValueError as exc:  # UnicodeDecodeError too; deep nesting: see _answer
                raise Refused(
                    HTTPStatus.BAD_REQUEST, f"the body is not JSON: {shortened(str(exc))}"
                ) from None

        def _client_certified(self) -> bool:
            """Whether the client showed a certificate (verified by the TLS context)."""
            connection = self.connection
            return isinstance(connection, ssl.SSLSocket) and bool(connection.getpeercert())

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            self.send_error(HTTPStatus.METHOD_NOT_ALLOWED, "webhooks take POST")

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("webhook http: " + format, *args)

    return _Handler


class WebhookServer:
    """Serves ``routes`` over HTTPS on ``address``, on daemon threads."""

    def __init__(
        self,
        address: tuple[str, int],
        cert_dir: Path,
        routes: Mapping[str, Route],
        *,
        limits: Limits = LIMITS,
        cert_advice: str = "",
        client_ca: Path | None = None,
        anonymous: Collection[str] = (),
    ) -> None:
        """Binds at once (raises ``OSError`` if the port is taken); serves from ``start``.
        ``cert_advice`` is what the readiness problem says to do while no certificate has
        loaded (the application's flags and scripts); with ``client_ca`` only clients with
        a certificate signed by it are served, except on the paths in ``anonymous``."""
        self.certs = CertWatcher(cert_dir, advice=cert_advice, client_ca=client_ca)
        self._server = HardenedServer(
            address,
            _handler_class(dict(routes), set(routes) - set(anonymous) if client_ca else set()),
            limits=limits,
            tls=self.certs.context,
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"webhook-{self.port}", daemon=True
        )

    @property
    def port(self) -> int:
        """The bound port (useful when the address asked for port 0)."""
        return self._server.port

    def connections(self) -> tuple[int, int]:
        """(connections open, of which evictable: waiting for their client)."""
        return self._server.open_connections()

    def budget_held(self) -> int:
        """Bytes of the body budget that requests hold now (see ``LIMITS``)."""
        return self._server.budget.held()

    needs_leader_election = False
    """A manager Runnable on every replica: admission and conversion never wait for a leader."""

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set, then close the socket (the manager's Runnable entry)."""
        run_between(stop, self.start, self.stop)

    def start(self) -> None:
        """Start serving on a daemon thread; returns at once. Loads the certificate first,
        so that a missing one is logged at startup rather than at the first request."""
        self.certs.context()
        self._thread.start()

    def drain(self) -> None:
        """Answer each request with ``Connection: close`` from now on: a client reusing a
        kept-alive connection dials again, and reaches a replica that is not stopping."""
        self._server.draining.set()

    def stop(self) -> None:
        """Stop accepting, close the socket; open connections end with their threads."""
        if self._thread.is_alive():
            self._server.shutdown()  # blocks until serve_forever returns (at most 0.5 s)
        self._server.server_close()

    def ready(self) -> str | None:
        """The readiness check: None once a TLS handshake with this server succeeds."""
        if not self._thread.is_alive():
            return "the webhook server is not running"
        host = str(self._server.server_address[0])
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # checks that it serves, not who it is
        try:
            with (
                socket.create_connection((host, self.port), timeout=2) as raw,
                context.wrap_socket(raw),
            ):
                return None
        except OSError as exc:
            return f"no TLS handshake on port {self.port}: {self.certs.problem or exc}"
