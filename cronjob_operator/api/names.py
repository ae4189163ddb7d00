"""The names the API server accepts for an object and for a key of a Secret or ConfigMap.

Kept apart from the pydantic models, as ``batch_v1_constants`` is, so that what checks a
name without a model (the webhooks, a run override's ``valueFrom`` read by the
controller and by ``kubectl cjt``) imports no pydantic; the schemas (``apps_v1``) build
their patterns from the same facts. Each pattern is the API server's own: a name it
would refuse is refused here first, where the message can name the field and the fix.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "KEY_PATTERN",
    "MAX_KEY_LENGTH",
    "MAX_SUBDOMAIN_LENGTH",
    "SUBDOMAIN_PATTERN",
    "is_key",
    "is_subdomain",
]

SUBDOMAIN_PATTERN: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
"""A lowercase RFC 1123 subdomain (``IsDNS1123Subdomain``): most objects' names, a
Secret's and a ConfigMap's among them."""
MAX_SUBDOMAIN_LENGTH: Final = 253
"""The longest RFC 1123 subdomain, in characters."""
KEY_PATTERN: Final = r"^[-._a-zA-Z0-9]+$"
"""A ConfigMap or Secret key (the API server's ``IsConfigMapKey``)."""
MAX_KEY_LENGTH: Final = 253
"""The longest ConfigMap or Secret key, in characters."""

_SUBDOMAIN: Final = re.compile(SUBDOMAIN_PATTERN)
_KEY: Final = re.compile(KEY_PATTERN)


def is_subdomain(name: str) -> bool:
    """Whether ``name`` is a lowercase RFC 1123 subdomain (a name a Secret may have)."""
    return len(name) <= MAX_SUBDOMAIN_LENGTH and _SUBDOMAIN.fullmatch(name) is not None


def is_key(key: str) -> bool:
    """Whether ``key`` may name a Secret's or ConfigMap's key: ``KEY_PATTERN``, at most
    ``MAX_KEY_LENGTH``, and neither ``.`` nor starting with ``..`` (a path that leaves
    the directory the key would be mounted in)."""
    return (
        len(key) <= MAX_KEY_LENGTH
        and _KEY.fullmatch(key) is not None
        and key != "."
        and not key.startswith("..")
    )
