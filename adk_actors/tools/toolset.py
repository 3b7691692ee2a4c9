"""Toolsets: tools that come from a backend (MCP, OpenAPI, ...), as immutable snapshots.

`Toolset.fetch()` asks the backend for its tools (`afetch()` is the same for asyncio
code). An agent holds a `snapshot()`: the declarations as they were when it was taken.
Before a snapshotted tool runs, the backend's current listing is checked: a tool it no
longer offers, or offers with another schema, fails closed with
``tool_catalog_changed`` instead of running against a stale declaration. New backend
tools stay unknown (``not_found``) until `refresh()` makes a new snapshot (and a new
agent uses it).

The listing is resolved once per turn: an agent's turn runs its tool calls inside a
`TurnListings` scope (`listing_scope`), where each toolset is asked at its first call
(concurrent first calls share that one listing) and every later call of the turn is
checked against it, so a batch of calls to an MCP server costs one ``tools/list``, not
one per call. The next turn asks again, so a change between turns fails closed. A
listing that fails is not kept: that call fails with the backend's error, the next one
asks again. Outside a scope (a catalog used directly) each call asks the backend.

A snapshotted tool runs as its backend tool does: an ``async def execute`` is
awaited on the caller's loop (`Tool.is_async` says so), after an `afetch` listing; a
sync one runs where the caller runs sync tools (a pool thread), after a `fetch`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from adk_actors.tools.tool import Tool, ToolContext
from providers.errors import AdkError

Listing = dict[str, Tool]
"""A backend's tools at one moment, by name."""


class Toolset:
    """Subclass and implement `fetch`; `name` labels the source in error messages.
    A backend with an asyncio client also overrides `afetch`, so listing for its
    ``async def`` tools holds no thread."""

    name = "toolset"

    def fetch(self) -> list[Tool]:
        raise NotImplementedError

    async def afetch(self) -> list[Tool]:
        """`fetch` for asyncio code; by default `fetch` runs in a worker thread."""
        return await asyncio.to_thread(self.fetch)

    def snapshot(self) -> ToolsetSnapshot:
        return ToolsetSnapshot(self, self.fetch())


class ToolsetSnapshot:
    """The toolset's tools at one moment, each guarded against backend changes."""

    def __init__(self, toolset: Toolset, tools: list[Tool]) -> None:
        self.toolset = toolset
        self.tools = [_Guarded(toolset, tool) for tool in tools]

    def refresh(self) -> ToolsetSnapshot:
        """A new snapshot of the backend as it is now."""
        return self.toolset.snapshot()


class TurnListings:
    """The toolsets' listings of one turn: each toolset listed at most once (see the
    module doc). Thread-safe: a turn's sync calls list from pool threads, its async
    ones from the reactor."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listings: dict[int, tuple[Toolset, concurrent.futures.Future[Listing]]] = {}

    def _claim(self, toolset: Toolset) -> tuple[concurrent.futures.Future[Listing], bool]:
        """The toolset's listing of this turn, and whether the caller is to take it."""
        with self._lock:
            found = self._listings.get(id(toolset))
            if found is not None:
                return found[1], False
            future: concurrent.futures.Future[Listing] = concurrent.futures.Future()
            self._listings[id(toolset)] = (toolset, future)  # holds the toolset: ids stay unique
            return future, True

    def _failed(
        self, toolset: Toolset, future: concurrent.futures.Future[Listing], error: BaseException
    ) -> None:
        """Forget a listing that failed; its waiters get the error (or, if the lister
        was stopped rather than failing, take a listing of their own)."""
        with self._lock:
            if self._listings.get(id(toolset), (None, None))[1] is future:
                del self._listings[id(toolset)]
        if isinstance(error, Exception):
            future.set_exception(error)
        else:  # cancelled or interrupted: not the backend's answer
            future.cancel()

    def listing(self, toolset: Toolset) -> Listing:
        """The turn's listing of `toolset`, taken now with `fetch` if it is the first."""
        while True:
            future, first = self._claim(toolset)
            if first:
                try:
                    listing = _listing(toolset.fetch())
                except BaseException as error:
                    self._failed(toolset, future, error)
                    raise
                future.set_result(listing)
                return listing
            try:
                return future.result()
            except concurrent.futures.CancelledError:
                continue  # its lister was stopped: list again

    async def alisting(self, toolset: Toolset) -> Listing:
        """`listing` for asyncio code, taken with `afetch` if it is the first."""
        while True:
            future, first = self._claim(toolset)
            if first:
                try:
                    listing = _listing(await toolset.afetch())
                except BaseException as error:
                    self._failed(toolset, future, error)
                    raise
                future.set_result(listing)
                return listing
            try:  # shielded: a waiter that is cancelled never cancels the shared listing
                return await asyncio.shield(asyncio.wrap_future(future))
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if future.cancelled() and (task is None or not task.cancelling()):
                    continue  # its lister was stopped, not this waiter: list again
                raise


_turn_listings: ContextVar[TurnListings | None] = ContextVar("adk_turn_listings", default=None)


@contextmanager
def listing_scope(listings: TurnListings) -> Iterator[None]:
    """Run tool calls with `listings` as their turn's: the work they start (pool
    tasks, coroutines) carries it in its `contextvars`."""
    token = _turn_listings.set(listings)
    try:
        yield
    finally:
        _turn_listings.reset(token)


def _listing(tools: list[Tool]) -> Listing:
    named = ((tool.schema().get("name"), tool) for tool in tools)
    return {name: tool for name, tool in named if isinstance(name, str)}


class _Guarded(Tool):
    def __init__(self, toolset: Toolset, inner: Tool) -> None:
        self.toolset = toolset
        self.inner = inner
        self._declaration = dict(inner.schema())
        self.name = self._declaration["name"]
        self.description = self._declaration.get("description", "")
        self.parameters = self._declaration.get("parameters")
        self.parallel_safe = inner.parallel_safe
        self.source = f"toolset {toolset.name}"

    def schema(self) -> dict[str, Any]:
        return dict(self._declaration)

    @property
    def require_confirmation(self) -> Any:
        """The backend tool's own approval rule: a snapshot never weakens it."""
        return getattr(self.inner, "require_confirmation", None)

    @property
    def is_async(self) -> bool:
        """As the backend tool: an ``async def execute`` makes this one a coroutine."""
        return self.inner.is_async

    def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> tuple[bool, str | None]:
        return self.inner.confirmation(args, ctx)

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """The live tool's result; for an async backend tool, a coroutine to await."""
        if self.is_async:
            return self._aexecute(args, ctx)
        listings = _turn_listings.get()
        current = (
            _listing(self.toolset.fetch()) if listings is None else listings.listing(self.toolset)
        )
        return self._live(current).execute(args, ctx)

    async def _aexecute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        listings = _turn_listings.get()
        current = (
            _listing(await self.toolset.afetch())
            if listings is None
            else await listings.alisting(self.toolset)
        )
        return await self._live(current).execute(args, ctx)

    def _live(self, current: Listing) -> Tool:
        """The backend's tool for this declaration now, or ``tool_catalog_changed``
        (gone, another schema, or no longer running the way it did)."""
        live = current.get(self.name)
        if (
            live is None
            or dict(live.schema()) != self._declaration
            or (live.is_async != self.inner.is_async)
        ):
            raise AdkError(
                "tool_catalog_changed",
                f"{self.name} changed in {self.toolset.name}; refresh the toolset",
            )
        return live
