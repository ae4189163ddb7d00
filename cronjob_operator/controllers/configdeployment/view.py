"""The view of one ConfigDeployment that a reconcile decides on, read once.

``observe`` (in ``reconciler.py``) reads the ConfigDeployment's Deployment and, when no
other owner controls it, the sources the spec names; :class:`ConfigDeploymentView` holds
what it read. The decision (``decide.decide``) reads only this, so it is a pure function
of the view. A source that is missing is recorded with the field, the name and the fix
(:func:`config_map_missing`, :func:`secret_missing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from cronjob_operator.runtime import objects

__all__ = ["ConfigDeploymentView", "MissingSource", "config_map_missing", "secret_missing"]


class MissingSource(NamedTuple):
    """A source the spec names that does not exist: the event's reason and message."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ConfigDeploymentView:
    """What one reconcile read: the ConfigDeployment, its Deployment and its sources.

    ``owned`` is False when a Deployment of the same name exists that this
    ConfigDeployment does not control; then no source was read (``content_hash`` is None
    and ``missing`` empty). Otherwise ``content_hash`` is the hash of the named sources'
    content, or None when ``missing`` names the sources that do not exist.
    """

    config_deployment: objects.Obj
    existing: objects.Obj | None
    owned: bool
    content_hash: str | None
    missing: tuple[MissingSource, ...] = ()


def config_map_missing(name: str, namespace: str) -> MissingSource:
    """The ConfigMap ``spec.configMap`` names is not in ``namespace``."""
    return MissingSource(
        "ConfigMapNotFound",
        f"spec.configMap: ConfigMap {name!r} not found in namespace {namespace!r}; "
        "create it there or point spec.configMap at an existing ConfigMap",
    )


def secret_missing(position: int, name: str, namespace: str) -> MissingSource:
    """The Secret ``spec.secrets[position]`` names is not in ``namespace``."""
    return MissingSource(
        "SecretNotFound",
        f"spec.secrets[{position}].name: Secret {name!r} not found in namespace "
        f"{namespace!r}; create it there or remove it from spec.secrets",
    )
