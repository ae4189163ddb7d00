"""The ConfigDeployment API, apps.tutorial.kubebuilder.io/v1.

A ConfigDeployment is a Deployment that rolls out new pods when the content of a
ConfigMap or of Secrets it names changes, optionally only some keys of each (the
kubebuilder book's "Watching Externally Managed Resources" example, written out in
full). As in ``batch_v1``, the models both validate like the API server and are the
source of the CRD, and ``read_settings`` gives the reconciler the fields it acts on
without validating the pod template, which it copies into the Deployment as the JSON it
is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Self

from pydantic import ConfigDict, Field, StringConstraints, model_validator

from cronjob_operator.api.core import PodTemplateSpec, RestartPolicy
from cronjob_operator.api.markers import (
    PrinterColumn,
    Resource,
    ScaleSubresource,
    ValidationRule,
)
from cronjob_operator.api.meta import (
    Condition,
    KubeModel,
    NonNegativeInt32,
    NonNegativeInt64,
    ObjectMeta,
)
from cronjob_operator.api.names import KEY_PATTERN, MAX_KEY_LENGTH
from cronjob_operator.runtime.kinds import Kind

__all__ = [
    "CONFIG_DEPLOYMENT",
    "CONFIG_DEPLOYMENT_NAME_RULE",
    "CONFIG_DEPLOYMENT_RESOURCE",
    "KEY_PATTERN",
    "MAX_KEYS",
    "MAX_KEY_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_SECRETS",
    "ConfigDeployment",
    "ConfigDeploymentSettings",
    "ConfigDeploymentSpec",
    "ConfigDeploymentStatus",
    "SecretSource",
    "SourceKey",
    "read_settings",
]

CONFIG_DEPLOYMENT = Kind(
    "apps.tutorial.kubebuilder.io", "v1", "ConfigDeployment", "configdeployments"
)

MAX_NAME_LENGTH = 63
"""Longest ConfigDeployment name: the Deployment's selector label carries it as a label
value, which must fit 63 characters."""

CONFIG_DEPLOYMENT_NAME_RULE = ValidationRule(
    rule=f"self.metadata.name.size() <= {MAX_NAME_LENGTH}",
    message=f"metadata.name: must be no more than {MAX_NAME_LENGTH} characters (it is the "
    "value of the pods' selector label)",
)

_RESTART_MESSAGE = "a Deployment's pods must have restartPolicy Always (or leave it unset)"


MAX_SECRETS = 16
"""The most Secrets one ConfigDeployment may name."""
MAX_KEYS = 64
"""The most keys one key filter may name."""

# The API server reports these at the rule's field ("spec", "spec.configMapKeys").
_SOURCE_RULE_MESSAGE = "name a ConfigMap (spec.configMap) or at least one Secret (spec.secrets)"
_KEYS_NEED_CONFIG_MAP = "needs spec.configMap: set it, or remove spec.configMapKeys"

SourceKey = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_KEY_LENGTH, pattern=KEY_PATTERN)
]
_KEY_LIST = Field(
    default=None,
    min_length=1,
    max_length=MAX_KEYS,
    json_schema_extra={"x-kubernetes-list-type": "set"},
)


class SecretSource(KubeModel):
    """A Secret whose content rolls the pods, and optionally the only keys that count."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=253)]
    """Name of a Secret in the same namespace. It is only read, never changed; it may be
    created after the ConfigDeployment."""
    keys: list[SourceKey] | None = _KEY_LIST
    """Roll only when one of these keys of the Secret changes (appears, disappears or
    gets another value). Unset: any key."""


class ConfigDeploymentSpec(KubeModel):
    """ConfigDeploymentSpec defines the desired state of ConfigDeployment."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.configMap) || (has(self.secrets) && size(self.secrets) > 0)",
                    "message": _SOURCE_RULE_MESSAGE,
                },
                {
                    "rule": "!has(self.configMapKeys) || has(self.configMap)",
                    "message": _KEYS_NEED_CONFIG_MAP,
                    "fieldPath": ".configMapKeys",
                },
            ]
        }
    )

    config_map: Annotated[str, StringConstraints(min_length=1, max_length=253)] | None = None
    """Name of a ConfigMap in the same namespace. Its data and binaryData are hashed
    into the pod template, so a change of content rolls out new pods. The ConfigMap is
    only read, never owned or changed; it may be created after the ConfigDeployment.
    Required unless spec.secrets names a Secret."""
    config_map_keys: list[SourceKey] | None = _KEY_LIST
    """Roll only when one of these keys of the ConfigMap (data or binaryData) changes
    (appears, disappears or gets another value). Unset: any key."""
    secrets: list[SecretSource] | None = Field(
        default=None,
        max_length=MAX_SECRETS,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Secrets in the same namespace whose content also rolls the pods. No value of a
    Secret is ever logged, put in an event or kept by the operator: it keeps a keyed
    digest of each value only."""
    replicas: NonNegativeInt32 | None = 1
    """Number of desired pods. Defaults to 1."""
    template: PodTemplateSpec = Field(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.spec.restartPolicy) || self.spec.restartPolicy == 'Always'",
                    "message": _RESTART_MESSAGE,
                    "fieldPath": ".spec.restartPolicy",
                }
            ]
        }
    )
    """The pods to run. The controller adds its selector label and the config-hash
    annotation to the pod template."""

    @model_validator(mode="after")
    def _pods_restart_always(self) -> Self:
        policy = self.template.spec.restart_policy
        if policy is not None and policy is not RestartPolicy.ALWAYS:
            raise ValueError(_RESTART_MESSAGE)
        return self

    @model_validator(mode="after")
    def _names_a_source(self) -> Self:
        if self.config_map is None and not self.secrets:
            raise ValueError(_SOURCE_RULE_MESSAGE)
        if self.config_map_keys is not None and self.config_map is None:
            raise ValueError(_KEYS_NEED_CONFIG_MAP)
        return self


class ConfigDeploymentStatus(KubeModel):
    """ConfigDeploymentStatus defines the observed state of ConfigDeployment."""

    observed_generation: NonNegativeInt64 | None = None
    """The .metadata.generation the controller last acted on."""
    config_map_hash: str | None = None
    """The hash of the content (ConfigMap and Secrets) now in the pod template (short, as
    shown by kubectl get)."""
    replicas: NonNegativeInt32 | None = None
    """Total number of pods of the Deployment (mirrors its status)."""
    ready_replicas: NonNegativeInt32 | None = None
    """Number of ready pods of the Deployment (mirrors its status)."""
    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )
    """Conditions represent the current state of the ConfigDeployment: Available,
    Progressing and Degraded."""


class ConfigDeployment(KubeModel):
    """ConfigDeployment is a Deployment whose pods roll when its ConfigMap or Secrets change."""

    api_version: str = CONFIG_DEPLOYMENT.api_version
    kind: str = CONFIG_DEPLOYMENT.kind
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ConfigDeploymentSpec
    """Spec defines the desired state of ConfigDeployment."""
    status: ConfigDeploymentStatus | None = None
    """Status defines the observed state of ConfigDeployment."""

    @model_validator(mode="after")
    def _name_fits_a_label_value(self) -> Self:
        if len(self.metadata.name or "") > MAX_NAME_LENGTH:
            raise ValueError(CONFIG_DEPLOYMENT_NAME_RULE.message)
        return self


class ConfigDeploymentSettings(KubeModel):
    """The spec fields the reconciler acts on besides the pod template."""

    model_config = ConfigDict(frozen=True)

    config_map: str | None = None
    replicas: int | None = 1


def read_settings(config_deployment: Mapping[str, Any]) -> ConfigDeploymentSettings:
    """The reconciler's view of a ConfigDeployment object (raw JSON, e.g. from the cache).

    The pod template is not looked at. Raises ``pydantic.ValidationError`` only when a
    field is missing or has the wrong JSON type.
    """
    return ConfigDeploymentSettings.model_validate(config_deployment.get("spec") or {})


CONFIG_DEPLOYMENT_RESOURCE = Resource(
    kind=CONFIG_DEPLOYMENT,
    model=ConfigDeployment,
    singular="configdeployment",
    short_names=("cfgdeploy",),
    printer_columns=(
        PrinterColumn("ConfigMap", "string", ".spec.configMap", "The ConfigMap rolled out."),
        PrinterColumn("Ready", "integer", ".status.readyReplicas", "Ready pods."),
        # Columns cannot truncate, so status.configMapHash is itself a short hash.
        PrinterColumn(
            "Hash", "string", ".status.configMapHash", "Hash of the ConfigMap content in use."
        ),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Age of the ConfigDeployment."),
    ),
    validations=(CONFIG_DEPLOYMENT_NAME_RULE,),
    scale=ScaleSubresource(
        spec_replicas_path=".spec.replicas", status_replicas_path=".status.replicas"
    ),
)
