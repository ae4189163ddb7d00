"""The webhook serving certificate without cert-manager: made, rotated and injected by the
manager.

``CertRotator`` is a Runnable on every replica: the leader keeps a CA and a serving
certificate in a Secret and the CA bundle in the webhook configurations and CRDs that
call the webhook (``Target``); every replica writes the Secret's pair where its webhook
server reads it, and is ready once the certificate it serves is trusted by every bundle.

Machinery: ``_pki`` (making and judging certificates), ``_rotator`` (the Runnable).
"""

from cronjob_operator.runtime.certrotation._pki import (
    RENEW_FRACTION,
    ServingPair,
    make_pair,
    trusts,
    why_renew,
)
from cronjob_operator.runtime.certrotation._rotator import (
    CUSTOM_RESOURCE_DEFINITION,
    MUTATING_WEBHOOK_CONFIGURATION,
    VALIDATING_WEBHOOK_CONFIGURATION,
    CertRotator,
    RotatorConfig,
    Target,
    client_configs,
    dns_names,
    parse_target,
)

__all__ = [
    "CUSTOM_RESOURCE_DEFINITION",
    "MUTATING_WEBHOOK_CONFIGURATION",
    "RENEW_FRACTION",
    "VALIDATING_WEBHOOK_CONFIGURATION",
    "CertRotator",
    "RotatorConfig",
    "ServingPair",
    "Target",
    "client_configs",
    "dns_names",
    "make_pair",
    "parse_target",
    "trusts",
    "why_renew",
]
