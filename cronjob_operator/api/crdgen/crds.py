"""CRD assembly: the versions of each kind into one apiextensions.k8s.io/v1 CRD.

``generate_crds`` turns the ``Resource`` of each version of each kind (a root model plus
its type-level markers) into a CustomResourceDefinition: the structural schema of each
version (``schema``), its printer columns and subresources, and which version is
stored. A version that only a webhook can convert (its ``Resource.conversion`` is set)
is listed in the base CRD but not served: the bases must work without any webhook
(``kubectl apply -k config/crd``, the tests), and serving it with the default ``None``
strategy would store and return objects in the wrong shape. ``conversion_patch`` is the
difference between that base and the CRD with its conversion webhook
(``spec.conversion`` plus ``served: true``), written as a JSON patch for kustomize
(``config/default`` applies it, as kubebuilder's overlay does);
``generate_crd(..., conversion_client_config=...)`` gives that full CRD directly, for a
webhook reached by URL (local runs, tests).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

from cronjob_operator.api import apps_v1, batch_v1, batch_v2, concurrencygroup_v1
from cronjob_operator.api.crdgen.schema import openapi_schema
from cronjob_operator.api.markers import ConversionWebhook, PrinterColumn, Resource

__all__ = [
    "RESOURCES",
    "conversion_patch",
    "generate_crd",
    "generate_crds",
    "kind_versions",
    "service_client_config",
    "webhook_patches",
]

RESOURCES: tuple[Resource, ...] = (
    batch_v1.CRONJOB_RESOURCE,
    batch_v2.CRONJOB_RESOURCE,
    apps_v1.CONFIG_DEPLOYMENT_RESOURCE,
    concurrencygroup_v1.CONCURRENCY_GROUP_RESOURCE,
)
"""Every version of every custom resource of the project, kinds in the order the CRD
files are listed."""


def generate_crd(
    resource: Resource,
    *other_versions: Resource,
    conversion_client_config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind (one ``Resource`` per version).

    With ``conversion_client_config`` (a webhook clientConfig: ``service`` or ``url`` and
    ``caBundle``) the CRD converts through that webhook and serves every version; without
    it, it is the base CRD, which does not serve the versions that need the webhook.
    """
    versions = sorted((resource, *other_versions), key=lambda r: r.kind.version)
    storage = _storage_version(versions)
    kind = storage.kind
    names: dict[str, Any] = {
        "kind": kind.kind,
        "listKind": f"{kind.kind}List",
        "plural": kind.plural,
        "singular": storage.singular,
    }
    if storage.short_names:
        names["shortNames"] = list(storage.short_names)
    spec: dict[str, Any] = {
        "group": kind.group,
        "names": names,
        "scope": "Namespaced" if kind.namespaced else "Cluster",
        "versions": [
            _version(version, served=version.conversion is None or bool(conversion_client_config))
            for version in versions
        ],
    }
    if conversion_client_config is not None:
        conversion = _conversion_of(versions)
        if conversion is None:
            raise ValueError(f"{kind.plural}.{kind.group}: no version has a conversion webhook")
        spec["conversion"] = {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": copy.deepcopy(conversion_client_config),
                "conversionReviewVersions": list(conversion.review_versions),
            },
        }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{kind.group}"},
        "spec": spec,
    }


def _version(resource: Resource, *, served: bool) -> dict[str, Any]:
    subresources: dict[str, Any] = {"status": {}}
    if resource.scale is not None:
        subresources["scale"] = {
            "specReplicasPath": resource.scale.spec_replicas_path,
            "statusReplicasPath": resource.scale.status_replicas_path,
        }
    version: dict[str, Any] = {
        "name": resource.kind.version,
        "schema": {"openAPIV3Schema": openapi_schema(resource)},
        "served": served,
        "storage": resource.storage,
        "subresources": subresources,
    }
    if resource.printer_columns:
        version["additionalPrinterColumns"] = [
            _printer_column(column) for column in resource.printer_columns
        ]
    return version


def _storage_version(versions: Sequence[Resource]) -> Resource:
    """The storage version, after checking the versions describe one kind consistently."""
    first = versions[0]
    crd = f"{first.kind.plural}.{first.kind.group}"
    for other in versions[1:]:
        same = (
            other.kind.group == first.kind.group
            and other.kind.kind == first.kind.kind
            and other.kind.plural == first.kind.plural
            and other.kind.namespaced == first.kind.namespaced
            and other.singular == first.singular
            and other.short_names == first.short_names
        )
        if not same:
            raise ValueError(f"{crd}: version {other.kind.version} names a different kind")
    if len({v.kind.version for v in versions}) != len(versions):
        raise ValueError(f"{crd}: a version is declared twice")
    storage = [v for v in versions if v.storage]
    if len(storage) != 1:
        raise ValueError(f"{crd}: exactly one version must be the storage version")
    if storage[0].conversion is not None:
        raise ValueError(f"{crd}: the storage version is never converted; it has no webhook")
    if len({v.conversion for v in versions if v.conversion is not None}) > 1:
        raise ValueError(f"{crd}: a CRD has one conversion webhook")
    return storage[0]


def _conversion_of(versions: Sequence[Resource]) -> ConversionWebhook | None:
    return next((v.conversion for v in versions if v.conversion is not None), None)


def kind_versions(resources: Iterable[Resource] = RESOURCES) -> list[tuple[Resource, ...]]:
    """The resources grouped by kind (one CRD each), kinds in their first-listed order."""
    groups: dict[tuple[str, str], list[Resource]] = {}
    for resource in resources:
        groups.setdefault((resource.kind.group, resource.kind.plural), []).append(resource)
    return [tuple(group) for group in groups.values()]


def generate_crds(resources: Iterable[Resource] = RESOURCES) -> list[dict[str, Any]]:
    """The base CRDs of every resource of the project (or of ``resources``)."""
    return [generate_crd(*versions) for versions in kind_versions(resources)]


def service_client_config(conversion: ConversionWebhook) -> dict[str, Any]:
    """The in-cluster clientConfig of a conversion webhook (cert-manager injects the CA)."""
    return {
        "service": {
            "name": conversion.service_name,
            "namespace": conversion.service_namespace,
            "path": conversion.path,
        }
    }


def conversion_patch(base: dict[str, Any], converted: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch that turns the base CRD into the one with its conversion webhook.

    Each version it starts serving is first tested by name, so the patch fails loudly
    rather than serving the wrong version if the CRD's version list ever changes.
    """
    ops: list[dict[str, Any]] = [
        {"op": "add", "path": "/spec/conversion", "value": converted["spec"]["conversion"]}
    ]
    pairs = zip(base["spec"]["versions"], converted["spec"]["versions"], strict=True)
    for index, (before, after) in enumerate(pairs):
        if before["served"] != after["served"]:
            ops.append(
                {"op": "test", "path": f"/spec/versions/{index}/name", "value": after["name"]}
            )
            ops.append({"op": "replace", "path": f"/spec/versions/{index}/served", "value": True})
    return ops


def webhook_patches(
    resources: Iterable[Resource] = RESOURCES,
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(base CRD, its conversion webhook patch) for every kind that has a webhook."""
    patches = []
    for versions in kind_versions(resources):
        conversion = _conversion_of(versions)
        if conversion is None:
            continue
        base = generate_crd(*versions)
        converted = generate_crd(
            *versions, conversion_client_config=service_client_config(conversion)
        )
        patches.append((base, conversion_patch(base, converted)))
    return patches


def _printer_column(column: PrinterColumn) -> dict[str, Any]:
    rendered: dict[str, Any] = {
        "description": column.description,
        "jsonPath": column.json_path,
        "name": column.name,
        "type": column.type,
    }
    if column.priority:
        rendered["priority"] = column.priority
    return rendered
