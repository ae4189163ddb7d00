"""Validation of ConfigDeployment v1, the way the API server validates a Deployment.

Most of its rules are also in the CRD schema (types, minimums, the name and
restartPolicy CEL rules); this webhook repeats them so every error comes back in one
answer with its field path, and adds the one a schema cannot state well: ``spec.configMap``
must be a name a ConfigMap can have (an RFC 1123 subdomain), or the controller would wait
forever for a ConfigMap that cannot exist. There is nothing to default that the schema
does not default already, so there is no mutating webhook.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from cronjob_operator.api import apps_v1
from cronjob_operator.api.core import RestartPolicy
from cronjob_operator.webhooks import admission
from cronjob_operator.webhooks.admission import AdmissionRequest, FieldError

__all__ = ["VALIDATE_PATH", "validate", "validate_create", "validate_update"]

VALIDATE_PATH: Final = "/validate-apps-tutorial-kubebuilder-io-v1-configdeployment"

_DNS1123_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_DNS1123_SUBDOMAIN_MAX: Final = 253
_SUBDOMAIN_MESSAGE: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    f"regex used for validation is '{_DNS1123_SUBDOMAIN.pattern}')"
)


def _config_map_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    field = "spec.configMap"
    value = spec.get("configMap")
    if value is None or value == "":
        return [admission.required(field, "the name of a ConfigMap in the same namespace")]
    if not isinstance(value, str):
        return [admission.invalid(field, value, "must be a string")]
    errors = []
    if len(value) > _DNS1123_SUBDOMAIN_MAX:
        errors.append(
            admission.invalid(
                field, value, f"must be no more than {_DNS1123_SUBDOMAIN_MAX} characters"
            )
        )
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errors.append(admission.invalid(field, value, _SUBDOMAIN_MESSAGE))
    return errors


def _spec_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    errors = _config_map_errors(spec)
    replicas = spec.get("replicas")
    if replicas is not None:
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            errors.append(admission.invalid("spec.replicas", replicas, "must be a whole number"))
        elif replicas < 0:
            errors.append(
                admission.invalid("spec.replicas", replicas, "must be greater than or equal to 0")
            )
    template = spec.get("template")
    if not isinstance(template, Mapping):
        return [*errors, admission.required("spec.template", "the pods to run")]
    pod_spec = template.get("spec")
    policy = pod_spec.get("restartPolicy") if isinstance(pod_spec, Mapping) else None
    if policy is not None and policy != RestartPolicy.ALWAYS:
        errors.append(
            admission.not_supported(
                "spec.template.spec.restartPolicy", policy, [RestartPolicy.ALWAYS.value]
            )
        )
    return errors


def _validate(config_deployment: Mapping[str, Any]) -> list[FieldError]:
    spec = config_deployment.get("spec")
    if not isinstance(spec, Mapping):
        return [admission.required("spec")]
    return _spec_errors(spec)


def validate_create(config_deployment: Mapping[str, Any]) -> list[FieldError]:
    """Every reason the API server must refuse to create ``config_deployment``."""
    errors = admission.name_too_long(
        config_deployment, apps_v1.MAX_NAME_LENGTH, "it is the value of the pods' selector label"
    )
    return errors + _validate(config_deployment)


def validate_update(
    config_deployment: Mapping[str, Any], old: Mapping[str, Any]
) -> list[FieldError]:
    """Every reason the API server must refuse to update ``old`` to ``config_deployment``.

    The name cannot change on update, so its length is not checked again."""
    del old  # no rule depends on the previous object
    return _validate(config_deployment)


def validate(request: AdmissionRequest, config_deployment: dict[str, Any]) -> dict[str, Any]:
    """The validating webhook's answer: admit, or deny with every error."""
    return admission.validation_answer(
        request,
        config_deployment,
        kind=apps_v1.CONFIG_DEPLOYMENT,
        validate_create=validate_create,
        validate_update=validate_update,
    )
