"""The cluster side of the scale benchmarks: a local control plane, fast bulk fixtures, metrics.

``bench_plane`` starts a ``ControlPlane`` whose kube-controller-manager runs every
controller the tests use except ``job-controller`` (``BENCH_CONTROLLERS``): Jobs are only
stored, no pod is ever made, so tens of thousands of Jobs fit on two cores. The built-in
``cronjob-controller`` still runs (bench/skew.py races it). The CRDs are installed.

``populate`` creates N CronJobs (spread over ``NAMESPACES`` namespaces, with a schedule
that does not fire during a run) and M Jobs owned by each, through the ``RestClient`` from
a thread pool, so 55,000 objects take minutes, not an hour. Every Job carries the
controller ownerReference the field index reads and the label ``OWNER_LABEL`` the naive
label-selector variant needs; it has no status (nothing runs it), so the reconciler
counts all M as active.

``ApiCounts`` reads the API server's ``apiserver_request_total`` by verb and resource, so
a benchmark can take the difference over a phase.
"""

from __future__ import annotations

import collections
import contextlib
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from bench._common import REPO
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.envtest._components import CONTROLLERS
from cronjob_operator.runtime import errors
from cronjob_operator.runtime.client import PatchType, RestClient, Writer, load_configuration
from cronjob_operator.runtime.kinds import JOB, NAMESPACE
from cronjob_operator.runtime.sharding import BUCKET_LABEL, bucket_of

__all__ = [
    "BENCH_CONTROLLERS",
    "CRONJOB_CRD",
    "NAMESPACES",
    "NEVER",
    "OWNED_RESOURCES",
    "OWNER_LABEL",
    "ApiCounts",
    "Population",
    "bench_plane",
    "bulk",
    "clear_statuses",
    "create_namespaces",
    "cronjob_manifest",
    "job_manifest",
    "percentile",
    "populate",
    "rest_client",
    "wait_established",
]

BENCH_CONTROLLERS = tuple(name for name in CONTROLLERS if name != "job-controller")
NAMESPACES = 10
OWNER_LABEL = "bench.tutorial.kubebuilder.io/cronjob"
NEVER = "0 0 1 1 *"
"""A schedule that does not fire during a benchmark (once a year, at New Year)."""
FIRST_RUN = 1_700_000_000
CRONJOB_CRD = "cronjobs.batch.tutorial.kubebuilder.io"
CRD_NAMES = (CRONJOB_CRD,)
THREADS = 16
OWNED_RESOURCES = (CRONJOB.plural, f"{CRONJOB.plural}/status", JOB.plural, "events")
"""The resources the operator reads or writes (API-load counts)."""

T = TypeVar("T")
R = TypeVar("R")


@contextlib.contextmanager
def bench_plane(
    controllers: Sequence[str] = BENCH_CONTROLLERS,
    *,
    feature_gates: Mapping[str, bool] | None = None,
    extra_args: Mapping[str, Sequence[str]] | None = None,
) -> Iterator[ControlPlane]:
    """A started control plane (no Job controller) with the CRDs installed; stopped after.

    ``feature_gates`` and ``extra_args`` are ``ControlPlane``'s (kube-apiserver gates,
    flags per component).
    """
    plane = ControlPlane(
        controllers=controllers, feature_gates=feature_gates, extra_args=extra_args
    )
    plane.start()
    try:
        plane.kubectl("apply", "-k", str(REPO / "config" / "crd"), check=True)
        for name in CRD_NAMES:
            wait_established(plane, name)
        yield plane
    finally:
        plane.stop()


def wait_established(plane: ControlPlane, name: str) -> None:
    """Wait until the CRD ``name`` is Established (its resource is served)."""
    wait_for(
        lambda: (
            plane.kubectl(
                "wait", "--for=condition=Established", f"crd/{name}", "--timeout=10s"
            ).returncode
            == 0
        ),
        60,
        message=f"CRD {name} established",
    )


def rest_client(plane: ControlPlane, pool_size: int = THREADS * 2) -> RestClient:
    """A RestClient for the bench driver itself (admin credentials)."""
    return RestClient(load_configuration(str(plane.kubeconfig)), pool_size=pool_size)


def bulk(fn: Callable[[T], R], items: Iterable[T], threads: int = THREADS) -> list[R]:
    """``fn`` over ``items`` from a thread pool (the API server is the bottleneck)."""
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(fn, items))


def cronjob_manifest(
    namespace: str, name: str, *, schedule: str = NEVER, suspend_jobs: bool = True
) -> dict[str, Any]:
    """A CronJob of ours; its Jobs are suspended (``spec.suspend``) so nothing would run."""
    return {
        "apiVersion": CRONJOB.api_version,
        "kind": CRONJOB.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "metadata": {"labels": {OWNER_LABEL: name}},
                "spec": {
                    "suspend": suspend_jobs,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "main", "image": "busybox", "command": ["true"]}
                            ],
                        }
                    },
                },
            },
        },
    }


def job_manifest(cronjob: dict[str, Any], run: int) -> dict[str, Any]:
    """Run ``run`` of ``cronjob`` (as created), named, owned and labelled as our controller
    does it: a sharded one labels each Job with its CronJob's bucket (docs/sharding.md),
    which an unsharded one never reads."""
    metadata = cronjob["metadata"]
    scheduled = FIRST_RUN + 3600 * run
    template = cronjob["spec"]["jobTemplate"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{metadata['name']}-{scheduled}",
            "namespace": metadata["namespace"],
            "labels": {
                OWNER_LABEL: metadata["name"],
                BUCKET_LABEL: str(bucket_of(metadata["namespace"], metadata["name"])),
            },
            "annotations": {
                "batch.tutorial.kubebuilder.io/scheduled-at": time.strftime(
                    "%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(scheduled)
                )
            },
            "ownerReferences": [
                {
                    "apiVersion": CRONJOB.api_version,
                    "kind": CRONJOB.kind,
                    "name": metadata["name"],
                    "uid": metadata["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template["spec"],
    }


@dataclass(frozen=True, slots=True)
class Population:
    """What ``populate`` created."""

    cronjobs: list[tuple[str, str]]
    """(namespace, name) of every CronJob."""
    jobs: int
    seconds: float


def populate(
    rest: RestClient,
    count: int,
    *,
    jobs_per_cronjob: int = 10,
    prefix: str = "cron",
    namespaces: int = NAMESPACES,
    threads: int = THREADS,
) -> Population:
    """Create ``count`` CronJobs over ``namespaces`` namespaces and their Jobs; blocks."""
    began = time.monotonic()
    writer = Writer(rest)
    names = create_namespaces(rest, min(namespaces, max(count, 1)))
    wanted = [(names[i % len(names)], f"{prefix}-{i:05d}") for i in range(count)]
    created = bulk(
        lambda key: writer.create(CRONJOB, cronjob_manifest(*key)), wanted, threads=threads
    )
    jobs = [job_manifest(cronjob, run) for cronjob in created for run in range(jobs_per_cronjob)]
    bulk(lambda job: writer.create(JOB, job), jobs, threads=threads)
    return Population(wanted, len(jobs), time.monotonic() - began)


def create_namespaces(rest: RestClient, count: int = NAMESPACES) -> list[str]:
    """The namespaces ``bench-00`` ... (created unless they exist)."""
    names = [f"bench-{i:02d}" for i in range(count)]
    for namespace in names:
        with contextlib.suppress(errors.AlreadyExists):
            Writer(rest).create(NAMESPACE, {"metadata": {"name": namespace}})
    return names


def clear_statuses(rest: RestClient, cronjobs: Sequence[tuple[str, str]]) -> None:
    """Empty the status of every CronJob (so the next reconcile of each must write)."""
    writer = Writer(rest)
    bulk(
        lambda key: writer.patch_status(
            CRONJOB, key[1], {"status": None}, namespace=key[0], patch_type=PatchType.MERGE
        ),
        cronjobs,
    )


_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


class ApiCounts(collections.Counter[tuple[str, str]]):
    """``apiserver_request_total`` summed by (verb, resource[/subresource])."""

    @classmethod
    def read(cls, plane: ControlPlane) -> ApiCounts:
        counts = cls()
        for line in plane.apiserver_metrics().splitlines():
            match = _SAMPLE.match(line)
            if match is None:
                continue
            labels = dict(_LABEL.findall(match["labels"]))
            resource = labels.get("resource", "")
            if not resource:
                continue
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            counts[(labels.get("verb", ""), resource)] += int(float(match["value"]))
        return counts

    def since(self, before: ApiCounts) -> ApiCounts:
        """The requests made after ``before`` was read."""
        delta = ApiCounts()
        for key, value in self.items():
            if value - before.get(key, 0):
                delta[key] = value - before.get(key, 0)
        return delta

    def count_of(self, verbs: Iterable[str], resources: Iterable[str]) -> int:
        """Requests with one of ``verbs`` on one of ``resources``."""
        verb_set, resource_set = set(verbs), set(resources)
        return sum(v for (verb, res), v in self.items() if verb in verb_set and res in resource_set)


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` in 0..1) of ``values``; 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1))
    return ordered[rank]
