"""A third controller on the runtime alone: keep a ConfigMap from a Deployment annotation.

A Deployment annotated ``example.com/config: '{"color": "blue"}'`` gets a ConfigMap
``<deployment>-config`` holding that data, controlled by the Deployment (garbage
collection deletes it with the Deployment); editing the annotation updates it, removing
the annotation deletes it; a Deployment being deleted is left alone, so a foreground
delete is not fought by a re-created ConfigMap. docs/writing-a-controller.md walks
through this file.
Run it against any cluster: ``python examples/config_from_annotation.py [KUBECONFIG]``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from cronjob_operator.runtime import (
    ClientInterface,
    Controller,
    Manager,
    NotFound,
    Obj,
    Options,
    Request,
    RestClient,
    Result,
    TerminalError,
    create_or_update,
    is_controlled_by,
    load_configuration,
    set_controller_reference,
)
from cronjob_operator.runtime.kinds import CONFIG_MAP, DEPLOYMENT

ANNOTATION = "example.com/config"


class ConfigFromAnnotation:
    """Reconciles one Deployment: its ConfigMap matches its annotation, or does not exist."""

    def __init__(self, client: ClientInterface) -> None:
        self.client = client

    def reconcile(self, request: Request) -> Result:
        try:
            deployment = self.client.get(DEPLOYMENT, request.name, request.namespace)
        except NotFound:
            return Result()  # deleted: garbage collection removes its ConfigMap
        if deployment["metadata"].get("deletionTimestamp"):
            return Result()  # being deleted: never re-create what the collector deletes
        name = f"{request.name}-config"
        try:
            current: Obj | None = self.client.get(CONFIG_MAP, name, request.namespace)
        except NotFound:
            current = None
        if current is not None and not is_controlled_by(current, deployment):
            raise TerminalError(f"ConfigMap {request.namespace}/{name} is not ours; rename it")
        raw = (deployment["metadata"].get("annotations") or {}).get(ANNOTATION)
        if raw is None:
            if current is not None:
                mine = current["metadata"]["uid"]
                self.client.delete(CONFIG_MAP, name, namespace=request.namespace, uid=mine)
            return Result()
        data = parse(raw, request)
        if current is None and not still_wanted(self.client, request):
            return Result()  # the cache lags a delete: a new ConfigMap would be collected

        def mutate(config_map: dict[str, Any]) -> None:
            config_map["data"] = data
            set_controller_reference(deployment, config_map)

        key = {"metadata": {"name": name, "namespace": request.namespace}}
        create_or_update(self.client, CONFIG_MAP, key, mutate)  # writes only on a change
        return Result()


def still_wanted(client: ClientInterface, request: Request) -> bool:
    """Whether the Deployment, read live, exists and is not being deleted. The cache can
    lag a foreground delete: the collector's delete of the ConfigMap brings a reconcile
    that may still see the Deployment as it was before its deletionTimestamp."""
    try:
        deployment = client.live.get(DEPLOYMENT, request.name, request.namespace)
    except NotFound:
        return False
    return not deployment["metadata"].get("deletionTimestamp")


def parse(raw: str, request: Request) -> dict[str, Any]:
    """The annotation as ConfigMap data; a ``TerminalError`` says what to fix."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise TerminalError(
            f"Deployment {request}: metadata.annotations[{ANNOTATION!r}] must be a JSON object "
            f'of strings, like {{"color": "blue"}}; got {raw!r}'
        )
    return data


def setup(manager: Manager) -> Controller:
    """Reconcile Deployments, and their Deployment again when an owned ConfigMap changes."""
    reconciler = ConfigFromAnnotation(manager.client)
    builder = manager.builder("config-from-annotation").for_(DEPLOYMENT)
    return builder.owns(CONFIG_MAP).complete(reconciler)


if __name__ == "__main__":
    rest = RestClient(load_configuration(sys.argv[1] if len(sys.argv) > 1 else None))
    manager = Manager(rest, Options(component="config-from-annotation"))
    setup(manager)
    sys.exit(manager.run())
