"""Admission and conversion webhooks: the HTTPS server and the AdmissionReview types.

``WebhookServer`` serves ``Route`` s (a function from a decoded review to its answer)
over TLS with certificate reload, on every replica; ``parse_review``, ``allow``,
``patch``, ``deny`` and the ``FieldError`` helpers build AdmissionReview answers, and
``review_handler`` turns a per-kind answer function into a route. What the application
admits or converts is its own (``cronjob_operator.webhooks``).

``clipped`` and ``shortened`` (from ``runtime.serving``) show a request value in a
message, cut to a bound. ``validation_answer`` ratchets an update as the API server
ratchets a CRD's schema: an error the old object has too, on a field the update leaves
unchanged, does not refuse it (``_ratchet``). Machinery: ``_server``, ``_admission``,
``_ratchet``.
"""

from cronjob_operator.runtime.serving import clipped, shortened
from cronjob_operator.runtime.webhook._admission import (
    AdmissionRequest,
    Answer,
    ErrorType,
    FieldError,
    Operation,
    allow,
    deny,
    invalid,
    invalid_status,
    name_too_long,
    not_supported,
    parse_review,
    patch,
    required,
    review_handler,
    validation_answer,
)
from cronjob_operator.runtime.webhook._server import (
    LIMITS,
    MAX_BODY_BYTES,
    BadRequest,
    Route,
    WebhookServer,
)

__all__ = [
    "LIMITS",
    "MAX_BODY_BYTES",
    "AdmissionRequest",
    "Answer",
    "BadRequest",
    "ErrorType",
    "FieldError",
    "Operation",
    "Route",
    "WebhookServer",
    "allow",
    "clipped",
    "deny",
    "invalid",
    "invalid_status",
    "name_too_long",
    "not_supported",
    "parse_review",
    "patch",
    "required",
    "review_handler",
    "shortened",
    "validation_answer",
]
