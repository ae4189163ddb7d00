"""Informer ingest: watch events per second, and where the time per event goes.

A Job watch stream is built as the API server sends it (one JSON line per event, one
HTTP chunk per line): every Job is ADDED (running), MODIFIED (running, new
resourceVersion) and MODIFIED (complete), and every other Job is then DELETED, so the
store grows while events of all three types flow. The events pass through the real
code: ``Reflector._handle`` (decode, transform, freeze, ``Store.upsert``/``delete``, the
namespace and ``.metadata.controller`` indexes) into an ``Informer``, whose handler is
the ``EnqueueHandler`` with ``for_owner(CRONJOB)`` that ``owns(JOB)`` installs, adding
to a ``WorkQueue`` that nobody drains (it de-duplicates per CronJob). The handler runs on
its own thread (the informer buffers each handler's events); it counts what it handled,
and a run ends when it has handled every event, so its CPU time is in the figures.

Rows, each a fresh informer fed all the events. Times are CPU time of this process
(``time.process_time``; the stub server's process is not counted), so events/s is what
one core can ingest; the median of ``--repeat`` runs, and "best" the fastest run:

* ``end to end over HTTP``: a real ``RestClient`` and ``Informer`` (its own reflector
  thread, ``WatchStream`` line splitting, urllib3 chunked reads) against a stub API
  server on 127.0.0.1, in its own process as a real one is, that answers the LIST with
  no items and the WATCH with the whole stream. Timed from the informer's start to the
  last event's handler (the LIST and connection set-up are included, and negligible).
* in-process stages over the same lines, cumulative: the JSON decode alone; plus
  transform and freeze (``Reflector._decode``); plus store, indexes and the informer
  fan-out with no handler; plus the enqueue handler (the full ``_handle`` path); and the
  full path with stdlib ``json`` instead of orjson, for the record.

Columns: the CronJob controller's ``slim_job`` transform (production) and the default
(managedFields stripped). ``--profile`` prints cProfile's top functions of the full
in-process path on the reflector's side (the handler's own thread is not profiled).

    python -m bench.ingest [--events 30k] [--repeat 5] [--profile] [--template job.json]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import http.server
import io
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from bench import _common
from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers.cronjob import (
    JOB_OWNER_INDEX,
    job_owner_index,
    slim_job,
)
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.cache import Informer, Transform, strip_managed_fields
from cronjob_operator.runtime.cache._cache import _namespaced_values, field_index_name
from cronjob_operator.runtime.client import RestClient
from cronjob_operator.runtime.controller import EnqueueHandler, Request, WorkQueue, for_owner
from cronjob_operator.runtime.kinds import JOB

DEFAULT_EVENTS = "30k"
DEFAULT_REPEAT = 5
HTTP_TIMEOUT = 300.0
LIST_VERSION = "1"
HTTP_STAGE = "end to end over HTTP (RestClient + Informer, orjson)"

Decoder = Callable[[bytes], Any]


def watch_lines(events: int, factory: _common.JobFactory) -> list[bytes]:
    """``events`` watch event lines (newline-terminated) for a growing set of Jobs."""
    lines: list[bytes] = []
    version = 1000
    owners = factory.owners(max(1, events // 4 // _common.JOBS_PER_OWNER + 1))
    run = 0
    while len(lines) < events:
        owner = owners[(run // _common.JOBS_PER_OWNER) % len(owners)]
        lifecycle = [("ADDED", False), ("MODIFIED", False), ("MODIFIED", True)]
        if run % 2:
            lifecycle.append(("DELETED", True))
        for kind, finished in lifecycle:
            version += 1
            job = factory.job(owner, run, version=version, finished=finished)
            lines.append(b'{"type":"%s","object":%s}\n' % (kind.encode(), job))
        run += 1
    return lines[:events]


class _CountingEnqueue(EnqueueHandler):
    """The ``owns(JOB)`` handler; ``done`` is set when it has handled ``expected`` events."""

    def __init__(self, expected: int) -> None:
        super().__init__(WorkQueue[Request]("bench"), for_owner(CRONJOB))
        self.expected = expected
        self.seen = 0
        self.done = threading.Event()

    def _tick(self) -> None:
        self.seen += 1
        if self.seen >= self.expected:
            self.done.set()

    def on_add(self, obj: objects.Obj) -> None:
        super().on_add(obj)
        self._tick()

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
        super().on_update(old, new)
        self._tick()

    def on_delete(self, obj: objects.Obj) -> None:
        super().on_delete(obj)
        self._tick()


def _informer(rest: RestClient, transform: Transform, handler: _CountingEnqueue | None) -> Informer:
    """A Job informer set up as ``controllers.cronjob.setup`` and ``owns(JOB)`` set it up."""
    informer = Informer(rest, JOB, transform=transform)
    informer.store.add_indexer(
        field_index_name(JOB_OWNER_INDEX), _namespaced_values(job_owner_index)
    )
    if handler is not None:
        informer.add_handler(handler)
    return informer


def _in_process(
    lines: Sequence[bytes], transform: Transform, stage: str, decoder: Decoder
) -> float:
    """CPU seconds to push every line through ``stage`` of the in-process path."""
    handler = _CountingEnqueue(len(lines)) if stage == "full" else None
    informer = _informer(_common.offline_rest_client(), transform, handler)
    reflector = informer._reflector
    start = time.process_time()
    try:
        if stage == "decode":
            for line in lines:
                decoder(line)
        elif stage == "freeze":
            for line in lines:
                reflector._decode(decoder(line)["object"])
        else:
            handle = reflector._handle
            for line in lines:
                handle(decoder(line))
        if handler is not None:
            _wait_handled(handler)
        return time.process_time() - start
    finally:
        informer.stop()


def _wait_handled(handler: _CountingEnqueue) -> None:
    if not handler.done.wait(HTTP_TIMEOUT):
        raise RuntimeError(f"handled {handler.seen} of {handler.expected} events")


class _StubApiServer(http.server.ThreadingHTTPServer):
    """Answers a Job LIST with no items and a WATCH from the list's version with ``body``.

    A streaming list (``sendInitialEvents=true``) gets the same: no initial objects, the
    ``k8s.io/initial-events-end`` bookmark at the list's version, then ``body``.

    The watch body is the whole event stream, HTTP-chunked one event per chunk as the API
    server flushes it. A watch from any later version (the reflector reconnecting after
    the stream's clean end) is held open until the server stops.
    """

    daemon_threads = True

    def __init__(self, lines: Sequence[bytes]) -> None:
        super().__init__(("127.0.0.1", 0), _StubHandler)
        self.body = b"".join(_chunk(line) for line in lines) + b"0\r\n\r\n"
        self.initial_events_end = _chunk(
            orjson.dumps(
                {
                    "type": "BOOKMARK",
                    "object": {
                        "metadata": {
                            "resourceVersion": LIST_VERSION,
                            "annotations": {"k8s.io/initial-events-end": "true"},
                        }
                    },
                }
            )
            + b"\n"
        )
        self.stopping = threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class _StubHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _StubApiServer

    def do_GET(self) -> None:
        self.close_connection = True
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if query.get("watch") != ["true"]:
            body = orjson.dumps(
                {
                    "kind": "JobList",
                    "apiVersion": "batch/v1",
                    "metadata": {"resourceVersion": LIST_VERSION},
                    "items": [],
                }
            )
            self._headers({"Content-Length": str(len(body))})
            self.wfile.write(body)
            return
        self._headers({"Transfer-Encoding": "chunked"})
        if query.get("sendInitialEvents") == ["true"]:
            self.wfile.write(self.server.initial_events_end + self.server.body)
        elif query.get("resourceVersion") == [LIST_VERSION]:
            self.wfile.write(self.server.body)
        else:
            self.server.stopping.wait()
            self.wfile.write(b"0\r\n\r\n")

    def _headers(self, extra: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines."""


def serve(events_file: Path) -> None:
    """The stub API server's process: print its URL, serve until stdin closes."""
    server = _StubApiServer(events_file.read_bytes().splitlines(keepends=True))
    threading.Thread(target=server.serve_forever, name="stub-apiserver", daemon=True).start()
    print(server.url, flush=True)
    sys.stdin.read()
    server.stopping.set()
    server.shutdown()
    server.server_close()


@contextlib.contextmanager
def stub_api_server(lines: Sequence[bytes]) -> Iterator[str]:
    """Run the stub API server in its own process (as a real one is); yield its URL."""
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as directory:
        events_file = Path(directory) / "events.jsonl"
        events_file.write_bytes(b"".join(lines))
        argv = [sys.executable, "-m", "bench.ingest", "--serve", str(events_file)]
        with subprocess.Popen(
            argv,
            cwd=_common.REPO,
            env=_common.subprocess_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        ) as server:
            assert server.stdin is not None
            assert server.stdout is not None
            try:
                url = server.stdout.readline().decode().strip()
                if not url:
                    raise RuntimeError(f"the stub API server exited ({server.wait()})")
                yield url
            finally:
                server.stdin.close()
                try:
                    server.wait(10)
                except subprocess.TimeoutExpired:
                    server.kill()


def over_http(url: str, lines: Sequence[bytes], transform: Transform) -> float:
    """CPU seconds (this process: the informer's threads) until the handler saw every event."""
    handler = _CountingEnqueue(len(lines))
    informer = _informer(_common.offline_rest_client(url), transform, handler)
    try:
        start = time.process_time()
        informer.start()
        _wait_handled(handler)
        return time.process_time() - start
    finally:
        informer.stop()


Stage = Callable[[Sequence[bytes], Transform], float]

IN_PROCESS_STAGES: Sequence[tuple[str, Stage]] = (
    ("in-process: orjson.loads only", lambda ls, t: _in_process(ls, t, "decode", orjson.loads)),
    ("  + transform + freeze", lambda ls, t: _in_process(ls, t, "freeze", orjson.loads)),
    ("  + store, indexes, informer", lambda ls, t: _in_process(ls, t, "store", orjson.loads)),
    (
        "  + EnqueueHandler -> WorkQueue (full)",
        lambda ls, t: _in_process(ls, t, "full", orjson.loads),
    ),
    ("full in-process path, stdlib json", lambda ls, t: _in_process(ls, t, "full", json.loads)),
)

COLUMNS: Sequence[tuple[str, Transform]] = (
    ("slim_job", slim_job),
    ("managedFields stripped", strip_managed_fields),
)


def run(lines: Sequence[bytes], repeat: int) -> str:
    """The results table: events/s and µs/event for each stage and transform."""
    with stub_api_server(lines) as url:
        return _table(lines, repeat, [(HTTP_STAGE, partial(over_http, url)), *IN_PROCESS_STAGES])


def _timed(stage: Stage, lines: Sequence[bytes], transform: Transform) -> float:
    """One run of ``stage``, started from a collected heap.

    An informer and its reflector reference each other, so a finished run's store is
    garbage in a cycle; without this collection the next run would pay for traversing it.
    The collector stays on during the run: its cost for the run's own objects is real.
    """
    gc.collect()
    return stage(lines, transform)


def _table(lines: Sequence[bytes], repeat: int, stages: Sequence[tuple[str, Stage]]) -> str:
    rows = []
    for label, stage in stages:
        row = [label]
        for _, transform in COLUMNS:
            runs = [_timed(stage, lines, transform) / len(lines) for _ in range(repeat)]
            median = statistics.median(runs)
            row += [f"{1 / median:,.0f}", f"{median * 1e6:.1f}", f"{min(runs) * 1e6:.1f}"]
        rows.append(row)
    headers = ["path"]
    for name, _ in COLUMNS:
        headers += [f"events/s ({name})", "µs/event", "best µs/event"]
    return _common.markdown_table(headers, rows)


def profile(lines: Sequence[bytes], top: int = 25) -> str:
    """cProfile's top functions (by own time) of the full in-process path, slim_job."""
    profiler = cProfile.Profile()
    profiler.enable()
    _in_process(lines, slim_job, "full", orjson.loads)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(top)
    return out.getvalue()


def _sizes(lines: Sequence[bytes]) -> Iterator[str]:
    yield f"{len(lines):,} events, mean {sum(map(len, lines)) / len(lines):,.0f} B/event line"


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", default=DEFAULT_EVENTS, help="watch events (30k)")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="runs per cell")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the path")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    _common.template_argument(parser)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    factory = _common.JobFactory(_common.load_template(args.template))
    lines = watch_lines(_common.parse_sizes(args.events)[0], factory)
    _common.print_report(
        "Informer ingest: watch events per second",
        [
            (
                f"Median (and best) of {args.repeat} runs; {next(_sizes(lines))}:",
                run(lines, args.repeat),
            )
        ],
        ["every event goes through decode, transform, freeze, store + indexes, handler"],
    )
    if args.profile:
        print("\ncProfile, full in-process path (slim_job), top functions by own time:\n")
        print("```\n" + profile(lines).strip() + "\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
