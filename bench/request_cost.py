"""The CPU one ``RestClient.request`` costs around the HTTP exchange: the retry loop's share.

The client's connection pool is replaced by one that answers from memory (no socket, no
server), so what is timed is the client's own work per call: building the URL and the
headers, the retry loop, parsing the answer, counting it. Three rows:

* a GET answered 200 (the path nearly every request takes);
* a GET answered 404 (an error that is never retried: raised at once);
* a PUT answered 429 with ``Retry-After: 0``, then 200 (one retry, a wait of 0 s).

The first two are the no-retry path, which the retry loop must not make dearer.

    python -m bench.request_cost [--repeat 7] [--min-time 0.05]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from cronjob_operator.runtime import errors
from cronjob_operator.runtime.client import RestClient

PATH = "/api/v1/namespaces/bench/configmaps/answer"
BODY = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"answer","namespace":"bench"}}'


class Answer:
    """What the client reads of a urllib3 response."""

    def __init__(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.status, self.data, self.headers = status, data, headers or {}


class MemoryPool:
    """A connection pool that answers each request with the next of ``answers``, cycling."""

    def __init__(self, *answers: Answer) -> None:
        self._answers = answers
        self._next = 0

    def request(self, method: str, url: str, **_: Any) -> Answer:
        answer = self._answers[self._next % len(self._answers)]
        self._next += 1
        return answer


def client_answering(*answers: Answer) -> RestClient:
    """A client whose every request is answered from ``answers`` in turn."""
    client = _common.offline_rest_client()
    client._pool = MemoryPool(*answers)  # type: ignore[assignment]
    return client


def get_ok() -> Callable[[], object]:
    client = client_answering(Answer(200, BODY))
    return lambda: client.request("GET", PATH)


def get_not_found() -> Callable[[], object]:
    client = client_answering(Answer(404, b'{"kind":"Status","reason":"NotFound"}'))

    def call() -> None:
        with contextlib.suppress(errors.NotFound):
            client.request("GET", PATH)

    return call


def put_retried_once() -> Callable[[], object]:
    busy = Answer(429, b'{"kind":"Status"}', {"Retry-After": "0"})
    client = client_answering(busy, Answer(200, BODY))
    return lambda: client.request("PUT", PATH, body={"kind": "ConfigMap"})


CASES: dict[str, Callable[[], Callable[[], object]]] = {
    "GET 200 (no retry)": get_ok,
    "GET 404 (not retried)": get_not_found,
    "PUT 429 Retry-After 0, then 200 (one retry)": put_retried_once,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _common.Timing.add_arguments(parser)
    timing = _common.Timing.from_arguments(parser.parse_args(argv))
    rows = [[name, f"{timing.per_call(case()) * 1e6:.1f}"] for name, case in CASES.items()]
    _common.print_report(
        "CPU per REST request, around the HTTP exchange",
        [
            (
                "A pool answering from memory; median CPU time per call (process time):",
                _common.markdown_table(["request", "µs CPU per call"], rows),
            )
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
