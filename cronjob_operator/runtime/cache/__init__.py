"""The informer cache: list+watch of each kind into an indexed in-memory store.

``Cache`` holds one shared ``Informer`` per kind and serves reads from memory with
controller-runtime's field indexes; per-kind options (``KindOptions``: label and field
selectors, namespaces, a transform, metadata only) choose what each informer lists and
watches. ``Store``, ``lookup`` and ``select`` are the read semantics the fake client
shares.

Machinery: ``_reflector`` (streamed sync or list, watch, bookmarks, relists),
``_informer`` (a buffer and thread per handler), ``_store`` (the indexed store),
``_labels`` (selector parsing), ``_cache`` (the cache over them).
"""

from cronjob_operator.runtime.cache._cache import (
    ALL_NAMESPACES,
    Cache,
    CacheSyncTimeoutError,
    FieldIndexFunc,
    KindOptions,
    UnindexedFieldError,
    add_field_index,
    field_index_name,
    lookup,
    select,
    store_key,
)
from cronjob_operator.runtime.cache._informer import EventHandler, Informer
from cronjob_operator.runtime.cache._labels import LabelMatcher, parse_selector
from cronjob_operator.runtime.cache._reflector import (
    Backoff,
    EventSink,
    Reflector,
    SkipReporter,
    Transform,
    strip_managed_fields,
)
from cronjob_operator.runtime.cache._store import NAMESPACE_INDEX, IndexFunc, Store

__all__ = [
    "ALL_NAMESPACES",
    "NAMESPACE_INDEX",
    "Backoff",
    "Cache",
    "CacheSyncTimeoutError",
    "EventHandler",
    "EventSink",
    "FieldIndexFunc",
    "IndexFunc",
    "Informer",
    "KindOptions",
    "LabelMatcher",
    "Reflector",
    "SkipReporter",
    "Store",
    "Transform",
    "UnindexedFieldError",
    "add_field_index",
    "field_index_name",
    "lookup",
    "parse_selector",
    "select",
    "store_key",
    "strip_managed_fields",
]
