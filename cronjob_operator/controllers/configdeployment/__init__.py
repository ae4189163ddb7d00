"""The ConfigDeployment controller, as read, decide, act.

``reconciler`` reads the ConfigDeployment, its Deployment and the sources it names,
decides with the pure rules of ``decide`` (the desired Deployment, whether the live one
needs a write, the status) and writes the result. ``sources`` holds what is read (the
sources a spec names, the cache's digests of them, the content hash) and ``secrets``
reads each named Secret by name and keeps only its digest. docs/configdeployment.md has
the details.
"""

from cronjob_operator.controllers.configdeployment.decide import CONFIG_HASH_ANNOTATION
from cronjob_operator.controllers.configdeployment.reconciler import (
    CONFIG_MAP_INDEX,
    SECRETS_INDEX,
    ConfigDeploymentReconciler,
    config_map_index,
    config_map_requests,
    secret_requests,
    setup,
)

__all__ = [
    "CONFIG_HASH_ANNOTATION",
    "CONFIG_MAP_INDEX",
    "SECRETS_INDEX",
    "ConfigDeploymentReconciler",
    "config_map_index",
    "config_map_requests",
    "secret_requests",
    "setup",
]
