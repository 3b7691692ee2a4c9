"""MCP tool calls per second: our client and server against the official `mcp` SDK's.

The same tool on every server, ``add(a, b) -> a + b``, each server in a process of its
own (`benchmarks/_mcp_peer/servers.py`): ours `adk.mcp.serve` / `serve_stdio`, the
SDK's `MCPServer` (FastMCP in mcp 1.x; over HTTP as shipped, each answer an SSE
stream; ours answers with JSON). The clients run in this process: ours `adk.mcp.connect` (a
supervised client process; calls from threads), the SDK's `ClientSession` on asyncio
(calls as coroutines). Each pairing makes `count` ``tools/call`` requests on one
session, sequential (one after another) and `WIDTH`-way concurrent (ours: `WIDTH`
threads; the SDK's: `WIDTH` coroutines under `asyncio.gather`), over Streamable HTTP on
127.0.0.1 and over stdio. The headline compares ours end to end (our client, our
server) with the SDK end to end; the cross pairings show where the time goes. Ours
pays for the spec's rules on every call (the client's one deadline and per-connection
address checks; the server's Origin, authentication, session binding, body and
concurrency bounds, and the agent tool machinery: argument validation, sanitized
failures, JSON-checked results).

Needs the `mcp` SDK (installed in `.venv-bench`).
Usage: ``python benchmarks/mcp_calls.py [--quick]``
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2
from _bench import print_header, url_process
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from weather_workload import quiet_options

import adk_actors as adk

SERVERS = Path(__file__).resolve().parent / "_mcp_peer" / "servers.py"
WIDTH = 16
"""Concurrent callers on one session."""
WARM = 8
"""Calls made before the clock starts."""
NOTES: list[str] = []

# -- servers ---------------------------------------------------------------------------------


def http_server(side: str, variant: str = "") -> contextlib.AbstractContextManager[str]:
    """An HTTP server process of `side` ("ours" | "sdk"); yields its endpoint URL."""
    return url_process([sys.executable, str(SERVERS), f"{side}-http{variant}"], side)


def stdio_command(side: str) -> list[str]:
    return [sys.executable, str(SERVERS), f"{side}-stdio"]


# -- our client --------------------------------------------------------------------------------


def our_rate(client: adk.mcp.McpClient, count: int, width: int) -> float:
    """Calls per second of `count` ``add`` calls from `width` threads on one client."""
    per_thread = max(1, count // width)

    def work(offset: int) -> None:
        for n in range(per_thread):
            result = client.call_tool("add", {"a": offset, "b": n})
            assert result.structured_content == {"result": offset + n}, result

    for n in range(WARM):  # the session and its connections are open
        client.call_tool("add", {"a": n, "b": n})
    threads = [threading.Thread(target=work, args=(n,)) for n in range(width)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return per_thread * width / (time.perf_counter() - started)


def our_client(transport: str, target: Any) -> adk.mcp.McpClient:
    if transport == "http":
        return adk.mcp.connect("streamable_http", target, allow_http_loopback=True)
    return adk.mcp.connect("stdio", target)


def ours_measure(transport: str, target: Any, count: int, width: int, rounds: int) -> float:
    client = our_client(transport, target)
    try:
        return max(our_rate(client, count, width) for _ in range(rounds))
    finally:
        client.close()


# -- the SDK's client --------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def sdk_session(transport: str, target: Any) -> AsyncIterator[ClientSession]:
    if transport == "http":
        async with (
            httpx2.AsyncClient(timeout=60.0) as http,
            streamable_http_client(target, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    else:
        params = StdioServerParameters(command=target[0], args=target[1:])
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def _sdk_rate(session: ClientSession, count: int, width: int) -> float:
    per_task = max(1, count // width)

    async def work(offset: int) -> None:
        for n in range(per_task):
            result = await session.call_tool("add", {"a": offset, "b": n})
            assert result.structured_content == {"result": offset + n}, result

    for n in range(WARM):
        await session.call_tool("add", {"a": n, "b": n})
    started = time.perf_counter()
    await asyncio.gather(*(work(n) for n in range(width)))
    return per_task * width / (time.perf_counter() - started)


def sdk_measure(transport: str, target: Any, count: int, width: int, rounds: int) -> float:
    async def main() -> float:
        async with sdk_session(transport, target) as session:
            return max([await _sdk_rate(session, count, width) for _ in range(rounds)])

    return asyncio.run(main())


# -- the table -----------------------------------------------------------------------------------

Measure = Callable[[str, Any, int, int, int], float]
CLIENTS: dict[str, Measure] = {"ours": ours_measure, "sdk": sdk_measure}


def pairings(transport: str, width: int, count: int, rounds: int) -> dict[tuple[str, str], float]:
    """Calls/s for every (client, server) pairing over `transport`."""
    rates: dict[tuple[str, str], float] = {}
    for server in ("ours", "sdk"):
        if transport == "http":
            with http_server(server) as url:
                for client, measure in CLIENTS.items():
                    rates[client, server] = measure("http", url, count, width, rounds)
        else:
            for client, measure in CLIENTS.items():
                command = stdio_command(server)
                rates[client, server] = measure("stdio", command, count, width, rounds)
    return rates


def sdk_json_sequential(count: int) -> float:
    with http_server("sdk", "-json") as url:
        return sdk_measure("http", url, count, 1, 1)


def main() -> None:
    options = quiet_options(__doc__.splitlines()[0])
    count, rounds = (200, 1) if options.quick else (2_000, 3)
    print_header("mcp", "mcp")
    adk.start()
    sdk_sequential = 0.0
    print(f"\ntools/call per second, add(a, b), {count:,} calls on one session, best of {rounds}")
    print("  (ours = our client + our server; sdk = the SDK's client + the SDK's MCPServer)")
    print(
        "                              ours      sdk   ratio"
        "   our client->sdk server   sdk client->our server"
    )
    for transport, label in (("http", "Streamable HTTP"), ("stdio", "stdio")):
        for width in (1, WIDTH):
            rates = pairings(transport, width, count, rounds)
            ours, sdk = rates["ours", "ours"], rates["sdk", "sdk"]
            shape = "sequential" if width == 1 else f"{width}-way"
            if transport == "http" and width == 1:
                sdk_sequential = sdk
            print(
                f"  {label + ' ' + shape:26s} {ours:8,.0f} {sdk:8,.0f} {ours / sdk:6.2f}x"
                f"   {rates['ours', 'sdk']:22,.0f}   {rates['sdk', 'ours']:22,.0f}"
            )
    json_rate = sdk_json_sequential(max(20, count // 20))
    NOTES.append(
        f"the SDK's MCPServer with json_response=True (JSON answers, as ours gives) served"
        f" {json_rate:,.0f} sequential calls/s to the SDK's client (as shipped, with SSE"
        f" answers: {sdk_sequential:,.0f}); the SSE default is the peer above"
    )
    adk.stop()
    for note in NOTES:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
