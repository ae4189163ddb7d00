"""The structural schema: pydantic's JSON Schema of a model, made what the API server accepts.

``openapi_schema(resource)`` inlines ``$ref``s, turns ``Optional[X]`` (``anyOf`` with
null) into plain ``X`` (absent rather than null), drops titles and null defaults, and
turns a model that keeps unknown fields (``additionalProperties: true``) into
``x-kubernetes-preserve-unknown-fields``. Anything else that is not structural
(``oneOf``, a real ``anyOf``, a node without a type) raises ``SchemaError`` here rather
than making a CRD the API server refuses. The root gets the standard apiVersion, kind
and metadata properties and the resource's root CEL rules.
"""

from __future__ import annotations

import copy
from typing import Any

from cronjob_operator.api.markers import Resource

__all__ = ["SchemaError", "openapi_schema"]

_API_VERSION_DESCRIPTION = (
    "APIVersion defines the versioned schema of this representation of an object.\n"
    "Servers should convert recognized schemas to the latest internal value, and\n"
    "may reject unrecognized values.\n"
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/"
    "api-conventions.md#resources"
)
_KIND_DESCRIPTION = (
    "Kind is a string value representing the REST resource this object represents.\n"
    "Servers may infer this from the endpoint the client submits requests to.\n"
    "Cannot be updated.\n"
    "In CamelCase.\n"
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/"
    "api-conventions.md#types-kinds"
)
_ROOT_PROPERTIES = ("apiVersion", "kind", "metadata")


class SchemaError(ValueError):
    """The model has a construct that has no structural OpenAPI equivalent."""


def openapi_schema(resource: Resource) -> dict[str, Any]:
    """The structural openAPIV3Schema of a resource's root model."""
    raw = resource.model.model_json_schema(by_alias=True, mode="validation")
    definitions: dict[str, Any] = raw.pop("$defs", {})
    schema = _structural(raw, definitions, path="")
    properties: dict[str, Any] = schema["properties"]
    properties["apiVersion"] = {"description": _API_VERSION_DESCRIPTION, "type": "string"}
    properties["kind"] = {"description": _KIND_DESCRIPTION, "type": "string"}
    # The API server owns metadata's schema: only a bare object is allowed at the root.
    properties["metadata"] = {"type": "object"}
    required = [name for name in schema.get("required", []) if name not in _ROOT_PROPERTIES]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    if resource.validations:
        schema["x-kubernetes-validations"] = [
            {"message": rule.message, "rule": rule.rule} for rule in resource.validations
        ]
    return schema


_RULES = "x-kubernetes-validations"
_DROPPED_KEYS = frozenset({"title"})
_ALLOWED_KEYS = frozenset(
    {
        "additionalProperties",
        "default",
        "description",
        "enum",
        "format",
        "items",
        "maxItems",
        "maxLength",
        "maximum",
        "minItems",
        "minLength",
        "minimum",
        "pattern",
        "properties",
        "required",
        "type",
        "x-kubernetes-int-or-string",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-list-type",
        "x-kubernetes-map-type",
        "x-kubernetes-preserve-unknown-fields",
        _RULES,
    }
)
"""The OpenAPI keywords this generator writes; anything else pydantic emits (oneOf, a
constraint it could not translate such as ``ge``...) is an error, not a guess."""


def _structural(node: dict[str, Any], definitions: dict[str, Any], *, path: str) -> dict[str, Any]:
    """One JSON Schema node of pydantic's output, as a structural OpenAPI node."""
    node = _without_null_branch(node, path=path)
    if "$ref" in node:
        node = _inline_ref(node, definitions)
    unknown = set(node) - _ALLOWED_KEYS - _DROPPED_KEYS
    if unknown:
        raise SchemaError(f"{path or '<root>'}: {sorted(unknown)} has no structural form")
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS or (key == "default" and value is None):
            continue
        if key == "description":
            result[key] = value.strip()
        elif key == "properties":
            result[key] = {
                name: _structural(child, definitions, path=f"{path}.{name}")
                for name, child in value.items()
            }
        elif key == "items":
            result[key] = _structural(value, definitions, path=f"{path}[]")
        elif key == "additionalProperties":
            if value is True:
                result["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, dict):
                result[key] = _structural(value, definitions, path=f"{path}{{}}")
            # additionalProperties: false is the structural default; nothing to write.
        else:
            result[key] = copy.deepcopy(value)
    if "properties" in result and "additionalProperties" in result:
        raise SchemaError(f"{path or '<root>'}: properties and additionalProperties together")
    if "type" not in result and not (
        result.get("x-kubernetes-int-or-string")
        or result.get("x-kubernetes-preserve-unknown-fields")
    ):
        raise SchemaError(f"{path or '<root>'}: no type (a bare Any is not structural)")
    return result


def _without_null_branch(node: dict[str, Any], *, path: str) -> dict[str, Any]:
    """``anyOf: [X, null]`` (pydantic's Optional) as X, with the node's own keys kept."""
    if "anyOf" not in node:
        return node
    branches = [branch for branch in node["anyOf"] if branch != {"type": "null"}]
    if len(branches) != 1:
        raise SchemaError(f"{path or '<root>'}: a union of several types has no structural form")
    merged = dict(branches[0])
    merged.update((key, value) for key, value in node.items() if key != "anyOf")
    return merged


def _inline_ref(node: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """The referenced definition, with the referring node's keys (its description) on top."""
    name = node["$ref"].rpartition("/")[2]
    definition: dict[str, Any] = definitions[name]
    merged = dict(definition)
    merged.update((key, value) for key, value in node.items() if key != "$ref")
    rules = definition.get(_RULES, []) + node.get(_RULES, [])
    if rules:
        merged[_RULES] = rules
    return merged
