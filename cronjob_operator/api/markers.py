"""The type-level kubebuilder markers of a custom resource, as plain data.

In a kubebuilder project, markers above the root Go type (``+kubebuilder:resource``,
``+kubebuilder:printcolumn``, ``+kubebuilder:subresource``, ``XValidation``) say what
controller-gen puts in the CRD beyond the schema. Here each kind's types module declares
one ``Resource`` beside its models, and ``crdgen`` turns it into a
CustomResourceDefinition. Field-level markers (minimum, enum, default, pattern, list
types) stay on the pydantic fields themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from cronjob_operator.runtime.kinds import Kind

__all__ = ["PrinterColumn", "Resource", "ScaleSubresource", "ValidationRule"]


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
class Resource:
    """Everything crdgen needs to write one CRD: the kind, its root model, its markers."""

    kind: Kind
    model: type[BaseModel]
    singular: str
    short_names: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    validations: tuple[ValidationRule, ...] = ()
    scale: ScaleSubresource | None = None
