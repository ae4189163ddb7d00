"""How a ConfigMap's or Secret's event reaches the ConfigDeployments that name it.

The cache indexes ConfigDeployments by the ConfigMap (``CONFIG_MAP_INDEX``) and the
Secrets (``SECRETS_INDEX``, by ``sources.secret_names``) they name, and the map
functions look a source's name up in its namespace: an event never lists every
ConfigDeployment. ``reconciler.setup`` registers both indexes and watches; this module
holds them apart from the reconcile, as ``cronjob.jobs`` holds the Job owner index.
"""

from __future__ import annotations

from cronjob_operator.api.apps_v1 import CONFIG_DEPLOYMENT
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.client import Reader
from cronjob_operator.runtime.controller import MapFunc, Request

__all__ = [
    "CONFIG_MAP_INDEX",
    "SECRETS_INDEX",
    "config_map_index",
    "config_map_requests",
    "secret_requests",
]

CONFIG_MAP_INDEX = ".spec.configMap"
SECRETS_INDEX = ".spec.secrets"


def config_map_index(config_deployment: objects.Obj) -> list[str]:
    """The ``.spec.configMap`` index: the name of the ConfigMap a ConfigDeployment reads."""
    name = (config_deployment.get("spec") or {}).get("configMap")
    return [str(name)] if name else []


def _users(reader: Reader, index: str) -> MapFunc:
    """Map a source to the ConfigDeployments in its namespace whose ``index`` names it."""

    def requests(source: objects.Obj) -> list[Request]:
        namespace = objects.namespace_of(source)
        users = reader.list(
            CONFIG_DEPLOYMENT,
            namespace=namespace,
            matching_fields={index: objects.name_of(source)},
        )
        return [Request(namespace, objects.name_of(user)) for user in users]

    return requests


def config_map_requests(reader: Reader) -> MapFunc:
    """Map a ConfigMap to the ConfigDeployments in its namespace that name it (via the index).

    Raises ``cache.UnindexedFieldError`` if ``CONFIG_MAP_INDEX`` was not registered.
    """
    return _users(reader, CONFIG_MAP_INDEX)


def secret_requests(reader: Reader) -> MapFunc:
    """Map a Secret to the ConfigDeployments in its namespace that name it (via the index).

    Raises ``cache.UnindexedFieldError`` if ``SECRETS_INDEX`` was not registered.
    """
    return _users(reader, SECRETS_INDEX)
