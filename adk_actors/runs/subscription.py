"""Run subscriptions: a private inbox process per subscription, read as an iterator.

Each subscription is its own process (an `Inbox`), subscribed to the run's credit
stream: the caller's own mailbox never fills with run items, one thread or one
event loop can hold many subscriptions, and `async for` waits on an asyncio future
that the inbox resolves, so the event loop is never blocked. The inbox watches its
owner (the process that subscribed: a plain thread's pseudo-process, a server, a
task) and exits when the owner does, so a dead subscriber is removed from the
stream. It also monitors the stream, so a run that goes away ends the iteration
with ``not_found`` instead of a silent hang.

`Subscription` (push) yields every retained item after the cursor, then live items,
then the terminal. `CreditSubscription` holds at most one unacknowledged item:
`next(timeout)` returns it, `ack(seq)` releases the next.

From asyncio code (the daemon's SSE streams), nothing blocks the event loop and no
thread waits:

* waiting for the next item is `await anext(timeout)`: a future the inbox resolves,
  no thread at all, however long the wait;
* subscribing (`open_async`, through `runs.subscribe_credit_async`) and acknowledging
  (`ack_async`) are one round trip each to the run's stream, awaited with the kernel's
  own awaitable requests (`CreditStream.subscribe_async`, `ack_async`): no thread is
  held even while the stream is busy, so a thousand subscribers cost a thousand small
  inboxes and nothing more. (A run's first subscribe is one round trip more, awaited
  too, before this module is reached: `runs.api` asks the run's server to start the
  stream.) A stream that does not answer within `ROUND_TRIP_TIMEOUT` is
  ``RunError("unavailable")``, in the blocking forms too. The inbox is made on the
  caller's thread (an event loop's thread outlives its connections).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, Self

from adk_actors.runs.values import RunError, RunEvent, RunTerminal, RunTimeout
from supervision import (
    CallTimeout,
    CreditStream,
    Down,
    Inbox,
    Pid,
    ProcessExit,
    StreamDetached,
    StreamError,
    StreamItem,
    StreamTerminal,
)

Item = RunEvent | RunTerminal
ROUND_TRIP_TIMEOUT = 5.0
"""How long a subscribe or an ack waits for the run's stream (and a first subscribe
for the run's server: `runs.api._stream`) before ``unavailable``."""


class _Base:
    """What both kinds share: the inbox, the stream, reading one item."""

    mode: Literal["push", "credit"] = "push"

    def __init__(self, run_id: str, stream: Pid, after: int) -> None:
        self._open(run_id, stream)
        with self._subscribing():
            self._inbox.monitor(stream)
            CreditStream.subscribe(
                stream,
                after=after,
                mode=self.mode,
                credit=1,
                subscriber=self._inbox.pid,
                timeout=ROUND_TRIP_TIMEOUT,
            )

    @classmethod
    async def open_async(cls, run_id: str, stream: Pid, after: int) -> Self:
        """The subscription, made from asyncio code: the inbox belongs to the calling
        thread (the event loop's), and the subscribe request is awaited, so the loop
        never blocks and no thread waits. A stream that does not answer within
        `ROUND_TRIP_TIMEOUT` is ``RunError("unavailable")``; a cancelled await leaves
        nothing subscribed (the inbox closes, and the stream withdraws the request)."""
        subscription = cls.__new__(cls)
        subscription._open(run_id, stream)
        with subscription._subscribing():  # a timeout: ``unavailable``
            subscription._inbox.monitor(stream)  # on this thread, as the inbox was made
            await CreditStream.subscribe_async(
                stream,
                after=after,
                mode=cls.mode,
                credit=1,
                subscriber=subscription._inbox.pid,
                timeout=ROUND_TRIP_TIMEOUT,
            )
        return subscription

    def _open(self, run_id: str, stream: Pid) -> None:
        self.run_id = run_id
        self._stream = stream
        self._inbox = Inbox(label="run subscription")
        self._done = False

    @contextmanager
    def _subscribing(self) -> Iterator[None]:
        """Subscribing: a refusal becomes a `RunError`, and any failure (a refusal, a
        timeout, a cancelled await) closes the inbox, so nothing stays subscribed."""
        try:
            yield
        except StreamError as error:
            self._inbox.close()
            raise _run_error(error) from None
        except ProcessExit:
            self._inbox.close()
            raise RunError("not_found", "the run ended and is no longer retained") from None
        except CallTimeout:  # the request was withdrawn: nothing stays subscribed
            self._inbox.close()
            raise RunError("unavailable", "the run's stream did not answer in time") from None
        except BaseException:
            self._inbox.close()
            raise

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        inbox = getattr(self, "_inbox", None)
        if inbox is not None:
            try:
                inbox.close()
            except Exception:  # interpreter shutdown: the kernel may be half torn down
                pass

    @property
    def closed(self) -> bool:
        return self._done

    def close(self) -> None:
        """Unsubscribe; idempotent. Items not yet read are dropped."""
        self._done = True
        self._inbox.close()

    def ack(self, seq: int) -> None:
        """Acknowledge items up to `seq`; only a credit subscriber may (see `CreditSubscription`)."""
        with _acknowledging():
            CreditStream.ack(self._stream, seq, subscriber=self._inbox.pid)

    async def ack_async(self, seq: int) -> None:
        """`ack` for asyncio code: the request is awaited, so the loop never blocks and
        no thread waits; a stream that does not answer within `ROUND_TRIP_TIMEOUT` is
        ``RunError("unavailable")``."""
        try:
            with _acknowledging():
                await CreditStream.ack_async(
                    self._stream, seq, subscriber=self._inbox.pid, timeout=ROUND_TRIP_TIMEOUT
                )
        except CallTimeout:
            raise RunError("unavailable", "the run's stream did not answer in time") from None

    def next(self, timeout: float | None = None) -> Item:
        """The next item; `RunTimeout` if nothing is deliverable within `timeout` seconds."""
        if self._done:
            raise RunError("not_subscribed", "the subscription has ended")
        message = self._take(timeout)
        if message is None:
            raise RunTimeout(f"nothing was deliverable within {timeout} s")
        return self._convert(message)

    async def anext(self, timeout: float | None = None) -> Item:
        """`next` for asyncio code: awaits without blocking the event loop (no thread)."""
        if self._done:
            raise RunError("not_subscribed", "the subscription has ended")
        try:
            message = await self._inbox.areceive(timeout)
        except TimeoutError:
            raise RunTimeout(f"nothing was deliverable within {timeout} s") from None
        except ProcessExit:  # the owner exited, and the inbox with it
            self._done = True
            raise RunError("not_subscribed", "the subscriber's owner has exited") from None
        return self._convert(message)

    def _take(self, timeout: float | None) -> Any:
        """The next message from the inbox, or None when none came within `timeout`."""
        try:
            return self._inbox.receive(timeout, None)
        except TimeoutError:
            return None
        except ProcessExit:  # the owner exited, and the inbox with it
            self._done = True
            raise RunError("not_subscribed", "the subscriber's owner has exited") from None

    def _convert(self, message: Any) -> Item:
        kind = type(message)
        if kind is StreamItem:
            return RunEvent(message.seq, message.item)
        if kind is StreamTerminal:
            self.close()  # the stream already dropped us: the terminal is the last item
            return RunTerminal(message.seq, message.outcome)
        self.close()
        if kind is StreamDetached:
            raise RunError("slow_subscriber", "the subscriber fell too far behind")
        if kind is Down:
            raise RunError("not_found", "the run stopped before its terminal was read")
        raise RunError("unexpected_message", type(message).__name__)


class Subscription(_Base):
    """A push subscription: iterate it (or `async for` it) to the terminal item."""

    def __iter__(self) -> Subscription:
        return self

    def __next__(self) -> Item:
        if self._done:
            raise StopIteration
        return self.next()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Item:
        if self._done:
            raise StopAsyncIteration
        return await self.anext()


class CreditSubscription(_Base):
    """At most one unacknowledged item: `next(timeout)`, then `ack(item.seq)`."""

    mode: Literal["push", "credit"] = "credit"


@contextmanager
def _acknowledging() -> Iterator[None]:
    """An acknowledgement's refusals as `RunError`s."""
    try:
        yield
    except StreamError as error:
        raise _run_error(error) from None
    except ProcessExit:
        raise RunError("not_subscribed", "the run is no longer retained") from None


def _run_error(error: StreamError) -> RunError:
    reason = error.reason
    if reason == "already_terminal":
        reason = "not_subscribed"
    return RunError(reason, str(error), gap=error.gap)
