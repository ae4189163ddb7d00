"""ConfigDeployment reconcile cost: CPU of a no-op reconcile that names large Secrets.

A ConfigDeployment may name 16 Secrets (``MAX_SECRETS``) and roll on every key of each.
Its content hash (``sources.content_hash``) is the sha256 of the canonical JSON of every
selected key digest, so it costs time linear in the keys named: a Secret of 1 MiB of
short keys holds about 90,000. This benchmark builds a ConfigDeployment naming
``--secrets`` Secrets of ``--keys`` keys each on ``runtime.fake``, lets it reach its
steady state, then times no-op reconciles (process CPU per reconcile), twice from the
same process: as shipped (the reconciler keeps each ConfigDeployment's hash under its
sources' versions and hashes again only when one changed), and with that kept hash
dropped before every reconcile, as a reconcile was before it.

    python -m bench.configdeployment_hash [--secrets 16] [--keys 10k]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from cronjob_operator.api.apps_v1 import CONFIG_DEPLOYMENT
from cronjob_operator.controllers.configdeployment import (
    CONFIG_MAP_INDEX,
    SECRETS_INDEX,
    ConfigDeploymentReconciler,
    config_map_index,
    sources,
)
from cronjob_operator.runtime.controller import Request
from cronjob_operator.runtime.fake import FakeClientBuilder, FakeRecorder

NAMESPACE = "bench"


def world(secrets: int, keys: int) -> list[dict[str, Any]]:
    """The ConfigDeployment, its ConfigMap and ``secrets`` Secrets of ``keys`` keys."""
    config_deployment = {
        "apiVersion": "apps.tutorial.kubebuilder.io/v1",
        "kind": "ConfigDeployment",
        "metadata": {"name": "web", "namespace": NAMESPACE, "uid": "web-uid", "generation": 1},
        "spec": {
            "configMap": "settings",
            "secrets": [{"name": f"s{i}"} for i in range(secrets)],
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
    }
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": NAMESPACE},
        "data": {"mode": "a"},
    }
    return [
        config_deployment,
        sources.digest_config_map(config_map),
        *(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"s{i}", "namespace": NAMESPACE, "uid": f"s{i}-uid"},
                "data": {f"k{key:06d}": "" for key in range(keys)},
            }
            for i in range(secrets)
        ),
    ]


def measure(secrets: int, keys: int, timing: _common.Timing) -> list[object]:
    """One row: the Secrets, the keys, CPU per no-op reconcile kept and hashed anew."""
    client = (
        FakeClientBuilder()
        .with_kinds(CONFIG_DEPLOYMENT)
        .with_index(CONFIG_DEPLOYMENT, CONFIG_MAP_INDEX, config_map_index)
        .with_index(CONFIG_DEPLOYMENT, SECRETS_INDEX, sources.secret_names)
        .with_objects(*world(secrets, keys))
        .build()
    )
    reconciler = ConfigDeploymentReconciler(client, FakeRecorder())
    request = Request(NAMESPACE, "web")
    for _ in range(2):  # the Deployment, then the steady status
        reconciler.reconcile(request)

    def hashed_anew() -> None:
        reconciler._hashes.clear()  # as every reconcile was before the hash was kept
        reconciler.reconcile(request)

    kept = timing.per_call(lambda: reconciler.reconcile(request))
    anew = timing.per_call(hashed_anew)
    return [secrets, f"{keys:,}", f"{kept * 1e3:.2f} ms", f"{anew * 1e3:.1f} ms"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secrets", type=int, default=16, help="Secrets named (16)")
    parser.add_argument("--keys", default="10k", help="keys per Secret (10k)")
    _common.Timing.add_arguments(parser)
    args = parser.parse_args(argv)
    timing = _common.Timing.from_arguments(args)
    keys = _common.parse_sizes(args.keys)[0]
    table = _common.markdown_table(
        ["Secrets", "keys each", "no-op reconcile, hash kept", "hashed every reconcile"],
        [measure(args.secrets, keys, timing)],
    )
    _common.print_report(
        "ConfigDeployment no-op reconcile naming large Secrets",
        [(f"Median process CPU per reconcile over {timing.repeat} timeit samples:", table)],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
