"""What a ConfigDeployment rolls on: its sources, the cache's digest of them, and the hash.

A ConfigDeployment names one ConfigMap (``spec.configMap``, optionally only some of its
keys, ``spec.configMapKeys``) and any number of Secrets (``spec.secrets``, each with an
optional ``keys`` filter). This module holds the pure rules; ``reconciler`` reads
and writes around them.

**Digests, never content.** ``digest_config_map`` is the manager cache's transform for
ConfigMaps, ``metadata_only`` its transform for the metadata-only Secret informer, and
``digest_secret`` what ``secrets`` keeps of a Secret a ConfigDeployment
names, read by name: each object is reduced, as it arrives, to the metadata the
controller uses (name, namespace, uid, resourceVersion and timestamps) and one digest per
key. So a Secret's value never stays in the operator's memory (nor can it reach a log
line or an event: there is nothing to print), and a cluster's unrelated ConfigMaps cost
their metadata only (``bench/configmap_cache.py`` measures it). Every reader of
ConfigMaps and Secrets through the manager's cache sees these reductions; the controller
is the only one.

* A ConfigMap key's digest is the sha256 of its value (``data`` and ``binaryData``; keys
  are unique across both). The transform also keeps ``CONTENT_HASH``: the sha256 of the
  canonical JSON of the whole ``data`` and ``binaryData``, which is the hash this
  controller has always written into the pod template.
* A Secret key's digest is an HMAC-SHA256 of its (base64) value keyed by the Secret's
  uid. The pod template is readable by many who may not read Secrets; a plain sha256 of a
  short value (a PIN, "true") could be found by trying values. Recreating a Secret gives
  it a new uid, so it rolls once even with the same content.

**The hash in the pod template** (``content_hash``) is, for a ConfigDeployment that names
only a ConfigMap and no key filter (every ConfigDeployment before ``spec.secrets``
existed), exactly ``CONTENT_HASH``: upgrading the operator changes no pod template, so
rolls nothing. Any other combination hashes the canonical JSON of the selected digests of
each source (a named key that is absent counts as ``null``, so its appearance rolls), so
only a change of a selected key of a named source changes it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cronjob_operator.runtime import objects
from cronjob_operator.runtime.client import canonical_json

__all__ = [
    "CONTENT_HASH",
    "KEY_DIGESTS",
    "Source",
    "Sources",
    "content_hash",
    "digest_config_map",
    "digest_secret",
    "metadata_only",
    "secret_names",
    "sources_of",
    "whole_content_hash",
]

CONTENT_HASH = "contentHash"
"""The field of a digested ConfigMap that holds its whole-content hash."""
KEY_DIGESTS = "keyDigests"
"""The field of a digested ConfigMap or Secret that maps each key to its digest."""
_KEPT_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
)


def whole_content_hash(config_map: Mapping[str, Any]) -> str:
    """The sha256 hex digest of a (full) ConfigMap's ``data`` and ``binaryData``."""
    content = {
        "binaryData": config_map.get("binaryData") or {},
        "data": config_map.get("data") or {},
    }
    return hashlib.sha256(canonical_json(content)).hexdigest()


def metadata_only(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj``'s apiVersion, kind and the metadata the controller reads; nothing else."""
    metadata = obj.get("metadata") or {}
    slim: dict[str, Any] = {key: obj[key] for key in ("apiVersion", "kind") if key in obj}
    slim["metadata"] = {key: metadata[key] for key in _KEPT_METADATA if key in metadata}
    return slim


def digest_config_map(config_map: dict[str, Any]) -> dict[str, Any]:
    """Cache transform: a ConfigMap's metadata, whole-content hash and per-key sha256."""
    values = {**(config_map.get("binaryData") or {}), **(config_map.get("data") or {})}
    slim = metadata_only(config_map)
    slim[CONTENT_HASH] = whole_content_hash(config_map)
    slim[KEY_DIGESTS] = {
        key: hashlib.sha256(str(value).encode()).hexdigest() for key, value in values.items()
    }
    return slim


def digest_secret(secret: Mapping[str, Any]) -> dict[str, Any]:
    """Cache transform: a Secret's metadata and per-key HMAC keyed by its uid (no value)."""
    slim = metadata_only(secret)
    uid = str(slim["metadata"].get("uid") or "").encode()
    slim[KEY_DIGESTS] = {
        key: hmac.new(uid, str(value).encode(), hashlib.sha256).hexdigest()
        for key, value in (secret.get("data") or {}).items()
    }
    return slim


@dataclass(frozen=True, slots=True)
class Source:
    """One ConfigMap or Secret a ConfigDeployment reads, and the keys it rolls on."""

    name: str
    keys: tuple[str, ...] | None = None
    """Only these keys count; None: every key."""


@dataclass(frozen=True, slots=True)
class Sources:
    """Everything a ConfigDeployment rolls on."""

    config_map: Source | None
    secrets: tuple[Source, ...] = ()

    @property
    def whole_config_map_only(self) -> bool:
        """The original form (one ConfigMap, every key): its hash is ``CONTENT_HASH``."""
        return self.config_map is not None and self.config_map.keys is None and not self.secrets


def _keys(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(str(key) for key in value)


def sources_of(config_deployment: objects.Obj) -> Sources:
    """The sources named by a ConfigDeployment's spec. It also feeds the ``.spec.secrets``
    index, on the informer's thread, before the reconciler checks the object against its
    schema (``controllers.stored``): a spec or an entry of another shape names nothing."""
    spec = _mapping(config_deployment.get("spec"))
    name = spec.get("configMap")
    config_map = Source(str(name), _keys(spec.get("configMapKeys"))) if name else None
    listed = spec.get("secrets")
    secrets = tuple(
        Source(str(secret["name"]), _keys(secret.get("keys")))
        for secret in (listed if isinstance(listed, list | tuple) else ())
        if isinstance(secret, Mapping) and secret.get("name")
    )
    return Sources(config_map, secrets)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def secret_names(config_deployment: objects.Obj) -> list[str]:
    """The names of the Secrets a ConfigDeployment reads (its ``.spec.secrets`` index)."""
    return [source.name for source in sources_of(config_deployment).secrets]


def _selected(digested: objects.Obj, keys: tuple[str, ...] | None) -> dict[str, str | None]:
    digests: Mapping[str, str] = digested.get(KEY_DIGESTS) or {}
    if keys is None:
        return dict(digests)
    return {key: digests.get(key) for key in keys}


def content_hash(
    sources: Sources, config_map: objects.Obj | None, secrets: Mapping[str, objects.Obj]
) -> str:
    """The hash written into the pod template, from the digested sources (module doc).

    ``config_map`` is the digested ConfigMap (None when ``sources`` names none) and
    ``secrets`` the digested Secrets by name; every source named must be there.
    """
    if sources.whole_config_map_only and config_map is not None:
        return str(config_map[CONTENT_HASH])
    document = {
        "configMap": (
            None
            if sources.config_map is None or config_map is None
            else _selected(config_map, sources.config_map.keys)
        ),
        "secrets": {
            source.name: _selected(secrets[source.name], source.keys) for source in sources.secrets
        },
    }
    return hashlib.sha256(canonical_json(document)).hexdigest()
