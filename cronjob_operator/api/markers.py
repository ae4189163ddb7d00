"""The type-level kubebuilder markers of a custom resource, as plain data.

In a kubebuilder project, markers above the root Go type (``+kubebuilder:resource``,
``+kubebuilder:printcolumn``, ``+kubebuilder:subresource``, ``XValidation``) say what
controller-gen puts in the CRD beyond the schema. Here each kind's types module declares
one ``Resource`` beside its models, and ``crdgen`` turns it into a
CustomResourceDefinition. Field-level markers (minimum, enum, default, pattern, list
types) stay on the pydantic fields themselves.

A kind with several versions declares one ``Resource`` per version (same kind, plural
and names); crdgen puts them in one CRD. Exactly one is the storage version
(``+kubebuilder:storageversion``). A version whose schema differs from the storage
version's names the ``ConversionWebhook`` that converts it (kubebuilder's
``Convertible`` spoke): the API server cannot convert it by itself, so the base CRD does
not serve it, and the webhook patch crdgen writes beside the bases serves it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from cronjob_operator.runtime.kinds import Kind

__all__ = [
    "ConversionWebhook",
    "PrinterColumn",
    "Resource",
    "ScaleSubresource",
    "ValidationRule",
]


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """One ``kubectl get`` column (``+kubebuilder:printcolumn``)."""

    name: str
    type: Literal["string", "integer", "number", "boolean", "date"]
    json_path: str
    description: str
    priority: int = 0


@dataclass(frozen=True, slots=True)
class ValidationRule:
    """A CEL rule on the root of the schema (``+kubebuilder:validation:XValidation``)."""

    rule: str
    message: str


@dataclass(frozen=True, slots=True)
class ScaleSubresource:
    """The scale subresource (``+kubebuilder:subresource:scale``)."""

    spec_replicas_path: str
    status_replicas_path: str


@dataclass(frozen=True, slots=True)
class ConversionWebhook:
    """The conversion webhook of a version, reached through a Service in the cluster.

    ``service_name`` and ``service_namespace`` are the names in ``config/`` before
    kustomize adds the project's prefix and namespace (kubebuilder's ``webhook-service``
    in ``system``)."""

    path: str
    service_name: str = "webhook-service"
    service_namespace: str = "system"
    review_versions: tuple[str, ...] = ("v1",)


@dataclass(frozen=True, slots=True)
class Resource:
    """One version of a kind, for crdgen: the kind, its root model, its markers."""

    kind: Kind
    model: type[BaseModel]
    singular: str
    short_names: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    validations: tuple[ValidationRule, ...] = ()
    scale: ScaleSubresource | None = None
    storage: bool = True
    """Whether objects are stored in this version (one version of a kind is)."""
    conversion: ConversionWebhook | None = None
    """Set on a version that only a webhook can convert to and from the storage version."""
