"""The ConfigDeployment reconciler: a Deployment that rolls when its ConfigMap's content changes.

The kubebuilder book's "Watching Externally Managed Resources" example written out in
full (docs/configdeployment.md). The controller owns one Deployment per
ConfigDeployment and writes a hash of the named ConfigMap's content into its pod
template, so a content change rolls out new pods. The ConfigMap is only read: its
events reach the ConfigDeployments that name it through the ``.spec.configMap`` field
index of the cache (never a list of all ConfigDeployments), filtered by
ResourceVersionChanged. The pure rules (hash, desired Deployment, what counts as a
change, status) live in ``configdeployment_state``; this module does the reads, writes
and events around them.

Errors: a missing ConfigMap is reported (Warning event, ``Degraded``) and *not* polled:
creating it later triggers the reconcile through the watch and the index; meanwhile an
existing Deployment is left untouched, running with its last hash. A Deployment of the
same name that this ConfigDeployment does not control is never touched (Warning event,
``Degraded``). A Deployment the API server rejects as invalid is reported and retried
on the next change. Other API failures raise, so the controller retries with backoff.
A reconcile that finds nothing to do makes no API writes: the Deployment is compared
on the fields we own only, and the status is written only when it changed.

RBAC this code needs (mirrored in config/rbac/role.yaml):
configdeployments get/list/watch, configdeployments/status get/update;
deployments get/list/watch/create/update; configmaps get/list/watch;
events create/patch.
"""

from __future__ import annotations

import logging
from typing import Any

from cronjob_operator.api.apps_v1 import CONFIG_DEPLOYMENT
from cronjob_operator.controllers import configdeployment_state as state
from cronjob_operator.runtime import controllerutil, errors, objects
from cronjob_operator.runtime.client import ClientInterface, Reader
from cronjob_operator.runtime.clock import Clock, utc_now
from cronjob_operator.runtime.controller import Controller
from cronjob_operator.runtime.events import Recorder
from cronjob_operator.runtime.handlers import MapFunc
from cronjob_operator.runtime.kinds import CONFIG_MAP, DEPLOYMENT
from cronjob_operator.runtime.manager import Manager
from cronjob_operator.runtime.predicates import resource_version_changed
from cronjob_operator.runtime.reconcile import Request, Result
from cronjob_operator.runtime.status import write_status

__all__ = [
    "CONFIG_MAP_INDEX",
    "ConfigDeploymentReconciler",
    "config_map_index",
    "config_map_requests",
    "setup",
]

log = logging.getLogger(__name__)

CONFIG_MAP_INDEX = ".spec.configMap"


def config_map_index(config_deployment: objects.Obj) -> list[str]:
    """The ``.spec.configMap`` index: the name of the ConfigMap a ConfigDeployment reads."""
    name = (config_deployment.get("spec") or {}).get("configMap")
    return [str(name)] if name else []


def config_map_requests(reader: Reader) -> MapFunc:
    """Map a ConfigMap to the ConfigDeployments in its namespace that name it (via the index).

    Raises ``cache.UnindexedFieldError`` if ``CONFIG_MAP_INDEX`` was not registered.
    """

    def requests(config_map: objects.Obj) -> list[Request]:
        namespace = objects.namespace_of(config_map)
        users = reader.list(
            CONFIG_DEPLOYMENT,
            namespace=namespace,
            matching_fields={CONFIG_MAP_INDEX: objects.name_of(config_map)},
        )
        return [Request(namespace, objects.name_of(user)) for user in users]

    return requests


class ConfigDeploymentReconciler:
    """Reconciles one ConfigDeployment per call; see the module docstring."""

    def __init__(
        self, client: ClientInterface, recorder: Recorder, *, clock: Clock = utc_now
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._clock = clock

    def reconcile(self, request: Request) -> Result:
        try:
            config_deployment = self._client.get(CONFIG_DEPLOYMENT, request.name, request.namespace)
        except errors.NotFound:
            return Result()  # deleted: garbage collection removes its Deployment
        if config_deployment["metadata"].get("deletionTimestamp"):
            return Result()
        deployment, problem = self._sync_deployment(config_deployment)
        status = objects.thaw(config_deployment.get("status") or {})
        state.update_status(
            status,
            generation=int(config_deployment["metadata"].get("generation") or 0),
            deployment=deployment,
            problem=problem,
            now=self._clock(),
        )
        write_status(self._client, CONFIG_DEPLOYMENT, config_deployment, status)
        return Result()

    def _sync_deployment(
        self, config_deployment: objects.Obj
    ) -> tuple[objects.Obj | None, state.Problem | None]:
        """Create or update the Deployment; returns the one we manage (if any) and a problem."""
        metadata = config_deployment["metadata"]
        try:
            existing: objects.Obj | None = self._client.get(
                DEPLOYMENT, metadata["name"], metadata["namespace"]
            )
        except errors.NotFound:
            existing = None
        if existing is not None and not controllerutil.is_controlled_by(
            existing, config_deployment
        ):
            return None, self._not_ours(config_deployment)
        config_map_name = str((config_deployment.get("spec") or {}).get("configMap") or "")
        try:
            config_map = self._client.get(CONFIG_MAP, config_map_name, metadata["namespace"])
        except errors.NotFound:
            return existing, self._config_map_missing(config_deployment, config_map_name, existing)
        desired = state.desired_deployment(config_deployment, state.config_hash(config_map))
        if existing is None:
            return self._create(config_deployment, desired)
        if not state.needs_update(existing, desired):
            return existing, None
        return self._update(config_deployment, existing, desired)

    def _create(
        self, config_deployment: objects.Obj, desired: dict[str, Any]
    ) -> tuple[objects.Obj | None, state.Problem | None]:
        name = desired["metadata"]["name"]
        content_hash = state.rolled_out_hash(desired) or ""
        try:
            created: objects.Obj = self._client.create(DEPLOYMENT, desired)
        except errors.AlreadyExists:
            # The cache has not seen it yet: read it live and go on from there.
            existing = self._client.live.get(DEPLOYMENT, name, desired["metadata"]["namespace"])
            if not controllerutil.is_controlled_by(existing, config_deployment):
                return None, self._not_ours(config_deployment)
            if not state.needs_update(existing, desired):
                return existing, None
            return self._update(config_deployment, existing, desired)
        except errors.Invalid as exc:
            return None, self._rejected(config_deployment, "FailedCreate", name, exc)
        self._recorder.event(
            config_deployment,
            "Normal",
            "DeploymentCreated",
            f"Created Deployment {name} with config hash {state.short_hash(content_hash)}",
        )
        return created, None

    def _update(
        self, config_deployment: objects.Obj, existing: objects.Obj, desired: dict[str, Any]
    ) -> tuple[objects.Obj | None, state.Problem | None]:
        name = desired["metadata"]["name"]
        old_hash = state.rolled_out_hash(existing) or ""
        new_hash = state.rolled_out_hash(desired) or ""
        try:
            updated: objects.Obj = self._client.update(
                DEPLOYMENT, state.updated_deployment(existing, desired)
            )
        except errors.Invalid as exc:
            return existing, self._rejected(config_deployment, "FailedUpdate", name, exc)
        if old_hash != new_hash:
            self._recorder.event(
                config_deployment,
                "Normal",
                "RolledOut",
                f"Rolling out Deployment {name}: config hash "
                f"{state.short_hash(old_hash) or '<none>'} -> {state.short_hash(new_hash)}",
            )
        else:
            self._recorder.event(
                config_deployment, "Normal", "DeploymentUpdated", f"Updated Deployment {name}"
            )
        return updated, None

    def _config_map_missing(
        self, config_deployment: objects.Obj, config_map: str, existing: objects.Obj | None
    ) -> state.Problem:
        namespace = config_deployment["metadata"]["namespace"]
        kept = (
            f"; Deployment {objects.name_of(existing)} keeps running with config hash "
            f"{state.short_hash(state.rolled_out_hash(existing) or '') or '<none>'}"
            if existing is not None
            else ""
        )
        message = (
            f"spec.configMap: ConfigMap {config_map!r} not found in namespace {namespace!r}; "
            f"create it there or point spec.configMap at an existing ConfigMap{kept}"
        )
        self._recorder.event(config_deployment, "Warning", "ConfigMapNotFound", message)
        return state.Problem("ConfigMapNotFound", message)

    def _not_ours(self, config_deployment: objects.Obj) -> state.Problem:
        metadata = config_deployment["metadata"]
        message = (
            f"Deployment {metadata['namespace']}/{metadata['name']} exists and is not "
            "controlled by this ConfigDeployment; not touching it. Delete or rename it, "
            "or rename the ConfigDeployment"
        )
        self._recorder.event(config_deployment, "Warning", "DeploymentNotOwned", message)
        return state.Problem("DeploymentNotOwned", message)

    def _rejected(
        self, config_deployment: objects.Obj, reason: str, name: str, exc: errors.Invalid
    ) -> state.Problem:
        message = f"spec.template: the API server rejected Deployment {name}: {exc.message}"
        self._recorder.event(config_deployment, "Warning", reason, message)
        return state.Problem("InvalidTemplate", message)


def setup(manager: Manager, *, clock: Clock = utc_now) -> Controller:
    """Register the ``.spec.configMap`` index and the ConfigDeployment controller.

    The ConfigDeployment watch has no predicate: the watch event of the controller's
    own status write comes back as one more reconcile (a no-op that writes nothing when
    all is in line). That reconcile is what corrects a status computed against a stale
    cache (one not yet holding the previous status write: the write is skipped as
    "unchanged", or a Conflict merge keeps the newer value of a field); with a
    GenerationChanged filter the last status of a rollout could stay wrong.
    """
    manager.cache.index_field(CONFIG_DEPLOYMENT, CONFIG_MAP_INDEX, config_map_index)
    reconciler = ConfigDeploymentReconciler(manager.client, manager.recorder, clock=clock)
    return (
        manager.builder("configdeployment")
        .for_(CONFIG_DEPLOYMENT)
        .owns(DEPLOYMENT)
        .watches(CONFIG_MAP, config_map_requests(manager.client), resource_version_changed())
        .complete(reconciler)
    )
