"""Kinds: which resource a cache, client or watch talks about, and its REST paths.

A ``Kind`` is the Python counterpart of a GroupVersionKind plus the plural resource
name (what the REST mapper would tell controller-runtime). The built-in kinds below are
the runtime's small scheme: the ones it needs itself (Leases, Events) and the common
workload kinds a controller owns or watches. An application defines its own custom kinds
beside its types (here ``cronjob_operator.api``) and passes them in.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from cronjob_operator.runtime import errors

__all__ = [
    "CONFIG_MAP",
    "DEPLOYMENT",
    "EVENT",
    "JOB",
    "LEASE",
    "NAMESPACE",
    "POD",
    "REPLICA_SET",
    "SECRET",
    "Kind",
]


@dataclass(frozen=True, slots=True)
class Kind:
    """A served resource: group, version, kind, plural and whether it is namespaced."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``group/version``, or ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def matches(self, api_version: str, kind: str) -> bool:
        """True when (apiVersion, kind) names this kind's group and kind, any version."""
        group = api_version.rpartition("/")[0]
        return group == self.group and kind == self.kind

    def collection_path(self, namespace: str | None = None) -> str:
        """The REST path of the collection, in one namespace or across all of them."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            if namespace in _DOT_SEGMENTS or "/" in namespace:
                raise errors.InvalidName(
                    f"{self._resource} in namespace {namespace!r}: no namespace has that "
                    "name (it is no path segment of its own); the request was not sent"
                )
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def object_path(self, namespace: str | None, name: str, subresource: str = "") -> str:
        """The REST path of one object (and optionally one of its subresources).

        The name is escaped as one path segment: a name read from a spec field (a CronJob's
        spec.concurrencyGroup.name, stored with the webhook out of the path) may hold
        ``/``, ``..`` or ``?``, and must not reach another path or add a query. An object
        name needs no escaping, so its path is unchanged. Escaping leaves ``.`` and
        ``..``, which urllib3 resolves (``..``: the namespace; ``.``: a LIST of the
        collection), so those raise ``errors.InvalidName`` (a ``NotFound``: no object
        can be named so) and nothing is sent.
        """
        if name in _DOT_SEGMENTS:
            raise errors.InvalidName(
                f'{self._resource} "{name}" not found: no object can be named {name!r} '
                "(urllib3 would send the request to another path); the request was not sent"
            )
        path = f"{self.collection_path(namespace)}/{quote(name, safe='')}"
        return f"{path}/{subresource}" if subresource else path

    @property
    def _resource(self) -> str:
        """``plural.group``, as the API server names a resource in its messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def __str__(self) -> str:
        return f"{self.kind}.{self.group or 'core'}/{self.version}"


_DOT_SEGMENTS = frozenset({".", ".."})
"""The path segments a URL resolves away (RFC 3986 5.2.4), which urllib3 does."""

JOB = Kind("batch", "v1", "Job", "jobs")
POD = Kind("", "v1", "Pod", "pods")
CONFIG_MAP = Kind("", "v1", "ConfigMap", "configmaps")
SECRET = Kind("", "v1", "Secret", "secrets")
EVENT = Kind("", "v1", "Event", "events")
NAMESPACE = Kind("", "v1", "Namespace", "namespaces", namespaced=False)
DEPLOYMENT = Kind("apps", "v1", "Deployment", "deployments")
REPLICA_SET = Kind("apps", "v1", "ReplicaSet", "replicasets")
LEASE = Kind("coordination.k8s.io", "v1", "Lease", "leases")
