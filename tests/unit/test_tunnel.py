"""The byte pipes between the host and the real node's network namespace (``_tunnel``):
the relay and the CONNECT proxy move bytes both ways and half-close as they should, the
proxy refuses what is not a small, whole CONNECT request, and the script runs standalone
(``python -I``, as the node starts it) with nothing but the standard library."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from cronjob_operator.envtest import _tunnel
from cronjob_operator.envtest._podnet import TUNNEL


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Send back everything, upper-cased, then close (after the client's end of stream)."""
    data = await reader.read()
    writer.write(data.upper())
    await writer.drain()
    writer.close()


@asynccontextmanager
async def listening(address: str, handler: _tunnel.Handler) -> AsyncIterator[str]:
    """``address`` (``tcp:127.0.0.1:0`` picks a port) served by ``handler``; its real
    address."""
    server = await _tunnel.serve(address, handler)
    kind, where, _ = _tunnel.parse_address(address)
    if kind == "tcp":
        address = f"tcp:{where}:{server.sockets[0].getsockname()[1]}"
    async with server:
        yield address


async def exchange(address: str, payload: bytes) -> bytes:
    reader, writer = await _tunnel.dial(address)
    writer.write(payload)
    writer.write_eof()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer


def test_parse_address_takes_tcp_and_unix_and_names_the_forms_otherwise() -> None:
    assert _tunnel.parse_address("tcp:10.244.0.1:6443") == ("tcp", "10.244.0.1", 6443)
    assert _tunnel.parse_address("unix:/tmp/x.sock") == ("unix", "/tmp/x.sock", 0)
    for bad in ("tcp:host", "tcp::1", "udp:1.2.3.4:5", "unix:", "6443"):
        with pytest.raises(_tunnel.AddressError, match="tcp:HOST:PORT or unix:PATH"):
            _tunnel.parse_address(bad)


def test_a_relay_pipes_both_ways_from_a_unix_socket_to_tcp(tmp_path: Path) -> None:
    async def scenario() -> bytes:
        async with listening("tcp:127.0.0.1:0", echo) as target:
            relay = f"unix:{tmp_path / 'relay.sock'}"
            async with listening(relay, _tunnel.relay_handler(target)):
                return await exchange(relay, b"hello through the relay" * 1000)

    assert asyncio.run(scenario()) == b"HELLO THROUGH THE RELAY" * 1000


def test_a_relay_closes_the_client_when_its_target_is_not_there(tmp_path: Path) -> None:
    async def scenario() -> bytes:
        relay = f"unix:{tmp_path / 'relay.sock'}"
        async with listening(relay, _tunnel.relay_handler(f"unix:{tmp_path / 'absent'}")):
            return await exchange(relay, b"anyone?")

    assert asyncio.run(scenario()) == b""


def test_the_connect_proxy_dials_the_address_the_request_names(tmp_path: Path) -> None:
    async def scenario() -> tuple[bytes, bytes]:
        async with listening("tcp:127.0.0.1:0", echo) as target:
            proxy = f"unix:{tmp_path / 'egress.sock'}"
            async with listening(proxy, _tunnel.connect_proxy):
                reader, writer = await _tunnel.dial(proxy)
                host_port = target.removeprefix("tcp:")
                writer.write(f"CONNECT {host_port} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                status = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
                writer.write(b"tunnelled")
                writer.write_eof()
                answer = await asyncio.wait_for(reader.read(), 5)
                writer.close()
                return status, answer

    status, answer = asyncio.run(scenario())
    assert status.startswith(b"HTTP/1.1 200 ")
    assert answer == b"TUNNELLED"


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 400 "),
        (b"CONNECT nowhere HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 "),
        (b"CONNECT 127.0.0.1:1 HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n", b"HTTP/1.1 400 "),
        (b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n", b"HTTP/1.1 502 "),
    ],
    ids=["not-connect", "no-port", "oversized", "refused-target"],
)
def test_the_connect_proxy_answers_a_bad_request_with_an_error_status(
    tmp_path: Path, request_bytes: bytes, status: bytes
) -> None:
    async def scenario() -> bytes:
        proxy = f"unix:{tmp_path / 'egress.sock'}"
        async with listening(proxy, _tunnel.connect_proxy):
            return await exchange(proxy, request_bytes)

    assert asyncio.run(scenario()).startswith(status)


def test_the_script_runs_isolated_and_relays(tmp_path: Path) -> None:
    async def scenario() -> bytes:
        async with listening("tcp:127.0.0.1:0", echo) as target:
            socket = tmp_path / "relay.sock"
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-I", str(TUNNEL), "relay", f"unix:{socket}", target
            )
            try:
                # The socket's path exists from its bind, before its listen: wait until
                # the relay accepts, not until the path shows.
                deadline = time.monotonic() + 10
                while True:
                    try:
                        return await exchange(f"unix:{socket}", b"standalone")
                    except (FileNotFoundError, ConnectionRefusedError):
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(0.05)
            finally:
                process.kill()
                await process.wait()

    assert asyncio.run(scenario()) == b"STANDALONE"


def test_the_script_names_its_usage_when_called_wrongly() -> None:
    result = subprocess.run(
        [sys.executable, "-I", str(TUNNEL), "bogus"], capture_output=True, text=True, check=False
    )
    assert result.returncode != 0
    assert "usage: _tunnel.py relay LISTEN TARGET | connect-proxy LISTEN" in result.stderr
