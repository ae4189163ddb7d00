"""The client: typed reads and writes against the API server, on one REST transport.

``Client`` reads through the cache and writes to the API server; ``LiveReader`` reads
the server itself; ``Reader``, ``LiveReads`` (with a LIST of metadata only), ``Writer``,
``ObjectWriter`` and ``ClientInterface`` are the protocols a reconciler is written
against (the fake implements them too).
``canonical_json`` is the one encoding a content hash is taken of, at any depth.
``RestClient`` is the JSON transport under everything (client-go's retries, a token
bucket, watch streams, per-manager metrics) and ``load_configuration`` finds a cluster
from a kubeconfig or the pod's service account. ``server_version`` reads the server's
Kubernetes release (``ServerVersion``) once, for a program's start-up check.

Machinery: ``_rest`` (transport), ``_client`` (the typed client over it), ``_version``.
"""

from cronjob_operator.runtime.client._client import (
    Applier,
    Client,
    ClientInterface,
    LiveReader,
    LiveReads,
    ObjectWriter,
    PatchType,
    Propagation,
    Reader,
    Writer,
    not_found,
)
from cronjob_operator.runtime.client._json import canonical_json
from cronjob_operator.runtime.client._rest import (
    JSON,
    METADATA,
    METADATA_LIST,
    WRITE_METHODS,
    RestClient,
    RetryPolicy,
    TokenBucket,
    WatchStream,
    WriteFence,
    load_configuration,
)
from cronjob_operator.runtime.client._version import ServerVersion, server_version

__all__ = [
    "JSON",
    "METADATA",
    "METADATA_LIST",
    "WRITE_METHODS",
    "Applier",
    "Client",
    "ClientInterface",
    "LiveReader",
    "LiveReads",
    "ObjectWriter",
    "PatchType",
    "Propagation",
    "Reader",
    "RestClient",
    "RetryPolicy",
    "ServerVersion",
    "TokenBucket",
    "WatchStream",
    "WriteFence",
    "Writer",
    "canonical_json",
    "load_configuration",
    "not_found",
    "server_version",
]
