"""Validation of ConfigDeployment v1, the way the API server validates a Deployment.

Most of its rules are also in the CRD schema (types, minimums, list sizes, key patterns,
the name, restartPolicy and "some source" CEL rules); this webhook repeats them so every
error comes back in one answer with its field path, and adds the ones a schema cannot
state well: ``spec.configMap`` and each ``spec.secrets[i].name`` must be a name such an
object can have (an RFC 1123 subdomain), or the controller would wait forever for one
that cannot exist, and a key filter names each key once. There is nothing to default
that the schema does not default already, so there is no mutating webhook.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from cronjob_operator.api import apps_v1
from cronjob_operator.api.core import RestartPolicy
from cronjob_operator.runtime import webhook
from cronjob_operator.runtime.webhook import AdmissionRequest, FieldError
from cronjob_operator.webhooks.names import name_errors
from cronjob_operator.webhooks.nesting import nesting_errors

__all__ = ["VALIDATE_PATH", "validate", "validate_create", "validate_update"]

VALIDATE_PATH: Final = "/validate-apps-tutorial-kubebuilder-io-v1-configdeployment"

_KEY: Final = re.compile(apps_v1.KEY_PATTERN)
_KEY_MAX: Final = apps_v1.MAX_KEY_LENGTH
_KEY_MESSAGE: Final = (
    f"a valid key must consist of alphanumeric characters, '-', '_' or '.' and be at most "
    f"{_KEY_MAX} characters (regex used for validation is '{_KEY.pattern}')"
)


def _count_errors(field: str, items: list[Any], most: int, noun: str) -> list[FieldError]:
    """A list of at most ``most`` entries: the error gives the count and the limit."""
    if len(items) <= most:
        return []
    return [webhook.invalid(field, len(items), f"must name at most {most} {noun}")]


def _keys_errors(field: str, keys: Any) -> list[FieldError]:
    """A key filter: a list of 1 to ``MAX_KEYS`` distinct valid keys."""
    if keys is None:
        return []
    if not isinstance(keys, list) or not keys:
        return [webhook.invalid(field, keys, "must be a non-empty list of keys (or unset)")]
    errors = _count_errors(field, keys, apps_v1.MAX_KEYS, "keys")
    seen: set[str] = set()
    for position, key in enumerate(keys):
        item = f"{field}[{position}]"
        if not isinstance(key, str) or not _KEY.fullmatch(key) or len(key) > _KEY_MAX:
            errors.append(webhook.invalid(item, key, _KEY_MESSAGE))
        elif key in seen:
            errors.append(webhook.invalid(item, key, "each key may be named once"))
        seen.add(str(key))
    return errors


def _secrets_errors(secrets: Any) -> list[FieldError]:
    field = "spec.secrets"
    if secrets is None:
        return []
    if not isinstance(secrets, list):
        return [webhook.invalid(field, secrets, "must be a list of {name, keys}")]
    errors = _count_errors(field, secrets, apps_v1.MAX_SECRETS, "Secrets")
    names: set[str] = set()
    for position, secret in enumerate(secrets):
        item = f"{field}[{position}]"
        if not isinstance(secret, Mapping):
            errors.append(webhook.invalid(item, secret, "must be an object {name, keys}"))
            continue
        name = secret.get("name")
        errors += name_errors(f"{item}.name", name, "the name of a Secret in the same namespace")
        if isinstance(name, str) and name in names:
            errors.append(webhook.invalid(f"{item}.name", name, "each Secret may be named once"))
        names.add(str(name))
        errors += _keys_errors(f"{item}.keys", secret.get("keys"))
    return errors


def _source_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """spec.configMap, spec.configMapKeys and spec.secrets: at least one source, each valid."""
    config_map = spec.get("configMap")
    keys = spec.get("configMapKeys")
    secrets = spec.get("secrets")
    errors: list[FieldError] = []
    if config_map is None or config_map == "":
        if not secrets:
            errors.append(
                webhook.required(
                    "spec.configMap",
                    "the name of a ConfigMap in the same namespace (or name a Secret in "
                    "spec.secrets)",
                )
            )
        if keys is not None:
            errors.append(
                webhook.invalid(
                    "spec.configMapKeys",
                    keys,
                    "needs spec.configMap: set it, or remove spec.configMapKeys",
                )
            )
    else:
        errors += name_errors(
            "spec.configMap", config_map, "the name of a ConfigMap in the same namespace"
        )
        errors += _keys_errors("spec.configMapKeys", keys)
    return errors + _secrets_errors(secrets)


def _spec_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    errors = _source_errors(spec)
    replicas = spec.get("replicas")
    if replicas is not None:
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            errors.append(webhook.invalid("spec.replicas", replicas, "must be a whole number"))
        elif replicas < 0:
            errors.append(
                webhook.invalid("spec.replicas", replicas, "must be greater than or equal to 0")
            )
    template = spec.get("template")
    if not isinstance(template, Mapping):
        return [*errors, webhook.required("spec.template", "the pods to run")]
    pod_spec = template.get("spec")
    policy = pod_spec.get("restartPolicy") if isinstance(pod_spec, Mapping) else None
    if policy is not None and policy != RestartPolicy.ALWAYS:
        errors.append(
            webhook.not_supported(
                "spec.template.spec.restartPolicy", policy, [RestartPolicy.ALWAYS.value]
            )
        )
    return errors


def _validate(config_deployment: Mapping[str, Any]) -> list[FieldError]:
    spec = config_deployment.get("spec")
    if not isinstance(spec, Mapping):
        return [webhook.required("spec")]
    return _spec_errors(spec)


def validate_create(config_deployment: Mapping[str, Any]) -> list[FieldError]:
    """Every reason the API server must refuse to create ``config_deployment``."""
    errors = webhook.name_too_long(
        config_deployment, apps_v1.MAX_NAME_LENGTH, "it is the value of the pods' selector label"
    )
    return errors + _validate(config_deployment) + nesting_errors(config_deployment, None)


def validate_update(
    config_deployment: Mapping[str, Any], old: Mapping[str, Any]
) -> list[FieldError]:
    """Every error of ``config_deployment`` as an update of ``old``; ``validate`` refuses
    the update only for those it causes (the ratchet of ``runtime.webhook``).

    The name cannot change on update, so its length is not checked again."""
    return _validate(config_deployment) + nesting_errors(config_deployment, old)


def validate(request: AdmissionRequest, config_deployment: dict[str, Any]) -> dict[str, Any]:
    """The validating webhook's answer: admit, or deny with every error."""
    return webhook.validation_answer(
        request,
        config_deployment,
        kind=apps_v1.CONFIG_DEPLOYMENT,
        validate_create=validate_create,
        validate_update=validate_update,
    )
