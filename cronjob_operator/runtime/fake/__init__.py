"""Test doubles for reconcilers: an in-memory client with the API server's rules, a recorder.

controller-runtime's ``client/fake``: ``FakeClientBuilder`` builds a ``FakeClient``
(reads are the cache's own code, writes keep resourceVersion, generation, status
subresource, finalizer and garbage-collection rules, server-side apply ownership);
``FakeRecorder`` keeps recorded events.

Machinery: ``_client``.
"""

from cronjob_operator.runtime.fake._client import (
    DEFAULT_START,
    NO_STATUS_SUBRESOURCE,
    Action,
    FakeClient,
    FakeClientBuilder,
    FakeRecorder,
    Reaction,
    RecordedEvent,
    apply_merge_patch,
    json_patch,
)

__all__ = [
    "DEFAULT_START",
    "NO_STATUS_SUBRESOURCE",
    "Action",
    "FakeClient",
    "FakeClientBuilder",
    "FakeRecorder",
    "Reaction",
    "RecordedEvent",
    "apply_merge_patch",
    "json_patch",
]
