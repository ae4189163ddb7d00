"""Memory of the ConfigMap cache: RSS with many unrelated ConfigMaps, by cache transform.

The ConfigDeployment controller watches every ConfigMap (and Secret) in its scope, while
only the few that some ConfigDeployment names matter. This measures what the others cost
(issue 23: 10,000 unrelated ConfigMaps of 10 KiB each) with each way of caching them.
Each configuration runs in a fresh interpreter (``--child``), as in ``bench.memory``: the
child builds N ConfigMap watch events as JSON bytes (one 10 KiB ``data`` value each,
distinct content, labels and a ``managedFields`` entry as the API server adds), collects
garbage and reads its RSS, feeds every event through the reflector's own path
(``Reflector._handle``: orjson decode, transform, freeze, store, informer), collects
garbage and reads RSS again. Growth / N is the cost of one cached ConfigMap.

Configurations:
(a) ``managedFields stripped`` -- the runtime's default transform, what the operator
    cached before ConfigMaps were digested: the whole content;
(b) ``digests`` -- ``configdeployment.sources.digest_config_map``, what it caches now:
    the metadata it reads, the whole-content hash and a sha256 per key;
(c) ``metadata only`` -- the same metadata and nothing else: what a metadata-only watch
    (``PartialObjectMetadata``) would cache, the floor of any design that still sees
    every ConfigMap.

    python -m bench.configmap_cache [--config-maps 10k] [--size 10240]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from bench import _common
from bench.memory import rss_bytes
from cronjob_operator.controllers.configdeployment import sources
from cronjob_operator.runtime.cache import Informer, Transform, strip_managed_fields
from cronjob_operator.runtime.kinds import CONFIG_MAP

DEFAULT_COUNT = "10k"
DEFAULT_SIZE = 10 * 1024
NAMESPACES = 10


TRANSFORMS: Mapping[str, Transform] = {
    "managedFields stripped (before)": strip_managed_fields,
    "digests (now)": sources.digest_config_map,
    "metadata only (floor)": sources.metadata_only,
}


def config_map_events(count: int, size: int) -> Iterator[bytes]:
    """``count`` ADDED events of distinct ConfigMaps with one ``size``-byte value each."""
    filler = "abcdefghijklmnopqrstuvwxyz0123456789\n"
    for number in range(count):
        prefix = f"# config {number}\n"
        value = prefix + (filler * (size // len(filler) + 1))[: size - len(prefix)]
        obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"unrelated-{number}",
                "namespace": f"bench-{number % NAMESPACES}",
                "uid": f"00000000-0000-4000-8000-{number:012d}",
                "resourceVersion": str(1000 + number),
                "creationTimestamp": "2026-12-03T12:00:00Z",
                "labels": {"app.kubernetes.io/name": f"app-{number % 100}"},
                "managedFields": [
                    {
                        "manager": "kubectl-create",
                        "operation": "Update",
                        "apiVersion": "v1",
                        "time": "2026-12-03T12:00:00Z",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:data": {".": {}, "f:app.conf": {}}},
                    }
                ],
            },
            "data": {"app.conf": value},
        }
        yield b'{"type":"ADDED","object":%s}' % orjson.dumps(obj)


def child(config: str, count: int, size: int) -> dict[str, float]:
    """Cache ``count`` ConfigMaps with transform ``config``; RSS before and after."""
    events = list(config_map_events(count, size))
    informer = Informer(_common.offline_rest_client(), CONFIG_MAP, transform=TRANSFORMS[config])
    handle = informer._reflector._handle
    gc.collect()
    before = rss_bytes()
    started = time.process_time()
    for event in events:
        handle(orjson.loads(event))
    cpu = time.process_time() - started
    gc.collect()
    after = rss_bytes()
    assert len(informer.store) == count
    sample = informer.store.list()[:200]
    return {
        "rss_before": before,
        "rss_after": after,
        "wire_bytes": sum(map(len, events)) / len(events),
        "cached_json_bytes": sum(len(orjson.dumps(obj)) for obj in sample) / len(sample),
        "cpu_us": cpu / count * 1e6,
    }


def measure(config: str, count: int, size: int) -> dict[str, float]:
    """Run ``child`` in a fresh interpreter and return what it reported."""
    args = [config, "--config-maps", str(count), "--size", str(size)]
    return _common.run_child("bench.configmap_cache", args)


def run(count: int, size: int) -> str:
    """The results table, one row per transform."""
    rows = []
    for config in TRANSFORMS:
        found = measure(config, count, size)
        growth = found["rss_after"] - found["rss_before"]
        rows.append(
            [
                config,
                f"{found['wire_bytes']:,.0f}",
                f"{found['cached_json_bytes']:,.0f}",
                f"{growth / 2**20:,.1f}",
                f"{growth / count:,.0f}",
                f"{found['cpu_us']:,.1f}",
            ]
        )
    headers = [
        "cache transform",
        "wire B/ConfigMap",
        "cached JSON B/ConfigMap",
        f"RSS growth MiB ({count:,} ConfigMaps)",
        "RSS B/ConfigMap",
        "CPU µs/event",
    ]
    return _common.markdown_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments; run every configuration (or, with --child, one)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config-maps", default=DEFAULT_COUNT, help="ConfigMaps (10k)")
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE, help="bytes of data each")
    parser.add_argument("--child", choices=list(TRANSFORMS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    count = _common.parse_sizes(args.config_maps)[0]
    if args.child:
        print(json.dumps(child(args.child, count, args.size)))
        return 0
    _common.print_report(
        "Memory of unrelated ConfigMaps in the cache (RSS growth of the informer store)",
        [
            (
                f"One fresh interpreter per row, {count:,} ConfigMaps of {args.size:,} B "
                "of data through Reflector._handle:",
                run(count, args.size),
            )
        ],
        ["CPU = process time per event: decode, transform (hashing included), freeze, store"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
