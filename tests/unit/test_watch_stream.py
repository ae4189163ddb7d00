"""A watch stream gives its connection back only when the connection is still good.

A stream the server ends is read to its end, so its connection goes back to the pool; a
stream ended by ``close()`` was shut down under the reader, so its connection is closed
instead (back in the pool it would sit unusable and unclosed until the pool is collected).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from cronjob_operator.runtime.client import WatchStream


class Response:
    """The urllib3 response calls WatchStream makes, recorded."""

    def __init__(self, chunks: list[bytes], *, block: threading.Event | None = None) -> None:
        self.chunks = chunks
        self.block = block
        self.calls: list[str] = []

    def stream(self, amount: int, decode_content: bool) -> Iterator[bytes]:
        yield from self.chunks
        if self.block is not None:
            self.block.wait(10)
            raise OSError("shut down")

    def release_conn(self) -> None:
        self.calls.append("release_conn")

    def close(self) -> None:
        self.calls.append("close")

    def shutdown(self) -> None:
        self.calls.append("shutdown")
        if self.block is not None:
            self.block.set()


def test_a_stream_the_server_ended_returns_its_connection_to_the_pool() -> None:
    response = Response([b'{"type": "ADDED", "object": {}}\n'])
    events = list(WatchStream(response))  # type: ignore[arg-type]
    assert [event["type"] for event in events] == ["ADDED"]
    assert response.calls == ["release_conn"]


def test_a_stream_ended_by_close_closes_its_connection() -> None:
    response = Response([b'{"type": "ADDED", "object": {}}\n'], block=threading.Event())
    stream = WatchStream(response)  # type: ignore[arg-type]
    events = iter(stream)
    assert next(events)["type"] == "ADDED"
    stream.close()
    assert list(events) == []  # ends without an error
    assert response.calls == ["shutdown", "close"]
