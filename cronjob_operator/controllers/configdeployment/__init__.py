"""The ConfigDeployment controller, as observe, decide, act.

``reconciler`` observes (the ConfigDeployment, its Deployment and the sources it names,
read into ``view``), asks ``decide`` for the Plan (create, update or keep the
Deployment, or the problem that stops it; the desired Deployment and the status rules)
and applies it. ``sources`` holds what is read (the sources a spec names, the cache's
digests of them, the content hash), ``secrets`` reads each named Secret by name and
keeps only its digest, and ``watches`` holds the indexes by which a source's event
reaches the ConfigDeployments that name it. docs/configdeployment.md has the details.
"""

from cronjob_operator.controllers.configdeployment.decide import CONFIG_HASH_ANNOTATION
from cronjob_operator.controllers.configdeployment.reconciler import (
    ConfigDeploymentReconciler,
    setup,
)
from cronjob_operator.controllers.configdeployment.watches import (
    CONFIG_MAP_INDEX,
    SECRETS_INDEX,
    config_map_index,
    config_map_requests,
    secret_requests,
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
