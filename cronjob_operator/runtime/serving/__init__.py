"""HTTP serving for a manager: the hardened server, TLS, probes and authenticated metrics.

``HardenedServer`` bounds every connection (header, body, idle, read and write
timeouts, a connection cap); ``CertWatcher`` reloads a certificate pair when its files
change and ``server_context`` is the one TLS policy; ``self_signed_context`` makes a
pair when none is given; ``MetricsAuthorizer`` is controller-runtime's
``WithAuthenticationAndAuthorization`` (TokenReview, SubjectAccessReview), shedding
reviews beyond ``ReviewLimits``;
``HttpServer`` serves the probes and ``/metrics``.

Machinery: ``_httpserver``, ``_certwatcher``, ``_selfsigned``, ``_metrics_auth``,
``_probes``, ``_malloc`` (``release_large_allocations``: freed request bodies go back
to the system), ``_echo`` (``clipped``, ``clipped_json``, ``shortened``: request values
shown in a message or a log, cut to ``ECHO_LIMIT`` characters).
"""

from cronjob_operator.runtime.serving._certwatcher import (
    CERT_FILE,
    KEY_FILE,
    TLS12_CIPHERS,
    CertWatcher,
    server_context,
)
from cronjob_operator.runtime.serving._echo import (
    ECHO_LIMIT,
    clipped,
    clipped_json,
    shortened,
)
from cronjob_operator.runtime.serving._httpserver import (
    HardenedHandler,
    HardenedServer,
    Limits,
    Refused,
    TLSContext,
)
from cronjob_operator.runtime.serving._malloc import release_large_allocations
from cronjob_operator.runtime.serving._metrics_auth import (
    ApiReviewer,
    CacheSettings,
    MetricsAuthorizer,
    Reviewer,
    ReviewLimits,
    User,
)
from cronjob_operator.runtime.serving._probes import (
    Authorize,
    Check,
    HttpServer,
    Refusal,
    parse_address,
)
from cronjob_operator.runtime.serving._selfsigned import SelfSignedError, self_signed_context

__all__ = [
    "CERT_FILE",
    "ECHO_LIMIT",
    "KEY_FILE",
    "TLS12_CIPHERS",
    "ApiReviewer",
    "Authorize",
    "CacheSettings",
    "CertWatcher",
    "Check",
    "HardenedHandler",
    "HardenedServer",
    "HttpServer",
    "Limits",
    "MetricsAuthorizer",
    "Refusal",
    "Refused",
    "ReviewLimits",
    "Reviewer",
    "SelfSignedError",
    "TLSContext",
    "User",
    "clipped",
    "clipped_json",
    "parse_address",
    "release_large_allocations",
    "self_signed_context",
    "server_context",
    "shortened",
]
