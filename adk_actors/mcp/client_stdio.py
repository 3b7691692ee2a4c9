"""The client's stdio transport: the SDK's ``stdio_client`` with bounded reads.

The SDK's reader builds each stdout line by concatenation with no limit, so one huge
line is buffered (and copied again for every chunk) until the request times out. This
transport speaks the same newline-delimited JSON-RPC over the same streams (the SDK's
`ClientSession` reads them) but reads stdout in chunks of at most `CHUNK_BYTES` into
one buffer per line: a line past ``max_line_bytes`` stops reading at once, counts in
``observed.too_large`` and ends the transport, so the request waiting for it fails
with ``mcp_response_too_large`` and the session closes (the stream cannot be trusted
past a line it did not read).

`ended` is set when the transport ends on its own (the server closed stdout or
exited, or a line was too large), which is how the client learns that a stdio server
crashed. Shutdown follows the spec's sequence: close stdin, wait up to `STOP_GRACE`,
then terminate the server's process group (the server is started in its own session,
so its children go too), all shielded so a cancelled session still stops its server.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any, TextIO

import anyio
import anyio.abc
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from adk_actors.mcp.security import Observed

CHUNK_BYTES = 65_536
"""The most one read takes from the server's stdout."""
STOP_GRACE = 1.0
"""Seconds a server has to exit once its stdin is closed before its group is terminated."""
KILL_GRACE = 1.0
"""Seconds between SIGTERM and SIGKILL to the server's process group."""
Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]
_CLOSED = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError)


@contextlib.asynccontextmanager
async def bounded_stdio(
    command: tuple[str, ...],
    env: Mapping[str, str] | None,
    cwd: str | None,
    errlog: TextIO,
    max_line_bytes: int,
    observed: Observed,
    ended: anyio.Event,
) -> AsyncIterator[Streams]:
    """Start `command` and yield the session's (read, write) streams (see the module doc)."""
    process = await anyio.open_process(
        list(command),
        env=get_default_environment() | dict(env or {}),
        stderr=errlog,
        cwd=cwd,
        start_new_session=True,
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        assert process.stdout is not None
        try:
            async with read_writer:
                await _read_lines(process.stdout, read_writer, max_line_bytes, observed)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session closed its end
        finally:
            ended.set()

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(line.encode() + b"\n")
        except _CLOSED:
            await read_writer.aclose()
            ended.set()

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            group.cancel_scope.cancel()


async def _read_lines(
    stdout: anyio.abc.ByteReceiveStream,
    send: Any,
    limit: int,
    observed: Observed,
) -> None:
    """Forward each stdout line as a parsed message until EOF or a line past `limit`."""
    buffer = bytearray()
    while True:
        try:
            chunk = await stdout.receive(CHUNK_BYTES)
        except _CLOSED:
            return
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            if len(buffer) + (end - start) > limit:
                observed.too_large += 1
                return
            buffer += chunk[start:end]
            if newline < 0:
                break
            start = newline + 1
            line = bytes(buffer)
            buffer.clear()
            if line.strip():
                await send.send(_parse(line))


def _parse(line: bytes) -> SessionMessage | Exception:
    """A message, or the parse error as a value (the session surfaces it, as the SDK does)."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        return error


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin, give the server `STOP_GRACE`, then terminate its process group."""
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(*_CLOSED):
        await process.stdin.aclose()
    with anyio.move_on_after(STOP_GRACE):
        while process.returncode is None:
            await anyio.sleep(0.01)
    if process.returncode is None:
        with contextlib.suppress(OSError):
            await terminate_posix_process_tree(process, KILL_GRACE)
    with anyio.move_on_after(KILL_GRACE), contextlib.suppress(*_CLOSED):
        await process.aclose()  # closes the pipes and reaps the server
