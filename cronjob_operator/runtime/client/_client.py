"""The client controllers use: reads from the informer cache, writes to the API server.

This is controller-runtime's split client. ``Reader`` is the read interface that both
the cache and the uncached ``LiveReader`` implement; ``LiveReads`` adds the LIST of
metadata only that only the server can answer (client-go's metadata client); ``Writer``
sends create, update, patch, delete and status writes through the ``RestClient``;
``Client`` puts a cached reader and a writer together and offers ``live`` for the rare
read that must be fresh.
Objects read from the cache are frozen (see ``objects``); writes take plain dicts.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.client._rest import JSON, METADATA_LIST, RestClient
from cronjob_operator.runtime.kinds import Kind


class PatchType(enum.StrEnum):
    """The patch formats the API server accepts, as their content types."""

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"
    """Server-side apply (JSON is YAML); use ``apply``, which names the field manager."""


class Propagation(enum.StrEnum):
    """Delete propagation policies."""

    BACKGROUND = "Background"
    FOREGROUND = "Foreground"
    ORPHAN = "Orphan"


class Reader(Protocol):
    """Reads objects of a kind; the cache serves these from memory."""

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
        """The object, or ``errors.NotFound``."""
        ...

    def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        matching_fields: Mapping[str, str] | None = None,
        label_selector: str | Mapping[str, str] | None = None,
    ) -> list[objects.Obj]:
        """Objects in ``namespace`` (all when None) that match the fields and labels."""
        ...


class LiveReads(Reader, Protocol):
    """The reads that go to the API server: ``Reader``'s, a LIST of metadata only, and
    the first page of a LIST."""

    def list_metadata(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
    ) -> list[objects.Obj]:
        """As ``list``, each object reduced to its metadata by the server (as the kind it
        is of; ``PartialObjectMetadata`` on the wire): a LIST of many large objects, Jobs
        with their pod templates, for their names and owners only."""
        ...

    def list_page(
        self,
        kind: Kind,
        *,
        limit: int,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> list[objects.Obj]:
        """At most ``limit`` objects, in the server's order (by name): one page of a LIST,
        the rest never asked for, so what it costs is bounded by ``limit`` whatever the
        collection holds (a tenant's Job may have thousands of Pods, each up to the
        object size limit). ``field_selector`` is the server's (``status.phase!=Pending``,
        on the fields the kind supports); ``metadata_only`` as ``list_metadata``."""
        ...


class ObjectWriter(Protocol):
    """The object writes (``Writer`` has them; so can a test double)."""

    def create(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``obj``; ``AlreadyExists`` if its name is taken."""
        ...

    def update(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Replace ``obj``; a stale ``resourceVersion`` raises ``Conflict``."""
        ...

    def patch(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str = "",
    ) -> dict[str, Any]:
        """Patch one object (or a subresource of it)."""
        ...


class Applier(Protocol):
    """Server-side apply: the object as this field manager wants it, merged by the server.

    The server sets the fields ``obj`` names and records ``field_manager`` as their
    owner; a field this manager applied before and now leaves out is removed (unless
    another manager owns it); a field another manager owns with a different value is a
    ``Conflict``, unless ``force`` (then ownership moves to this manager). A missing
    object is created. ``obj`` needs apiVersion, kind, metadata.name (and namespace).
    """

    def apply(
        self, kind: Kind, obj: Mapping[str, Any], *, field_manager: str, force: bool = False
    ) -> dict[str, Any]:
        """Apply ``obj`` (without its status)."""
        ...

    def apply_status(
        self, kind: Kind, obj: Mapping[str, Any], *, field_manager: str, force: bool = False
    ) -> dict[str, Any]:
        """Apply the status of ``obj`` through the status subresource."""
        ...


class ClientInterface(Reader, ObjectWriter, Applier, Protocol):
    """Everything a reconciler asks of its client, as controller-runtime's ``client.Client``
    interface: ``Client`` implements it against the API server, ``fake.FakeClient`` in
    memory. Annotate a reconciler's client with this, so either can be passed (and mypy
    checks both)."""

    @property
    def live(self) -> LiveReads:
        """Reads that go to the API server (uncached), for the rare read that must be fresh."""
        ...

    def update_status(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the status subresource of ``obj``; stale versions raise ``Conflict``."""
        ...

    def patch_status(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
    ) -> dict[str, Any]:
        """Patch the status subresource."""
        ...

    def delete(
        self,
        kind: Kind,
        name: str,
        *,
        namespace: str | None = None,
        propagation: Propagation | None = None,
        uid: str | None = None,
    ) -> None:
        """Delete one object; with ``uid``, only if it is still that object."""
        ...


def not_found(kind: Kind, name: str, namespace: str | None) -> errors.NotFound:
    """The NotFound error the API server would have sent for this object."""
    where = f"{namespace}/{name}" if namespace else name
    status = {
        "kind": "Status",
        "status": "Failure",
        "reason": "NotFound",
        "message": f'{kind.plural}.{kind.group or "core"} "{where}" not found',
        "details": {"name": name, "group": kind.group, "kind": kind.plural},
        "code": 404,
    }
    return errors.NotFound(status, code=404)


class LiveReader:
    """An uncached ``Reader`` that asks the API server every time (``LiveReads``)."""

    def __init__(self, rest: RestClient) -> None:
        self._rest = rest

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
        return self._rest.request("GET", kind.object_path(namespace, name))  # type: ignore[no-any-return]

    def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        matching_fields: Mapping[str, str] | None = None,
        label_selector: str | Mapping[str, str] | None = None,
    ) -> list[objects.Obj]:
        params = _selection(label_selector)
        if matching_fields:
            params["fieldSelector"] = ",".join(f"{k}={v}" for k, v in matching_fields.items())
        return self._pages(kind, namespace, params, JSON)

    def list_metadata(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
    ) -> builtins.list[objects.Obj]:
        items = self._pages(kind, namespace, _selection(label_selector), METADATA_LIST)
        return _as_kind(kind, items)

    def list_page(
        self,
        kind: Kind,
        *,
        limit: int,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> builtins.list[objects.Obj]:
        if limit < 1:
            raise ValueError(f"list_page: limit must be at least 1, not {limit}")
        params = {**_selection(label_selector), "limit": limit}
        if field_selector:
            params["fieldSelector"] = field_selector
        accept = METADATA_LIST if metadata_only else JSON
        page = self._rest.request(
            "GET", kind.collection_path(namespace), params=params, accept=accept
        )
        items: builtins.list[objects.Obj] = (page.get("items") or [])[:limit]
        return _as_kind(kind, items) if metadata_only else items

    def _pages(
        self, kind: Kind, namespace: str | None, params: dict[str, Any], accept: str
    ) -> builtins.list[objects.Obj]:
        """Every item of a LIST, page by page (500 per page)."""
        items: builtins.list[objects.Obj] = []
        while True:
            page = self._rest.request(
                "GET", kind.collection_path(namespace), params=params, accept=accept
            )
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            params["continue"] = token


def _as_kind(kind: Kind, items: list[objects.Obj]) -> list[objects.Obj]:
    """PartialObjectMetadata items, each returned as the kind it is of."""
    return [{**item, "apiVersion": kind.api_version, "kind": kind.kind} for item in items]


def _selection(label_selector: str | Mapping[str, str] | None) -> dict[str, Any]:
    """A LIST's first-page parameters: the page size and the label selector."""
    params: dict[str, Any] = {"limit": 500}
    if label_selector:
        params["labelSelector"] = (
            label_selector
            if isinstance(label_selector, str)
            else ",".join(f"{k}={v}" for k, v in label_selector.items())
        )
    return params


class Writer:
    """Writes to the API server. Every method raises the typed ``ApiError`` on failure."""

    def __init__(self, rest: RestClient) -> None:
        self._rest = rest

    def create(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``obj`` (its namespace is taken from its metadata)."""
        body = _with_type(kind, obj)
        path = kind.collection_path(objects.namespace_of(obj) or None)
        return self._rest.request("POST", path, body=body)  # type: ignore[no-any-return]

    def update(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Replace ``obj``; a stale ``resourceVersion`` raises ``Conflict``."""
        return self._put(kind, obj, "")

    def update_status(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the status subresource of ``obj``; stale versions raise ``Conflict``."""
        return self._put(kind, obj, "status")

    def patch(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str = "",
    ) -> dict[str, Any]:
        """Patch one object (or its status, with ``subresource="status"``)."""
        path = kind.object_path(namespace, name, subresource)
        return self._rest.request("PATCH", path, body=patch, content_type=patch_type.value)  # type: ignore[no-any-return]

    def patch_status(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
    ) -> dict[str, Any]:
        """Patch the status subresource."""
        return self.patch(
            kind, name, patch, namespace=namespace, patch_type=patch_type, subresource="status"
        )

    def delete(
        self,
        kind: Kind,
        name: str,
        *,
        namespace: str | None = None,
        propagation: Propagation | None = None,
        uid: str | None = None,
    ) -> None:
        """Delete one object; with ``uid``, only if it is still that object (else Conflict)."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation is not None:
            options["propagationPolicy"] = propagation.value
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        self._rest.request("DELETE", kind.object_path(namespace, name), body=options)

    def apply(
        self, kind: Kind, obj: Mapping[str, Any], *, field_manager: str, force: bool = False
    ) -> dict[str, Any]:
        """Server-side apply of ``obj`` as ``field_manager`` (see ``Applier``)."""
        return self._apply(kind, obj, "", field_manager=field_manager, force=force)

    def apply_status(
        self, kind: Kind, obj: Mapping[str, Any], *, field_manager: str, force: bool = False
    ) -> dict[str, Any]:
        """Server-side apply of ``obj``'s status as ``field_manager`` (see ``Applier``)."""
        return self._apply(kind, obj, "status", field_manager=field_manager, force=force)

    def _apply(
        self,
        kind: Kind,
        obj: Mapping[str, Any],
        subresource: str,
        *,
        field_manager: str,
        force: bool,
    ) -> dict[str, Any]:
        path = kind.object_path(
            objects.namespace_of(obj) or None, objects.name_of(obj), subresource
        )
        params = {"fieldManager": field_manager, "force": force or None}
        return self._rest.request(  # type: ignore[no-any-return]
            "PATCH",
            path,
            params=params,
            body=_with_type(kind, obj),
            content_type=PatchType.APPLY.value,
        )

    def _put(self, kind: Kind, obj: Mapping[str, Any], subresource: str) -> dict[str, Any]:
        path = kind.object_path(
            objects.namespace_of(obj) or None, objects.name_of(obj), subresource
        )
        return self._rest.request("PUT", path, body=_with_type(kind, obj))  # type: ignore[no-any-return]


class Client(Writer):
    """The controller's client: ``get``/``list`` from ``reader`` (the cache), writes live."""

    def __init__(self, rest: RestClient, reader: Reader) -> None:
        super().__init__(rest)
        self._reader = reader
        self.live = LiveReader(rest)

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
        return self._reader.get(kind, name, namespace)

    def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        matching_fields: Mapping[str, str] | None = None,
        label_selector: str | Mapping[str, str] | None = None,
    ) -> list[objects.Obj]:
        return self._reader.list(
            kind,
            namespace=namespace,
            matching_fields=matching_fields,
            label_selector=label_selector,
        )


def _with_type(kind: Kind, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    if obj.get("apiVersion") and obj.get("kind"):
        return obj
    return {**obj, "apiVersion": kind.api_version, "kind": kind.kind}


if TYPE_CHECKING:  # mypy proves the real client satisfies the interface

    def _implements_interface(client: Client) -> ClientInterface:
        return client
