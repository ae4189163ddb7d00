"""Byte pipes between the host's network and the real node's own (``_node``, pod network).

With a Pod network the node (kubelet, containerd, the Pods' bridge) lives in a network
namespace of its own, so nothing it adds shows on the host; the API server stays on the
host's 127.0.0.1. A Unix socket is a file, and files cross network namespaces, so the
two sides meet at sockets in the node's directory:

* ``relay LISTEN TARGET``: every connection accepted on ``LISTEN`` piped to a new one to
  ``TARGET`` (each ``tcp:HOST:PORT`` or ``unix:PATH``). On the host: the API server's
  socket to its TCP port; in the node: its TCP port (loopback and the Pods' gateway) to
  that socket, so kubelet and Pods reach the API server as if it were local.
* ``connect-proxy LISTEN``: an HTTP CONNECT proxy, as the API server's egress selector
  speaks it (``HTTPConnect`` over ``uds``, the konnectivity protocol's simple form): it
  dials, in the node's namespace, the Pod address each request names. This is how the
  API server reaches webhooks served by Pods.

Run as a script with the interpreter's isolated mode (``python -I _tunnel.py ...``), so
it imports nothing but the standard library. Connections are bounded, and a CONNECT
request must arrive whole, small and soon.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

MAX_CONNECTIONS = 512
REQUEST_LIMIT = 8192
"""Bytes a CONNECT request may take, headers included (the streams' buffer limit)."""
REQUEST_TIMEOUT = 10.0
DIAL_TIMEOUT = 10.0
CHUNK = 65536

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class AddressError(ValueError):
    """An address is neither ``tcp:HOST:PORT`` nor ``unix:PATH``."""


def parse_address(address: str) -> tuple[str, str, int]:
    """``("tcp", host, port)`` or ``("unix", path, 0)``."""
    kind, _, rest = address.partition(":")
    if kind == "unix" and rest:
        return "unix", rest, 0
    host, _, port = rest.rpartition(":")
    if kind == "tcp" and host and port.isdigit():
        return "tcp", host, int(port)
    raise AddressError(f"{address!r}: expected tcp:HOST:PORT or unix:PATH")


async def dial(address: str) -> Streams:
    kind, where, port = parse_address(address)
    if kind == "unix":
        opened = asyncio.open_unix_connection(where)
    else:
        opened = asyncio.open_connection(where, port)
    return await asyncio.wait_for(opened, DIAL_TIMEOUT)


async def serve(address: str, handler: Handler) -> asyncio.Server:
    """Listen on ``address``; at most ``MAX_CONNECTIONS`` handled at once (the rest
    wait in the backlog)."""
    slots = asyncio.Semaphore(MAX_CONNECTIONS)

    async def bounded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with slots:
            try:
                await handler(reader, writer)
            finally:
                await close(writer)

    kind, where, port = parse_address(address)
    if kind == "unix":
        return await asyncio.start_unix_server(bounded, where, limit=REQUEST_LIMIT)
    return await asyncio.start_server(bounded, where, port, limit=REQUEST_LIMIT)


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream, then half-close ``writer``."""
    with contextlib.suppress(OSError):
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


async def splice(client: Streams, upstream: Streams) -> None:
    """Pipe both ways until both directions ended."""
    try:
        await asyncio.gather(pipe(client[0], upstream[1]), pipe(upstream[0], client[1]))
    finally:
        await close(upstream[1])


def relay_handler(target: str) -> Handler:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream = await dial(target)
        except (OSError, TimeoutError):
            return
        await splice((reader, writer), upstream)

    return handle


async def read_connect_target(reader: asyncio.StreamReader) -> str:
    """The ``HOST:PORT`` of a CONNECT request (its headers read and dropped); raises
    ``ValueError`` for anything else."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
    method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
    parse_address(f"tcp:{target}")
    if method != "CONNECT":
        raise ValueError(f"{method} is not CONNECT")
    return target


async def connect_proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        target = await read_connect_target(reader)
    except (ValueError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        return
    try:
        upstream = await dial(f"tcp:{target}")
    except (OSError, TimeoutError) as error:
        reason = str(error).encode("latin-1", "replace")[:200]
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: %d\r\n\r\n" % len(reason))
        writer.write(reason)
        return
    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
    await splice((reader, writer), upstream)


async def run(argv: list[str]) -> None:
    if len(argv) == 3 and argv[0] == "relay":
        server = await serve(argv[1], relay_handler(argv[2]))
    elif len(argv) == 2 and argv[0] == "connect-proxy":
        server = await serve(argv[1], connect_proxy)
    else:
        raise SystemExit("usage: _tunnel.py relay LISTEN TARGET | connect-proxy LISTEN")
    async with server:
        await server.serve_forever()


def main() -> None:
    asyncio.run(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
