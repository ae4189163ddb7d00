"""The shared building blocks of our API types: the model base, scalar types, metav1 parts.

Kubernetes objects are JSON with camelCase names; Python code wants snake_case. Every
model here derives from ``KubeModel``, which maps one to the other (``alias`` for the wire,
the attribute name in code; both accepted on input, the alias written on output), ignores
fields it does not know (what the API server returns may be newer than this code) and
takes each attribute's docstring as its description: those descriptions become the CRD
schema's descriptions, as Go comments do for controller-gen, so ``kubectl explain`` reads
them. ``OpenModel`` keeps unknown fields instead; the CRD generator marks its schema
``x-kubernetes-preserve-unknown-fields``, so the model keeps exactly what the server keeps.

The scalar aliases carry the OpenAPI format of the Go type (``Int32`` is ``*int32``) and
reject what the API server would reject: booleans or strings where a number belongs, and
numbers that do not fit the format. ``Condition`` and ``ObjectReference`` are the metav1
and corev1 types with upstream's validation.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StringConstraints,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel

from cronjob_operator.api.names import MAX_SUBDOMAIN_LENGTH, SUBDOMAIN_PATTERN

__all__ = [
    "QUANTITY_PATTERN",
    "Condition",
    "ConditionStatus",
    "Int32",
    "Int64",
    "KubeModel",
    "NonNegativeInt32",
    "NonNegativeInt64",
    "ObjectMeta",
    "ObjectReference",
    "OpenModel",
    "PortNumber",
    "PositiveInt32",
    "PositiveInt64",
    "PreservedObject",
    "Quantity",
    "SubdomainName",
    "TemplateMeta",
]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _fits_int32(value: int) -> int:
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"must fit a 32-bit integer ({_INT32_MIN}..{_INT32_MAX})")
    return value


def _fits_int64(value: int) -> int:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"must fit a 64-bit integer ({_INT64_MIN}..{_INT64_MAX})")
    return value


_FORMAT_INT32 = Field(json_schema_extra={"format": "int32"})
_FORMAT_INT64 = Field(json_schema_extra={"format": "int64"})

Int32 = Annotated[StrictInt, AfterValidator(_fits_int32), _FORMAT_INT32]
"""Go ``int32``: a JSON integer (not a boolean, not a string) in the 32-bit range."""
Int64 = Annotated[StrictInt, AfterValidator(_fits_int64), _FORMAT_INT64]
"""Go ``int64``: a JSON integer in the 64-bit range."""
NonNegativeInt32 = Annotated[StrictInt, Field(ge=0), AfterValidator(_fits_int32), _FORMAT_INT32]
"""``int32`` with ``+kubebuilder:validation:Minimum=0``."""
NonNegativeInt64 = Annotated[StrictInt, Field(ge=0), AfterValidator(_fits_int64), _FORMAT_INT64]
"""``int64`` with ``+kubebuilder:validation:Minimum=0``."""
PositiveInt32 = Annotated[StrictInt, Field(ge=1), AfterValidator(_fits_int32), _FORMAT_INT32]
"""``int32`` with ``+kubebuilder:validation:Minimum=1``."""
PositiveInt64 = Annotated[StrictInt, Field(ge=1), AfterValidator(_fits_int64), _FORMAT_INT64]
"""``int64`` with ``+kubebuilder:validation:Minimum=1``."""
PortNumber = Annotated[StrictInt, Field(ge=1, le=65535), _FORMAT_INT32]
"""An ``int32`` port number, 1..65535."""

SubdomainName = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=MAX_SUBDOMAIN_LENGTH, pattern=f"^{SUBDOMAIN_PATTERN}$"
    ),
]
"""The name of an object in the same namespace, as the API server validates most names:
a lowercase RFC 1123 subdomain of at most 253 characters (so never "." or "..")."""

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTP]i)|[numkMGTPE]"
    r"|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""The pattern controller-gen puts on ``resource.Quantity`` (applies to strings only)."""

Quantity = Annotated[
    StrictInt | Annotated[str, StringConstraints(pattern=QUANTITY_PATTERN)],
    WithJsonSchema({"x-kubernetes-int-or-string": True, "pattern": QUANTITY_PATTERN}),
]
"""A ``resource.Quantity`` (``500m``, ``1Gi``, ``2``): an integer or a string, as in a CRD.

Structural schemas have no number-or-string type, so ``0.5`` must be written ``"500m"``
or ``"0.5"``; the model rejects a bare float exactly as the API server would.
"""

PreservedObject = dict[str, Any]
"""A JSON object kept as it is: its schema is ``x-kubernetes-preserve-unknown-fields``.

Used where typing the whole Kubernetes schema would add a great deal of schema for
little value; each use says why beside the field.
"""


class KubeModel(BaseModel):
    """Base of the API models: camelCase on the wire, unknown fields ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        use_attribute_docstrings=True,
        extra="ignore",
    )


class OpenModel(KubeModel):
    """Base of models whose unknown fields are kept (and preserved by the CRD schema)."""

    model_config = ConfigDict(extra="allow")


class ObjectMeta(OpenModel):
    """Standard object's metadata (the fields the controllers read; the rest is kept)."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: Int64 | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[PreservedObject] | None = None
    finalizers: list[str] | None = None


class TemplateMeta(KubeModel):
    """Metadata of the objects made from a template: their labels and annotations."""

    labels: dict[str, str] | None = None
    """Map of string keys and values put on every object made from this template.
    More info: http://kubernetes.io/docs/user-guide/labels"""
    annotations: dict[str, str] | None = None
    """Unstructured key-value map put on every object made from this template.
    More info: http://kubernetes.io/docs/user-guide/annotations"""


class ObjectReference(KubeModel):
    """ObjectReference contains enough information to let you inspect or modify the
    referred object."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    api_version: str | None = None
    """API version of the referent."""
    kind: str | None = None
    """Kind of the referent."""
    namespace: str | None = None
    """Namespace of the referent."""
    name: str | None = None
    """Name of the referent."""
    uid: str | None = None
    """UID of the referent."""
    resource_version: str | None = None
    """Specific resourceVersion to which this reference is made, if any."""
    field_path: str | None = None
    """If referring to a piece of an object instead of an entire object, this string
    should contain a valid JSON/Go field access statement."""


class ConditionStatus(StrEnum):
    """Status of the condition, one of True, False, Unknown."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(KubeModel):
    """Condition contains details for one aspect of the current state of this API
    Resource."""

    type: Annotated[
        str,
        StringConstraints(
            max_length=316,
            pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        ),
    ]
    """Type of condition in CamelCase or in foo.example.com/CamelCase."""
    status: ConditionStatus
    """Status of the condition, one of True, False, Unknown."""
    observed_generation: NonNegativeInt64 | None = None
    """The .metadata.generation that the condition was set based upon."""
    last_transition_time: datetime
    """The last time the condition transitioned from one status to another."""
    reason: Annotated[
        str,
        StringConstraints(
            min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
        ),
    ]
    """A programmatic identifier indicating the reason for the condition's last
    transition, in CamelCase."""
    message: Annotated[str, StringConstraints(max_length=32768)]
    """A human readable message indicating details about the transition. This may be an
    empty string."""
