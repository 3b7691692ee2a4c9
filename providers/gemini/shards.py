"""The async clients of one event loop and settings, and which one a call uses.

A call goes to the first idle client, a new one is made only when none is idle
(session 27 review F2: picked in turn, 128 clients of 8 connections gave a sequential
caller a new connection, so a TCP and TLS handshake to Gemini, for every call below
about 25 calls/s). Counts change only on the loop's own thread.
"""

from __future__ import annotations

import httpx
from google import genai

LoopClient = tuple[genai.Client, httpx.AsyncClient]
"""A google-genai client for one event loop and the httpx client it sends with."""

SHARD_CONNECTIONS = 8
"""Connections per httpx client on one loop. httpcore's pool looks at every connection
when it assigns a request and again when it releases one, and asks each idle one
whether its socket is readable (anyio builds every extra attribute of the socket,
`getpeername` included, to answer), so a client with many connections spends its CPU
there; `max_connections` is spread over up to ceil(max_connections / 8) clients
(clients are cheap: see `_genai_client`)."""


class Shards:
    """The clients of one loop and settings, and the calls in flight on each
    (`busy[i]` on `clients[i]`). A call goes to the first idle client; a new client is
    made only when none is idle, and once all `count` exist, the least busy one is
    used. So concurrent calls spread over small pools (one call per client while
    clients last: the CPU of small pools), and a sequential or low-rate caller keeps
    reusing the first client's kept-alive connection (one TCP and TLS handshake, not
    one per call). `idle_from`: no client before this index is idle."""

    __slots__ = ("busy", "clients", "count", "idle_from")

    def __init__(self, count: int) -> None:
        self.clients: list[LoopClient] = []
        self.busy: list[int] = []
        self.count = count
        self.idle_from = 0

    def pick(self) -> int | None:
        """The index of the client for one more call, counted as busy; None when a new
        client is due (then `add` it)."""
        busy = self.busy
        index = self.idle_from
        while index < len(busy) and busy[index]:
            index += 1
        self.idle_from = index
        if index == len(busy):
            if len(busy) < self.count:
                return None
            index = min(range(len(busy)), key=busy.__getitem__)
        busy[index] += 1
        return index

    def add(self, client: LoopClient) -> int:
        """A new client, counted as busy with one call; its index."""
        self.clients.append(client)
        self.busy.append(1)
        return len(self.clients) - 1

    def release(self, index: int) -> None:
        """One call on `clients[index]` ended."""
        self.busy[index] -= 1
        if not self.busy[index] and index < self.idle_from:
            self.idle_from = index


__all__ = ["SHARD_CONNECTIONS", "LoopClient", "Shards"]
