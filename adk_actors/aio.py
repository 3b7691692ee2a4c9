"""The facade for asyncio code: the same calls, as coroutines.

Each one runs the blocking call on a small thread pool, never on the event loop, so
a server handling many requests can ``await adk.aio.prompt(...)`` freely. Streams
need nothing here: `Runner.run_async` and run subscriptions work with ``async for``,
and `adk.runs.wait_async` waits without a thread.
"""

from __future__ import annotations

from typing import Any

from adk_actors import runs
from adk_actors.agents import api
from supervision import aio as _kernel_aio


async def prompt(agent: Any, message: Any, timeout: float = 60.0) -> Any:
    """`adk.prompt`, awaited."""
    return await _kernel_aio.run_blocking(api.prompt, agent, message, timeout)


async def invoke(agent: Any, message: Any, *args: Any, **kwargs: Any) -> Any:
    """`adk.invoke`, awaited."""
    return await _kernel_aio.run_blocking(api.invoke, agent, message, *args, **kwargs)


async def run(runner: Any, user_id: str, session_id: str, message: Any) -> Any:
    """`Runner.run`, awaited: the output, a `Paused` outcome, or a raised `AdkError`."""
    return await _kernel_aio.run_blocking(runner.run, user_id, session_id, message)


async def resume(runner: Any, user_id: str, session_id: str, response: Any, **kwargs: Any) -> Any:
    """`Runner.resume`, awaited."""
    return await _kernel_aio.run_blocking(runner.resume, user_id, session_id, response, **kwargs)


wait = runs.wait_async
"""`adk.runs.wait`, awaited without a thread."""

__all__ = ["invoke", "prompt", "resume", "run", "wait"]
