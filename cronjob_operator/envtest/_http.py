"""Small HTTP calls the harness makes itself: health probes, metrics, etcd's gateway.

The harness talks to the API server with the admin client certificate over urllib (no
client library: this package must not depend on the operator's runtime, and a few GETs
and POSTs do not need one), to the scheduler's health endpoint without verifying its
self-signed certificate, and to etcd's v3 JSON gateway over plain HTTP on 127.0.0.1.
Every call blocks for at most its timeout and raises ``HttpError`` on any failure.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


class HttpError(RuntimeError):
    """A request failed: no connection, a timeout, or a non-2xx status (``status``)."""

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class AdminClient:
    """Requests to the API server as the admin user (client certificate)."""

    def __init__(self, server: str, *, ca_cert: Path, client_cert: Path, client_key: Path) -> None:
        self.server = server
        self._context = ssl.create_default_context(cafile=str(ca_cert))
        self._context.load_cert_chain(str(client_cert), str(client_key))

    def get(self, path: str, *, timeout: float = 5.0) -> bytes:
        return _send(urllib.request.Request(self.server + path), self._context, timeout)

    def get_json(self, path: str, *, timeout: float = 5.0) -> Any:
        return json.loads(self.get(path, timeout=timeout))

    def post_json(self, path: str, body: object, *, timeout: float = 5.0) -> Any:
        request = _json_request(self.server + path, body)
        return json.loads(_send(request, self._context, timeout))


def get(url: str, *, timeout: float = 2.0, verify: bool = True) -> bytes:
    """GET ``url``; ``verify=False`` accepts any certificate (self-signed health ports)."""
    context = None
    if not verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return _send(urllib.request.Request(url), context, timeout)


def post_json(url: str, body: object, *, timeout: float = 5.0) -> Any:
    """POST JSON over plain HTTP and parse the JSON answer."""
    return json.loads(_send(_json_request(url, body), None, timeout))


def _json_request(url: str, body: object) -> urllib.request.Request:
    return urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )


def _send(request: urllib.request.Request, context: ssl.SSLContext | None, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as error:
        text = error.read().decode(errors="replace")
        error.close()
        raise HttpError(
            f"{request.get_method()} {request.full_url}: HTTP {error.code}: {text[:500]}",
            status=error.code,
            body=text,
        ) from None
    except (urllib.error.URLError, OSError) as error:
        raise HttpError(f"{request.get_method()} {request.full_url}: {error}") from None
