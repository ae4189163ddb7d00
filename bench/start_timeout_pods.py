"""Start timeout's Pod read: the bytes and the memory one overdue run of a hostile Job costs.

A run past ``spec.runStartTimeoutSeconds`` has its Pods read once, for whether one
started and, if none did, why (``controllers/cronjob/start_timeout.py``). A tenant
chooses how many Pods its Job has (parallelism) and how large each is (a pod-template
annotation of up to 256 KiB is copied onto every Pod), so this benchmark serves such a
Job's Pods from a stub API server in a child process (127.0.0.1; it answers the Job GET
and Pod LISTs with ``limit``, ``continue``, a ``status.phase`` field selector and the
metadata-only Accept, as the API server does) and calls the reconciler's own read of one
overdue run, ``CronJobReconciler._start_report``, through the runtime's real REST client.
It reports the bytes the stub sent (the Job's and the Pods'), the Pod LISTs, and the
peak of Python memory a read allocated (``tracemalloc``, on a second read, so imports
are not counted), and how much the first read raised the process's peak RSS. Every Pod is Pending
and unschedulable, the case that reads the most.

    python -m bench.start_timeout_pods [--pods 200] [--annotation-kib 250]
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import resource
import sys
import time
import tracemalloc
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlsplit

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client as k8s_client

from bench import _common
from cronjob_operator.controllers.cronjob import start_timeout
from cronjob_operator.controllers.cronjob.reconciler import CronJobReconciler
from cronjob_operator.runtime.client import Client, LiveReader, RestClient

NAMESPACE, JOB_NAME, JOB_UID = "tenant", "hostile", "0b0b0b0b-0000-4000-8000-000000000001"
UNSCHEDULABLE = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."


def pod(index: int, annotation_bytes: int) -> dict[str, Any]:
    """One Pending, unschedulable Pod of the Job, carrying the template's annotation."""
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": UNSCHEDULABLE,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{JOB_NAME}-{index:05}",
            "namespace": NAMESPACE,
            "uid": f"pod-{index}",
            "labels": {start_timeout.CONTROLLER_UID_LABEL: JOB_UID},
            "annotations": {"example.com/blob": "x" * annotation_bytes},
        },
        "spec": {
            "nodeSelector": {"example.com/no-such-node": "true"},
            "containers": [{"name": "main", "image": "busybox"}],
        },
        "status": {"phase": "Pending", "conditions": [condition]},
    }


def job() -> dict[str, Any]:
    """The overdue Job as the API server returns it: started, no Pod counted."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": JOB_NAME, "namespace": NAMESPACE, "uid": JOB_UID},
        "status": {"startTime": "2026-01-01T00:00:00Z", "active": 1},
    }


class StubApi:
    """The Job and its Pods, rendered once, served page by page."""

    def __init__(self, pods: int, annotation_bytes: int) -> None:
        self.pods = [pod(index, annotation_bytes) for index in range(pods)]
        self.whole = [json.dumps(p).encode() for p in self.pods]
        self.metadata = [json.dumps({"metadata": p["metadata"]}).encode() for p in self.pods]

    def answer(self, path: str, query: dict[str, list[str]], accept: str) -> bytes:
        """The body of a GET of ``path``."""
        if path.endswith(f"/jobs/{JOB_NAME}"):
            return json.dumps(job()).encode()
        chosen = [i for i, p in enumerate(self.pods) if _selected(p, query)]
        start = int(query.get("continue", ["0"])[0])
        limit = int(query.get("limit", [str(len(chosen))])[0]) or len(chosen)
        page = chosen[start : start + limit]
        bodies = self.metadata if "PartialObjectMetadataList" in accept else self.whole
        more = start + limit < len(chosen)
        metadata = {"continue": str(start + limit)} if more else {}
        head = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": metadata})
        return head[:-1].encode() + b',"items":[' + b",".join(bodies[i] for i in page) + b"]}"


def _selected(obj: dict[str, Any], query: dict[str, list[str]]) -> bool:
    """Whether ``obj`` passes the ``status.phase`` field selector of ``query``."""
    phase = obj["status"]["phase"]
    for requirement in ",".join(query.get("fieldSelector", [])).split(","):
        field, unequal, value = requirement.partition("!=")
        if unequal and field == "status.phase" and phase == value:
            return False
        field, equal, value = requirement.partition("=")
        if not unequal and equal and field == "status.phase" and phase != value:
            return False
    return True


def serve(
    pods: int,
    annotation_bytes: int,
    ports: Any,
    sent: Synchronized[int],
    lists: Synchronized[int],
) -> None:
    """The child process: serve the stub on a free port of 127.0.0.1 until killed."""
    stub = StubApi(pods, annotation_bytes)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            body = stub.answer(url.path, parse_qs(url.query), self.headers.get("Accept", ""))
            with sent.get_lock():  # counted before the client can have read it
                sent.value += len(body)
                lists.value += url.path.endswith("/pods")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ports.put(server.server_address[1])
    server.serve_forever()


def measure(pods: int, annotation_kib: int) -> list[object]:
    """One row: the Pods, the bytes sent, the requests, the peak MiB, the cause found."""
    context = multiprocessing.get_context("fork")
    ports = context.Queue()
    sent, lists = context.Value("q", 0), context.Value("q", 0)
    child = context.Process(
        target=serve, args=(pods, annotation_kib * 1024, ports, sent, lists), daemon=True
    )
    child.start()
    try:
        rest = RestClient(k8s_client.Configuration(host=f"http://127.0.0.1:{ports.get()}"))
        reconciler = SimpleNamespace(_client=Client(rest, LiveReader(rest)))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        CronJobReconciler._start_report(reconciler, job())  # type: ignore[arg-type]
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        with sent.get_lock():
            sent.value = lists.value = 0
        gc.collect()
        tracemalloc.start()
        began = time.perf_counter()
        report = CronJobReconciler._start_report(reconciler, job())  # type: ignore[arg-type]
        seconds = time.perf_counter() - began
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rest.close()
    finally:
        child.kill()
        child.join()
    cause = "started" if report is None or report.started else (report.cause or "")[:40]
    return [
        f"{pods} x {annotation_kib} KiB",
        f"{sent.value / 2**20:.2f}",
        lists.value,
        f"{peak / 2**20:.1f}",
        f"{grown / 1024:.1f}",
        f"{seconds:.2f} s",
        cause,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", default="200", help="Pods of the Job, e.g. 1,200")
    parser.add_argument("--annotation-kib", type=int, default=250)
    args = parser.parse_args(argv)
    rows = [measure(pods, args.annotation_kib) for pods in _common.parse_sizes(args.pods)]
    table = _common.markdown_table(
        ["Pods x annotation", "MiB sent", "Pod LISTs", "peak MiB", "max RSS +MiB", "wall", "cause"],
        rows,
    )
    _common.print_report(
        "Start timeout's Pod read",
        [("One overdue run's read, through the runtime's REST client:", table)],
        [
            "peak MiB: tracemalloc's peak during the second read (bodies, decode, what is "
            "kept; its own bookkeeping included)",
            "max RSS +MiB: how much the first read raised the process's peak RSS (its "
            "imports included)",
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
