"""The HTTP transport to the API server: JSON in, JSON out, typed errors, client-go's retries.

The official ``kubernetes`` package gives us configuration (kubeconfig, in-cluster
service account, exec plugins, client certificates) and builds the urllib3 pool; we
use that and nothing else of it. Bodies are parsed with orjson into plain dicts (``_json``:
at any depth the API server stores, not only orjson's); the
generated model classes are never involved (they cost several times the parse).

``request`` retries exactly where client-go's ``Request.Do`` does (``errors.retry_delay``,
client-go's table, says when, with the upstream references): when the server asks (429,
or 5xx with ``Retry-After``), after the seconds it asked for, any method; and a GET whose
connection broke, after 1 s. Nothing else: not a write whose response was lost (it may have been
carried out, and a ``generateName`` create sent again makes a second object), not a
timeout, not a refused connection, not a 5xx without ``Retry-After``. Those are raised at
once, so a reconcile fails fast and its controller requeues it with the work queue's
rate-limited backoff instead of a worker sitting in a retry loop. At most
``RetryPolicy.max_retries`` (client-go's 10) retries; ``timeout`` bounds the whole call,
retries and their waits included, as client-go's ``Request.Timeout`` does, and so does
the current ``context``: a wait that would end past either is not started, the server's
error is raised instead. ``watch`` opens one streaming request and yields its events; it
never retries, because its caller (the reflector) owns the reconnect policy.

The retry loop is tenacity's (``_retrying``): the table as its retry predicate and its
wait, the retry count and the deadlines above as its stop, a log line before each wait.
The first attempt is sent before tenacity is involved (``_replaying`` hands its error to
the loop as the loop's own first attempt), so a call that needs no retry, or fails with
an error never retried, costs no more CPU than a plain call (``bench/request_cost.py``).

Sockets have TCP keepalive on with client-go's timings (30 s idle, the kernel's probes:
the ``kubernetes`` package's ``keep_alive``), so a watch on a dead connection is found
by the kernel, not by a read timeout that a quiet watch would also hit.

Every request, retries and watches included, may first take a token from a
``TokenBucket`` (``--kube-api-qps`` / ``--kube-api-burst``, as kube-controller-manager and
client-go's ``rest.Config`` QPS/Burst mean them). It is off by default, as in
controller-runtime since 0.21: API Priority and Fairness on the server is the limit, and
its 429 with ``Retry-After`` is honoured by the retries above. Waiting for a token honours
the call's deadline and the current ``context``, as client-go's ``rate.Limiter.Wait(ctx)``:
a token due after the deadline is not waited for (``DeadlineExceeded`` at once), and a
stop ends the wait. ``for_component`` gives a component (the leader elector, the event
recorder) a client with its own bucket of the same rate and the same connection config,
as controller-runtime builds its leader-election client, so a busy controller never
delays a Lease renewal; the metrics authorizer's gets a bucket of its own rate, as the
API server's delegating authenticator has a client of its own.

A client may carry a write fence (``fenced``): a function asked before every POST, PUT,
PATCH and DELETE is sent (after its token, just before the bytes go out) that returns why
the write must not be sent, or None. The manager fences the client it gives controllers
and the event recorder with ``LeaderElector.write_refusal``; a refused write raises
``errors.NotLeader`` and reaches no server. Reads never ask the fence.
"""

from __future__ import annotations

import copy
import functools
import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import orjson
import tenacity
import urllib3

from cronjob_operator.runtime import context, errors
from cronjob_operator.runtime.client import _json
from cronjob_operator.runtime.metrics import DEFAULT, Metrics

if TYPE_CHECKING:
    from kubernetes import client as k8s_client

log = logging.getLogger(__name__)

JSON = "application/json"
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
"""Accept for a watch (or a get) that wants only each object's metadata; the plain JSON
after the comma is what a server that cannot convert answers instead."""
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
"""Accept for a list that wants only the metadata of each item (client-go's metadata client)."""
DEFAULT_USER_AGENT = "cronjob-operator-runtime"
"""Sent when the caller names no user agent; an application passes its own (name/version)."""
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""The methods a write fence is asked about."""

WriteFence = Callable[[], str | None]
"""Why a write must not be sent now (None: send it); see the module doc."""


def load_configuration(
    kubeconfig: str | None = None, *, context: str | None = None
) -> k8s_client.Configuration:
    """Build a fresh client configuration (never the package's global default).

    An explicit kubeconfig path (or kubeconfig ``context``) wins; otherwise the in-cluster
    service account; otherwise the default kubeconfig ($KUBECONFIG or ~/.kube/config), as
    controller-runtime does. ``context`` names a kubeconfig context other than the current one.
    The ``kubernetes`` package (seconds of CPU to import on a busy machine) is loaded here,
    where a kubeconfig is read, so a process that never reads one never pays for it.
    """
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    configuration = k8s_client.Configuration()
    if kubeconfig or context:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
        return configuration
    try:
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except k8s_config.ConfigException:
        k8s_config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return configuration


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often one call may be sent again (client-go's ``Request.MaxRetries``, default 10)."""

    max_retries: int = 10


class TokenBucket:
    """A client-side request limiter: ``qps`` tokens a second, at most ``burst`` saved up.

    It starts full, as client-go's does. ``acquire`` reserves the next token under a
    lock and waits outside it, so waiters are served in arrival order and a waiting
    thread never blocks another's reservation. A token that would come after the
    context's deadline is handed back at once and ``DeadlineExceeded`` raised (client-go's
    ``Limiter.Wait``: "would exceed context deadline"); a stop during the wait hands it
    back too. ``clock`` is injectable for tests, and so is ``sleep`` (then a wait is a
    plain sleep that no stop interrupts).
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        if qps <= 0:
            raise ValueError(f"TokenBucket qps must be more than 0, not {qps}")
        if burst < 1:
            raise ValueError(f"TokenBucket burst must be at least 1, not {burst}")
        self.qps, self.burst = qps, burst
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._updated = clock()

    def like(self) -> TokenBucket:
        """A new, full bucket with this one's rate, burst, clock and sleep."""
        return TokenBucket(self.qps, self.burst, clock=self._clock, sleep=self._sleep)

    def reserve(self) -> float:
        """Take one token (possibly one not yet earned) and return the seconds to wait."""
        with self._lock:
            now = self._clock()
            elapsed = max(0.0, now - self._updated)
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps) - 1.0
            self._updated = now
            return -self._tokens / self.qps if self._tokens < 0 else 0.0

    def acquire(self, ctx: context.Context = context.BACKGROUND) -> float:
        """Block until this caller's token is due; return how long it waited.

        Raises ``DeadlineExceeded`` without waiting when the token comes after ``ctx``'s
        deadline, and as soon as ``ctx`` stops during the wait; the token goes back.
        """
        delay = self.reserve()
        if delay <= 0:
            return 0.0
        left = ctx.remaining()
        if ctx.stop.is_set() or (left is not None and delay > left):
            self._give_back()
            raise errors.DeadlineExceeded(
                f"client rate limiter: the next token is {delay:.2f}s away, "
                f"past the deadline ({0.0 if left is None else left:.2f}s left)"
            )
        if self._sleep is not None:
            self._sleep(delay)
        elif ctx.stop.wait(delay):
            self._give_back()
            raise errors.DeadlineExceeded("client rate limiter: stopped while waiting for a token")
        return delay

    def _give_back(self) -> None:
        with self._lock:
            self._tokens = min(float(self.burst), self._tokens + 1.0)


class WatchStream:
    """One open watch: iterate it for events; ``close`` (from any thread) ends it."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        buffer = b""
        try:
            for chunk in self._response.stream(65536, decode_content=True):
                buffer += chunk
                while True:
                    line, sep, rest = buffer.partition(b"\n")
                    if not sep:
                        break
                    buffer = rest
                    if line.strip():
                        yield _json.loads(line)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if not self._closed.is_set():
                raise errors.TransportError(f"watch stream broke: {exc}") from exc
        finally:
            if self._closed.is_set():
                # Shut down by close(): the connection is dead, never back into the pool
                # (where it would wait, unclosed, until the pool is collected).
                self._response.close()
            else:
                self._response.release_conn()

    def close(self) -> None:
        """Stop the stream; a blocked iteration ends without an error."""
        self._closed.set()
        try:
            self._response.shutdown()
        except Exception:  # closing a half-dead socket may fail in any way
            log.debug("closing a watch stream failed", exc_info=True)


class RestClient:
    """A thread-safe JSON client for one API server, sharing one connection pool."""

    def __init__(
        self,
        configuration: k8s_client.Configuration,
        *,
        pool_size: int = 32,
        retry: RetryPolicy | None = None,
        timeout: float = 30.0,
        user_agent: str = DEFAULT_USER_AGENT,
        metrics: Metrics | None = None,
        rate_limiter: TokenBucket | None = None,
    ) -> None:
        self._requests = (metrics or DEFAULT).rest_client_requests
        self._limiter_duration = (metrics or DEFAULT).rest_client_rate_limiter_duration
        configuration.connection_pool_maxsize = pool_size
        configuration.keep_alive = True
        self._user_agent = user_agent
        self._configuration = configuration
        from kubernetes import client as k8s_client

        self._pool: urllib3.PoolManager = k8s_client.rest.RESTClientObject(
            configuration
        ).pool_manager
        self._host = configuration.host.rstrip("/")
        self._metric_host = urlsplit(self._host).netloc
        self._retry = retry or RetryPolicy()
        self._timeout = timeout
        self._rate_limiter = rate_limiter
        self._fence: WriteFence | None = None

    def close(self) -> None:
        """Close every pooled connection (the client stays usable: new ones are opened).
        For a process that drops a client before it exits, as tests do."""
        self._pool.clear()

    def with_metrics(self, metrics: Metrics) -> RestClient:
        """This client (same configuration and connection pool) counting into ``metrics``."""
        counted = copy.copy(self)
        counted._requests = metrics.rest_client_requests
        counted._limiter_duration = metrics.rest_client_rate_limiter_duration
        return counted

    def for_component(self, name: str, rate_limiter: TokenBucket | None = None) -> RestClient:
        """This client for one component: its own token bucket (``rate_limiter`` if given,
        else one of this client's rate, when there is one), the user agent
        ``<agent>/<name>`` (client-go's ``rest.AddUserAgent``), the same configuration,
        connection pool, metrics and fence."""
        component = copy.copy(self)
        component._user_agent = f"{self._user_agent}/{name}"
        if rate_limiter is not None:
            component._rate_limiter = rate_limiter
        elif self._rate_limiter is not None:
            component._rate_limiter = self._rate_limiter.like()
        return component

    def fenced(self, fence: WriteFence) -> RestClient:
        """This client asking ``fence`` before each write it sends (see the module doc)."""
        guarded = copy.copy(self)
        guarded._fence = fence
        return guarded

    @property
    def user_agent(self) -> str:
        """The User-Agent header this client sends."""
        return self._user_agent

    @property
    def host(self) -> str:
        """The API server's base URL."""
        return self._host

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
        accept: str = JSON,
    ) -> Any:
        """Send one request (retried as the module doc says) and return the parsed JSON body.

        ``accept`` asks for another representation of the same JSON (``METADATA_LIST``:
        the metadata of each listed object only).

        Raises the typed ``ApiError`` for an error status, ``ConnectionLost`` or
        ``TransportError`` when no whole answer came. ``timeout`` (the client's default
        when None) bounds the call, retries included; the current ``context`` bounds it
        too: once that is stopped or past its deadline, ``DeadlineExceeded`` is raised
        instead of another attempt.
        """
        ctx = context.current()
        deadline = time.monotonic() + (timeout or self._timeout)
        try:  # the first attempt outside tenacity: nearly every call ends here
            return self._request_once(
                ctx, method, path, params, body, content_type, deadline, accept
            )
        except (errors.ApiError, errors.TransportError) as exc:
            if errors.retry_delay(method, exc) is None:
                raise
            failure = exc
        send = functools.partial(
            self._request_once, ctx, method, path, params, body, content_type, deadline, accept
        )
        return self._retrying(ctx, method, path, deadline)(_replaying(failure, send))

    def _retrying(
        self, ctx: context.Context, method: str, path: str, deadline: float
    ) -> tenacity.Retrying:
        """The retry loop of one call (module doc): client-go's table (``retry_delay``)
        decides what is retried and how long to wait first; it stops after
        ``max_retries`` retries, or when the wait would end past the call's deadline or the
        context's, and then raises the last error as it came."""
        return tenacity.Retrying(
            retry=tenacity.retry_if_exception(
                lambda exc: errors.retry_delay(method, exc) is not None
            ),
            wait=functools.partial(_asked_wait, method),
            stop=tenacity.stop_after_attempt(1 + self._retry.max_retries)
            | _WaitPastDeadline(ctx, deadline),
            sleep=_sleep_within(ctx),
            before_sleep=functools.partial(_log_retry, method, path),
            reraise=True,
        )

    def watch(
        self,
        path: str,
        params: Mapping[str, Any],
        *,
        read_timeout: float,
        accept: str = JSON,
    ) -> WatchStream:
        """Open a watch on ``path``; raises the typed error when the server refuses it.
        ``accept`` as for ``request`` (``METADATA``: each event's object as metadata only)."""
        query = {**params, "watch": "true"}
        response = self._send(
            context.current(),
            "GET",
            path,
            query,
            None,
            JSON,
            read_timeout,
            stream=True,
            accept=accept,
        )
        return WatchStream(response)

    def _request_once(
        self,
        ctx: context.Context,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        deadline: float,
        accept: str,
    ) -> Any:
        ctx.check(f"{method} {path}")
        timeout = _remaining(ctx, deadline)
        limit = ctx.with_timeout(timeout) if self._rate_limiter is not None else ctx
        response = self._send(
            limit, method, path, params, body, content_type, timeout, stream=False, accept=accept
        )
        data = response.data
        return _json.loads(data) if data else None

    def _send(
        self,
        ctx: context.Context,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: float,
        *,
        stream: bool,
        accept: str = JSON,
    ) -> urllib3.BaseHTTPResponse:
        url = self._host + path
        if params:
            url += "?" + urlencode({k: _query_value(v) for k, v in params.items() if v is not None})
        headers = self._headers(content_type if body is not None else None, accept)
        encoded = _json.dumps(body) if body is not None else None
        if self._rate_limiter is not None:
            waited = self._rate_limiter.acquire(ctx)
            self._limiter_duration.labels(method, self._metric_host).observe(waited)
            if waited:  # the deadline may have passed while we waited (a frozen process)
                ctx.check(f"{method} {path}")
        if self._fence is not None and method in WRITE_METHODS:
            self._admit(self._fence, method, path)
        try:
            response = self._pool.request(
                method,
                url,
                body=encoded,
                headers=headers,
                preload_content=not stream,
                timeout=urllib3.Timeout(connect=min(10.0, timeout), read=timeout),
                retries=False,
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self._requests.labels("<error>", method, self._metric_host).inc()
            raise _transport_error(f"{method} {path}: {exc}", exc) from exc
        self._requests.labels(str(response.status), method, self._metric_host).inc()
        if response.status >= 400:
            raise _error_from(response)
        return response

    def _admit(self, fence: WriteFence, method: str, path: str) -> None:
        """Raise ``NotLeader`` when the fence refuses this write (it is not sent)."""
        refusal = fence()
        if refusal is not None:
            raise errors.NotLeader(f"{method} {path} not sent: {refusal}")

    def _headers(self, content_type: str | None, accept: str = JSON) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": self._user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        token = self._configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            headers["Authorization"] = token
        return headers


def _remaining(ctx: context.Context, deadline: float) -> float:
    """Seconds left before the call's deadline or the context's, whichever comes first."""
    left = deadline - time.monotonic()
    ctx_left = ctx.remaining()
    return left if ctx_left is None else min(left, ctx_left)


_LOST = (urllib3.exceptions.ProtocolError, ConnectionResetError, BrokenPipeError)
"""What a connection that broke mid-request raises (``_transport_error``)."""


def _transport_error(message: str, exc: BaseException) -> errors.TransportError:
    """``ConnectionLost`` when the connection broke mid-request, else ``TransportError``.

    urllib3 raises ``ProtocolError`` for a connection reset, a peer that closed without
    (a whole) response, a broken pipe; an ``SSLError`` wrapping a TLS EOF is the same
    (client-go's ``IsConnectionReset``/``IsProbableEOF``). A refused connection
    (``NewConnectionError``) and timeouts are neither.
    """
    lost = isinstance(exc, _LOST)
    if isinstance(exc, urllib3.exceptions.SSLError):
        lost = any(isinstance(arg, ssl.SSLEOFError | ssl.SSLZeroReturnError) for arg in exc.args)
    return errors.ConnectionLost(message) if lost else errors.TransportError(message)


def _replaying(failure: BaseException, send: Callable[[], Any]) -> Callable[[], Any]:
    """``send``, except that its first call raises ``failure``, the error of the attempt
    already sent: tenacity counts that attempt and waits after it, and sends only again."""
    replayed = False

    def attempt() -> Any:
        nonlocal replayed
        if not replayed:
            replayed = True
            raise failure
        return send()

    return attempt


def _asked_wait(method: str, state: tenacity.RetryCallState) -> float:
    """The seconds the table says to wait after the failed attempt of ``state``."""
    error = state.outcome.exception() if state.outcome is not None else None
    delay = None if error is None else errors.retry_delay(method, error)
    assert delay is not None, "only an error the table retries gets a wait"
    return delay


class _WaitPastDeadline(tenacity.stop.stop_base):
    """Stop when the coming wait would end at or past the call's deadline or the context's."""

    def __init__(self, ctx: context.Context, deadline: float) -> None:
        self._ctx, self._deadline = ctx, deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return retry_state.upcoming_sleep >= _remaining(self._ctx, self._deadline)


def _log_retry(method: str, path: str, state: tenacity.RetryCallState) -> None:
    """Before a retry's wait: one INFO line with the call, the retry's number and why."""
    assert state.outcome is not None
    log.info(
        "%s %s: retry %d in %.0fs, as the server asked or the connection broke: %s",
        method,
        path,
        state.attempt_number,
        state.upcoming_sleep,
        state.outcome.exception(),
    )


def _sleep_within(ctx: context.Context) -> Callable[[float], None]:
    """Sleep before a retry, waking at once when the context stops."""

    def sleep(seconds: float) -> None:
        ctx.wait(seconds)

    return sleep


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _error_from(response: urllib3.BaseHTTPResponse) -> errors.ApiError:
    data = response.data if response.data is not None else b""
    try:
        status = orjson.loads(data) if data else {}
    except orjson.JSONDecodeError:
        status = {"message": data.decode("utf-8", "replace")[:500]}
    if not isinstance(status, dict):
        status = {"message": str(status)}
    retry_after: float | None = None
    header = response.headers.get("Retry-After")
    if header is not None:
        try:  # whole seconds, as client-go's retryAfterSeconds reads it (strconv.Atoi)
            retry_after = float(max(0, int(header)))
        except ValueError:
            retry_after = None
    return errors.api_error(response.status, status, retry_after)
