"""What work carries of its starter's `contextvars` across the kernel's threads.

The kernel runs a process's callbacks on a dispatcher thread and a task on a pool
thread or the reactor: threads that do not share the starter's `contextvars`. So, as
an asyncio task copies the context of the code that created it:

- a task runs in a copy of the context current where `Task.start` was called;
- a server process keeps a copy of the context current where it was spawned, and runs
  `init` and every callback in it (a variable a callback sets stays the process's own,
  it never leaks into another process sharing the pool thread);
- a child added with ``start_child`` is started in a copy of the caller's context, so
  a child spawned for a request inherits what the request had (a restart runs in the
  supervisor's own context instead);
- `aio.run_blocking` and the steps of `aio.iterate` run in a copy of the awaiting
  coroutine's context (as `asyncio.to_thread` does).

Whatever the application keeps in context variables (the current trace span of an
instrumentation library, a request id) thus follows the work it starts. The kernel
reads none of it. A leaf: it imports only the standard library.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

Context = contextvars.Context


def capture() -> Context:
    """A copy of the calling thread's (or coroutine's) current context."""
    return contextvars.copy_context()


def run_in(context: Context | None, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` inside `context` (as is, with None)."""
    if context is None:
        return fn(*args)
    return context.run(fn, *args)
