"""The Secrets a ConfigDeployment names, read one by one: the manager never lists Secret data.

The manager's Secret informer is metadata-only (``PartialObjectMetadata``) and keeps only
each Secret's name, namespace, uid, resourceVersion and timestamps
(``sources.metadata_only``): enough to learn that a Secret changed (its
watch event reaches the ConfigDeployments that name it through the ``.spec.secrets``
index) and nothing of its content. The API server never sends the manager a Secret's
``data`` on that list and watch; it does send its labels and annotations, which the
transform drops on arrival (a Secret made with client-side ``kubectl apply`` carries a
copy of its data in the ``last-applied-configuration`` annotation: it is never kept).

A reconcile that needs a named Secret's digest asks ``NamedSecrets.digest``: it reads
the Secret itself (one live GET of that name), reduces it at once to its per-key digests
(``sources.digest_secret``) and keeps that digest under the Secret's
resourceVersion. Later reconciles reuse it while the metadata cache shows the same
resourceVersion, so a steady ConfigDeployment costs no request; a change costs one GET
per changed Secret that a ConfigDeployment names. So only the Secrets some
ConfigDeployment names are ever read, and only their digests are kept: at most one per
Secret ever named, dropped when the informer sees it deleted (a Secret no longer named
keeps its digest until then; the informer holds that Secret's metadata anyway, and the
schema bounds a ConfigDeployment to 16 Secrets). docs/security.md says why.
"""

from __future__ import annotations

import threading

from cronjob_operator.controllers.configdeployment import sources
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.cache import store_key
from cronjob_operator.runtime.client import ClientInterface
from cronjob_operator.runtime.kinds import SECRET

__all__ = ["NamedSecrets"]


def _resource_version(obj: objects.Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class NamedSecrets:
    """Digests of the Secrets ConfigDeployments name, read by name (module doc).

    Also the Secret informer's event handler: a deleted Secret's digest is dropped.
    """

    def __init__(self, client: ClientInterface) -> None:
        self._client = client
        self._digests: dict[str, objects.Obj] = {}
        self._lock = threading.Lock()

    def digest(self, name: str, namespace: str) -> objects.Obj | None:
        """The digested Secret ``namespace/name`` (``digest_secret``), or None when the
        cache or the API server has no such Secret."""
        key = store_key(SECRET, name, namespace)
        try:
            seen = self._client.get(SECRET, name, namespace)
        except errors.NotFound:
            self._forget(key)
            return None
        with self._lock:
            kept = self._digests.get(key)
        if kept is not None and _resource_version(kept) == _resource_version(seen):
            return kept
        try:
            secret = self._client.live.get(SECRET, name, namespace)
        except errors.NotFound:
            self._forget(key)
            return None
        digested: objects.Obj = objects.freeze(sources.digest_secret(secret))
        with self._lock:
            self._digests[key] = digested
        return digested

    @property
    def kept(self) -> int:
        """How many digests are kept (one per Secret read and not seen deleted)."""
        with self._lock:
            return len(self._digests)

    def _forget(self, key: str) -> None:
        with self._lock:
            self._digests.pop(key, None)

    def on_add(self, obj: objects.Obj) -> None:
        """A new Secret: nothing kept of it yet."""

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
        """A changed Secret: ``digest`` sees the new resourceVersion and reads it again."""

    def on_delete(self, obj: objects.Obj) -> None:
        """A deleted Secret: drop its digest."""
        self._forget(objects.object_key(obj))
