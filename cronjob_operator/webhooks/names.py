"""A field that names another object: it must be a name such an object can have.

Shared by the webhooks whose kinds name other objects of their namespace
(a ConfigDeployment's ConfigMap and Secrets, a CronJob's ConcurrencyGroup): a name that
no object can have (not an RFC 1123 subdomain) would leave the controller waiting
forever for one that cannot exist, and is refused at once with the API server's own
wording.
"""

from __future__ import annotations

import re
from typing import Any, Final

from cronjob_operator.api.names import MAX_SUBDOMAIN_LENGTH, SUBDOMAIN_PATTERN
from cronjob_operator.runtime import webhook
from cronjob_operator.runtime.webhook import FieldError

__all__ = ["name_errors"]

_DNS1123_SUBDOMAIN: Final = re.compile(SUBDOMAIN_PATTERN)
_DNS1123_SUBDOMAIN_MAX: Final = MAX_SUBDOMAIN_LENGTH
_SUBDOMAIN_MESSAGE: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    f"regex used for validation is '{SUBDOMAIN_PATTERN}')"
)


def name_errors(field: str, value: Any, what: str) -> list[FieldError]:
    """The errors of ``field``, whose ``value`` names ``what`` (required, a subdomain)."""
    if value is None or value == "":
        return [webhook.required(field, what)]
    if not isinstance(value, str):
        return [webhook.invalid(field, value, "must be a string")]
    errors = []
    if len(value) > _DNS1123_SUBDOMAIN_MAX:
        errors.append(
            webhook.invalid(
                field, value, f"must be no more than {_DNS1123_SUBDOMAIN_MAX} characters"
            )
        )
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errors.append(webhook.invalid(field, value, _SUBDOMAIN_MESSAGE))
    return errors
