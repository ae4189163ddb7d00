"""Shared pieces of the benchmarks: realistic synthetic Jobs, timing, tables, the machine.

``JOB_TEMPLATE`` (read from ``bench/job_template.json``) is the shape of a Job as the API
server returns it for a run our CronJob controller created: captured from the local control
plane (kube-apiserver v1.36) and edited only where our controller differs from ``kubectl
apply`` (it POSTs, so there is no last-applied annotation and the first managedFields entry
is ``cronjob-operator``'s and covers ``ownerReferences``). It has metadata with a controller
ownerReference, labels, annotations, two managedFields entries, the defaulted pod template
and a completed status: about 3.9 KB of JSON. ``JobFactory`` stamps out copies with distinct
names, uids, owners and versions as JSON bytes (what a LIST or WATCH carries); ``decode``
turns bytes into cache objects through the reflector's own path (orjson, transform, freeze).
A real Job (``kubectl get job NAME -o json``) can replace the template: ``--template PATH``.

Timing is ``timeit`` (``Timing.per_call``): the number of calls per sample is raised
until one sample takes ``min_time``; the result is the median over ``repeat`` samples,
per call. Every benchmark times CPU time of its own process (``time.process_time``), not
wall time: on a shared two-core machine other processes' load would otherwise dominate
the noise. The machine report includes the load average all the same, because a busy
machine still slows a process down (caches, frequency).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import timeit
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from kubernetes import client as k8s_client

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers.cronjob import JOB_OWNER_INDEX, job_owner_index, slim_job
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache import Cache, Transform, strip_managed_fields
from cronjob_operator.runtime.client import RestClient
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.fake import FakeClient, FakeClientBuilder
from cronjob_operator.runtime.kinds import JOB

__all__ = [
    "JOBS_PER_OWNER",
    "JOB_TEMPLATE",
    "NAMESPACES",
    "REPO",
    "TRANSFORMS",
    "JobFactory",
    "Owner",
    "Timing",
    "decode",
    "fake_cronjob_client",
    "load_template",
    "loaded_cache",
    "machine_lines",
    "markdown_table",
    "offline_rest_client",
    "parse_sizes",
    "print_report",
    "subprocess_env",
    "template_argument",
]

REPO = Path(__file__).resolve().parents[1]
JOBS_PER_OWNER = 10
NAMESPACES = 10
SCHEDULED_AT = "batch.tutorial.kubebuilder.io/scheduled-at"

TEMPLATE_FILE = Path(__file__).with_name("job_template.json")
"""The captured Job (see the module docstring), kept as data beside the code."""

JOB_TEMPLATE: Mapping[str, Any] = orjson.loads(TEMPLATE_FILE.read_bytes())

TRANSFORMS: Mapping[str, Transform] = {
    "managedFields kept": lambda obj: obj,
    "stripped (default)": strip_managed_fields,
    "slim_job": slim_job,
}
"""The cache transforms compared: none, the default, and the CronJob controller's."""

_FINISHED_STATUS_KEYS = ("conditions", "completionTime", "succeeded")


@dataclass(frozen=True, slots=True)
class Owner:
    """A CronJob that owns Jobs: where it lives and what its ownerReferences name."""

    namespace: str
    name: str
    uid: str


class JobFactory:
    """Stamps distinct Jobs out of one template, as the API server would serve them."""

    def __init__(self, template: Mapping[str, Any] | None = None) -> None:
        self._template = orjson.dumps(template or JOB_TEMPLATE)

    @staticmethod
    def owners(count: int, *, namespaces: int = NAMESPACES) -> list[Owner]:
        """``count`` CronJobs spread round-robin over ``namespaces`` namespaces."""
        return [
            Owner(f"team-{i % namespaces:02d}", f"cron-{i:06d}", f"{i:08x}-0000-4000-8000-{i:012x}")
            for i in range(count)
        ]

    def job(self, owner: Owner, run: int, *, version: int = 1, finished: bool = True) -> bytes:
        """Run number ``run`` of ``owner`` at resourceVersion ``version``, as JSON bytes."""
        obj = orjson.loads(self._template)
        metadata = obj["metadata"]
        name = f"{owner.name}-{29_000_000 + run}"
        uid = f"{owner.uid[:8]}-{run:04x}-4000-9000-{owner.uid[-12:]}"
        metadata.update(name=name, namespace=owner.namespace, uid=uid, resourceVersion=str(version))
        metadata["ownerReferences"] = [
            {
                "apiVersion": CRONJOB.api_version,
                "kind": "CronJob",
                "name": owner.name,
                "uid": owner.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        _stamp_uid(obj.get("spec") or {}, name, uid)
        for entry in metadata.get("managedFields") or ():
            refs = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:ownerReferences")
            if refs is not None:
                entry["fieldsV1"]["f:metadata"]["f:ownerReferences"] = {
                    ".": {},
                    f'k:{{"uid":"{owner.uid}"}}': {},
                }
        if not finished:
            status = obj.get("status") or {}
            obj["status"] = {
                **{k: v for k, v in status.items() if k not in _FINISHED_STATUS_KEYS},
                "active": 1,
            }
        return orjson.dumps(obj)

    def jobs(self, count: int, *, per_owner: int = JOBS_PER_OWNER) -> Iterator[bytes]:
        """``count`` finished Jobs, ``per_owner`` to each CronJob, over ``NAMESPACES``."""
        owners = self.owners(-(-count // per_owner))
        for i in range(count):
            yield self.job(owners[i // per_owner], i % per_owner)


def _stamp_uid(spec: dict[str, Any], name: str, uid: str) -> None:
    """Point the selector and pod template labels the Job controller adds at this Job."""
    match_labels = (spec.get("selector") or {}).get("matchLabels") or {}
    for key in ("batch.kubernetes.io/controller-uid", "controller-uid"):
        if key in match_labels:
            match_labels[key] = uid
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    for key in ("batch.kubernetes.io/controller-uid", "controller-uid"):
        if key in labels:
            labels[key] = uid
    for key in ("batch.kubernetes.io/job-name", "job-name"):
        if key in labels:
            labels[key] = name


def decode(raw: bytes, transform: Transform) -> objects.Obj:
    """Bytes to a cache object exactly as ``Reflector._decode`` does it (with orjson)."""
    obj = orjson.loads(raw)
    obj.setdefault("apiVersion", JOB.api_version)
    obj.setdefault("kind", JOB.kind)
    return objects.freeze(transform(obj))  # type: ignore[no-any-return]


def subprocess_env() -> dict[str, str]:
    """The environment for a benchmark's helper process: ``bench`` importable."""
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def run_child(module: str, args: Sequence[str]) -> dict[str, float]:
    """Run ``python -m module --child ARGS`` in a fresh interpreter (so its memory is its
    own) and return the JSON object it printed."""
    argv = [sys.executable, "-m", module, "--child", *args]
    done = subprocess.run(
        argv, cwd=REPO, env=subprocess_env(), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout)
    return result


def offline_rest_client(host: str = "http://127.0.0.1:9") -> RestClient:
    """A RestClient that nothing here ever calls (the cache needs one to exist)."""
    return RestClient(k8s_client.Configuration(host=host))


def loaded_cache(jobs: Sequence[bytes], transform: Transform = slim_job) -> Cache:
    """A Cache whose Job informer holds ``jobs`` (with the owner index) and counts as synced.

    Set up as ``controllers.cronjob.setup`` does (transform, then the field index); the
    objects go in as a LIST would put them (``Store.replace``); no thread, no cluster.
    """
    cache = Cache(offline_rest_client())
    cache.set_transform(JOB, transform)
    cache.index_field(JOB, JOB_OWNER_INDEX, job_owner_index)
    informer = cache.informer(JOB)
    informer.store.replace(decode(raw, transform) for raw in jobs)
    informer.on_synced()
    return cache


def fake_cronjob_client(clock: FakeClock, *cronjobs: Mapping[str, Any]) -> FakeClient:
    """The runtime's fake client holding ``cronjobs``, on ``clock``, with the Job owner
    index the CronJob reconciler reads (as ``controllers.cronjob.setup`` sets it up)."""
    return (
        FakeClientBuilder()
        .with_kinds(CRONJOB)
        .with_index(JOB, JOB_OWNER_INDEX, job_owner_index)
        .with_clock(clock)
        .with_objects(*cronjobs)
        .build()
    )


@dataclass(frozen=True, slots=True)
class Timing:
    """How hard to time: ``repeat`` samples of at least ``min_time`` seconds each."""

    repeat: int = 7
    min_time: float = 0.05

    def per_call(self, fn: Callable[[], object]) -> float:
        """The median seconds per call of ``fn`` over the samples (``timeit``)."""
        timer = timeit.Timer(fn, timer=time.process_time)
        number = 1
        while True:
            elapsed = timer.timeit(number)
            if elapsed >= self.min_time:
                break
            number = max(number * 2, int(number * self.min_time / max(elapsed, 1e-9) * 1.2))
        samples = [elapsed / number]
        samples += [timer.timeit(number) / number for _ in range(self.repeat - 1)]
        return statistics.median(samples)

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """Add ``--repeat`` and ``--min-time`` (the smoke tests make them tiny)."""
        parser.add_argument("--repeat", type=int, default=7, help="timeit samples (7)")
        parser.add_argument(
            "--min-time", type=float, default=0.05, help="seconds per sample, at least (0.05)"
        )

    @classmethod
    def from_arguments(cls, args: argparse.Namespace) -> Timing:
        """The Timing that ``add_arguments``' options ask for."""
        return cls(repeat=args.repeat, min_time=args.min_time)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table; the first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        padded = [
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(
        "-" * (w + 1) + ":" if i else ":" + "-" * (w + 1) for i, w in enumerate(widths)
    )
    return "\n".join([line(cells[0]), rule + "|", *(line(row) for row in cells[1:])])


def machine_lines() -> list[str]:
    """What the figures were measured on: cores, CPU model, Python, orjson."""
    model = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for text in cpuinfo.read_text().splitlines():
            if text.startswith("model name"):
                model = text.split(":", 1)[1].strip()
                break
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return [
        f"machine: nproc={usable}, CPU: {model}, {platform.system()} {platform.machine()}",
        f"python: {platform.python_implementation()} {platform.python_version()}, "
        f"orjson {orjson.__version__}",
        f"load average at the end (1, 5, 15 min): {load}",
    ]


def print_report(title: str, tables: Sequence[tuple[str, str]], notes: Sequence[str] = ()) -> None:
    """Print a benchmark's heading, the machine, each (caption, table) and notes."""
    print(f"## {title}\n")
    for text in machine_lines():
        print(f"- {text}")
    for caption, table in tables:
        print(f"\n{caption}\n\n{table}")
    if notes:
        print()
        for note in notes:
            print(f"- {note}")


def parse_sizes(text: str) -> list[int]:
    """``"1000,10k,1e5"``-style sizes: integers, with k/m suffixes allowed."""
    sizes: list[int] = []
    for part in text.lower().split(","):
        number, scale = part.strip(), 1
        if number.endswith("k"):
            number, scale = number[:-1], 1_000
        elif number.endswith("m"):
            number, scale = number[:-1], 1_000_000
        sizes.append(int(float(number) * scale))
    return sizes


def template_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--template PATH``: a real Job's JSON to stamp copies from."""
    parser.add_argument(
        "--template",
        type=Path,
        help="a Job as JSON (kubectl get job NAME -o json) to use instead of JOB_TEMPLATE",
    )


def load_template(path: Path | None) -> Mapping[str, Any] | None:
    """The template Job read from ``path``, or None for the built-in one."""
    if path is None:
        return None
    obj = orjson.loads(path.read_bytes())
    if not isinstance(obj, dict) or obj.get("kind") != "Job":
        raise SystemExit(f"--template {path}: expected a Job object as JSON")
    return obj
