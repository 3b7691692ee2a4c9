"""Credit streams from asyncio code: `subscribe_async`, `ack_async`, `unsubscribe_async`.

They are the sync requests, awaited: the same answers and the same typed errors, no
thread parked per request, and the event loop keeps running while the stream is busy.
A subscribe whose caller gave up (a timeout, a cancelled await) leaves no subscriber.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import supervision as sv
from supervision.credit_stream import (
    CreditStream,
    StreamError,
    StreamItem,
    StreamTerminal,
    Subscribe,
    next_message,
)
from tests.helpers import wait_until

pytestmark = pytest.mark.usefixtures("each_dispatcher")


class Busy:
    """Holds a server busy (a `replace_state` whose function waits) until released."""

    def __init__(self, server: sv.Pid) -> None:
        self.inside = threading.Event()
        self.released = threading.Event()
        self.thread = threading.Thread(
            target=sv.replace_state, args=(server, self._hold), kwargs={"timeout": None}
        )

    def _hold(self, state: Any) -> Any:
        self.inside.set()
        self.released.wait(10)
        return state

    def __enter__(self) -> Busy:
        self.thread.start()
        assert self.inside.wait(5)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.released.set()
        self.thread.join(5)


async def ticking_while(awaitable: Awaitable[Any], seconds: float) -> tuple[int, asyncio.Task]:
    """Start `awaitable`, let the loop run `seconds` with a ticker beside it; the number
    of ticks and the (still pending, unless it failed) task."""
    task = asyncio.ensure_future(awaitable)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    beside = asyncio.ensure_future(ticker())
    await asyncio.sleep(seconds)
    beside.cancel()
    return ticks, task


def refusal(fn: Callable[[], Any]) -> BaseException:
    try:
        fn()
    except BaseException as error:
        return error
    raise AssertionError("no error")


def errors(method: str, *args: Any, **kwargs: Any) -> tuple[BaseException, BaseException]:
    """What `CreditStream.<method>` raises, and what its `<method>_async` raises."""
    sync = refusal(lambda: getattr(CreditStream, method)(*args, **kwargs))
    awaited = refusal(lambda: run(getattr(CreditStream, f"{method}_async")(*args, **kwargs)))
    return sync, awaited


def run(coroutine: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await coroutine

    return asyncio.run(main())


# -- the same requests, awaited --------------------------------------------------------------


def test_subscribe_ack_and_unsubscribe_from_a_running_event_loop():
    stream = CreditStream.start_link()
    for word in ("a", "b"):
        CreditStream.publish(stream, word)

    async def main() -> list[Any]:
        with sv.Inbox() as inbox:
            window = await CreditStream.subscribe_async(
                stream, after=0, mode="credit", credit=1, subscriber=inbox.pid
            )
            assert window == {
                "after_sequence": 0,
                "oldest_available_sequence": 1,
                "latest_sequence": 2,
                "terminal": False,
            }
            seen = [await inbox.areceive(timeout=2)]
            await CreditStream.ack_async(stream, 1, subscriber=inbox.pid)
            seen.append(await inbox.areceive(timeout=2))
            assert await CreditStream.unsubscribe_async(stream, subscriber=inbox.pid) is True
            assert await CreditStream.unsubscribe_async(stream, subscriber=inbox.pid) is False
            return seen

    assert asyncio.run(main()) == [StreamItem(stream, 1, "a"), StreamItem(stream, 2, "b")]
    assert CreditStream.status(stream)["subscribers"] == 0


def test_the_default_subscriber_is_the_caller_as_with_subscribe():
    stream = CreditStream.start_link()
    run(CreditStream.subscribe_async(stream, mode="credit"))
    CreditStream.publish(stream, "x")
    CreditStream.finish(stream, "done")
    assert next_message(stream, 2) == StreamItem(stream, 1, "x")
    run(CreditStream.ack_async(stream, 1))
    assert next_message(stream, 2) == StreamTerminal(stream, 2, "done")


# -- the event loop keeps running, and no thread waits ---------------------------------------


def test_the_loop_keeps_running_while_the_stream_is_busy():
    stream = CreditStream.start_link()
    CreditStream.publish(stream, "a")

    async def main() -> None:
        with sv.Inbox() as inbox:
            with Busy(stream):
                subscribe = CreditStream.subscribe_async(
                    stream, mode="credit", subscriber=inbox.pid, timeout=None
                )
                ticks, task = await ticking_while(subscribe, 0.3)
                assert ticks >= 10 and not task.done()  # the loop ran; the answer waits
            assert (await task)["latest_sequence"] == 1
            assert (await inbox.areceive(timeout=2)).seq == 1
            with Busy(stream):
                ack = CreditStream.ack_async(stream, 1, subscriber=inbox.pid, timeout=None)
                ticks, task = await ticking_while(ack, 0.3)
                assert ticks >= 10 and not task.done()
            assert await task is None
            with Busy(stream):
                gone = CreditStream.unsubscribe_async(stream, subscriber=inbox.pid, timeout=None)
                ticks, task = await ticking_while(gone, 0.3)
                assert ticks >= 10 and not task.done()
            assert await task is True

    asyncio.run(main())


def test_waiting_requests_park_no_thread():
    """A hundred subscribes waiting on a busy stream: not one more thread."""
    stream = CreditStream.start_link()

    async def main() -> list[dict[str, Any]]:
        inboxes = [sv.Inbox() for _ in range(100)]
        try:
            with Busy(stream):
                threads = threading.active_count()
                waiting = [
                    asyncio.ensure_future(
                        CreditStream.subscribe_async(stream, subscriber=inbox.pid, timeout=None)
                    )
                    for inbox in inboxes
                ]
                await asyncio.sleep(0.2)
                assert threading.active_count() <= threads
                assert not any(task.done() for task in waiting)
            return await asyncio.gather(*waiting)
        finally:
            for inbox in inboxes:
                inbox.close()

    assert len(asyncio.run(main())) == 100


# -- the same typed errors as the sync requests ----------------------------------------------


def test_refusals_are_the_sync_requests_errors():
    stream = CreditStream.start_link(max_buffered=1)
    for word in ("a", "b"):
        CreditStream.publish(stream, word)
    inbox, push = sv.Inbox(), sv.Inbox()
    CreditStream.subscribe(stream, after=2, mode="credit", subscriber=inbox.pid)
    CreditStream.subscribe(stream, after=2, subscriber=push.pid)
    cases: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = [
        ("replay_gap", "subscribe", (), {"after": 0}),
        ("cursor_ahead", "subscribe", (), {"after": 9}),
        ("invalid_stream_option", "subscribe", (), {"mode": "credit", "credit": 0}),
        ("invalid_stream_option", "subscribe", (), {"mode": "pull"}),
        ("invalid_stream_option", "subscribe", (), {"after": 2, "subscriber": inbox.pid}),
        ("not_subscribed", "ack", (1,), {}),
        ("not_credit_subscriber", "ack", (2,), {"subscriber": push.pid}),
        ("invalid_credit_ack", "ack", (7,), {"subscriber": inbox.pid}),
        ("invalid_stream_option", "ack", (-1,), {"subscriber": inbox.pid}),
    ]
    for reason, method, args, kwargs in cases:
        expected, got = errors(method, stream, *args, **kwargs)
        assert type(got) is type(expected) is StreamError, (reason, method, kwargs)
        assert got.reason == expected.reason == reason and got.gap == expected.gap
    _, gap = errors("subscribe", stream, after=0)
    assert gap.gap == {
        "after_sequence": 0,
        "oldest_available_sequence": 2,
        "latest_sequence": 2,
        "terminal": False,
    }
    assert CreditStream.status(stream)["subscribers"] == 2  # no refusal changed anything
    inbox.close()
    push.close()


def test_a_dead_stream_is_the_same_error():
    stream = CreditStream.start_link()
    sv.stop(stream)
    for method, args in (("subscribe", ()), ("ack", (1,)), ("unsubscribe", ())):
        expected, got = errors(method, stream, *args)
        assert type(got) is type(expected) is sv.ProcessExit, method
        assert got.reason == expected.reason == "noproc"
    expected, got = errors("subscribe", "no such stream")
    assert type(got) is type(expected) is sv.ProcessExit
    assert got.reason == expected.reason == "noproc"


def test_timeouts_are_call_timeouts_as_with_the_sync_requests():
    stream = CreditStream.start_link()
    with sv.Inbox() as inbox:
        CreditStream.subscribe(stream, mode="credit", subscriber=inbox.pid)
        with Busy(stream):
            for method, args in (("subscribe", ()), ("ack", (0,)), ("unsubscribe", ())):
                expected, got = errors(method, stream, *args, subscriber=inbox.pid, timeout=0.05)
                assert type(got) is type(expected) is sv.CallTimeout, method


# -- a subscriber whose caller gave up is withdrawn ------------------------------------------


@pytest.mark.usefixtures("leak_check")
def test_a_cancelled_subscribe_leaves_no_subscriber():
    stream = CreditStream.start_link()
    inbox = sv.Inbox()

    async def cancel_while_waiting() -> None:
        with Busy(stream):
            task = asyncio.ensure_future(
                CreditStream.subscribe_async(stream, subscriber=inbox.pid, timeout=None)
            )
            await asyncio.sleep(0.05)  # the request is in the stream's mailbox
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(cancel_while_waiting())  # the stream handles the subscribe only now
    assert CreditStream.status(stream)["subscribers"] == 0
    CreditStream.publish(stream, "late")
    with pytest.raises(TimeoutError):
        inbox.receive(timeout=0.1)
    inbox.close()
    sv.stop(stream)


@pytest.mark.usefixtures("leak_check")
def test_a_timed_out_subscribe_leaves_no_subscriber_sync_or_awaited():
    stream = CreditStream.start_link()
    awaited, blocked = sv.Inbox(), sv.Inbox()
    with Busy(stream):
        with pytest.raises(sv.CallTimeout):
            run(CreditStream.subscribe_async(stream, subscriber=awaited.pid, timeout=0.05))
        with pytest.raises(sv.CallTimeout):
            CreditStream.subscribe(stream, subscriber=blocked.pid, timeout=0.05)
    assert CreditStream.status(stream)["subscribers"] == 0
    CreditStream.publish(stream, "late")
    for inbox in (awaited, blocked):
        with pytest.raises(TimeoutError):
            inbox.receive(timeout=0.1)
        inbox.close()
    sv.stop(stream)


def test_a_withdrawal_removes_only_the_subscription_its_request_made():
    """A second, refused subscribe of the same inbox, given up on: the first stays."""
    stream = CreditStream.start_link()
    with sv.Inbox() as inbox:
        CreditStream.subscribe(stream, subscriber=inbox.pid)

        async def give_up() -> None:
            with Busy(stream):
                task = asyncio.ensure_future(
                    CreditStream.subscribe_async(stream, subscriber=inbox.pid, timeout=None)
                )
                await asyncio.sleep(0.05)
                task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(give_up())
        assert CreditStream.status(stream)["subscribers"] == 1
        CreditStream.publish(stream, "still here")
        assert inbox.receive(timeout=2) == StreamItem(stream, 1, "still here")


def test_a_subscription_made_before_the_withdrawal_arrives_is_removed_with_its_items():
    """The answer came, but the caller had given up: the subscription is withdrawn,
    whatever was delivered stays in the mailbox, and nothing more comes."""
    stream = CreditStream.start_link()
    CreditStream.publish(stream, "a")
    with sv.Inbox() as inbox:

        async def give_up_at_once() -> None:
            task = asyncio.ensure_future(CreditStream.subscribe_async(stream, subscriber=inbox.pid))
            await asyncio.sleep(0)  # sent: the stream may answer before the cancel lands
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(give_up_at_once())
        wait_until(lambda: CreditStream.status(stream)["subscribers"] == 0)
        CreditStream.publish(stream, "b")
        received = []
        try:
            while True:
                received.append(inbox.receive(timeout=0.1))
        except TimeoutError:
            pass
        assert received in ([], [StreamItem(stream, 1, "a")])


def test_a_hand_built_subscribe_with_a_bad_token_is_refused():
    stream = CreditStream.start_link()
    with sv.Inbox() as inbox:
        answer = sv.call(stream, Subscribe(inbox.pid, "push", 0, 1, "not a ref"))
        assert isinstance(answer, sv.Refused) and answer.error.reason == "invalid_stream_option"
    assert CreditStream.status(stream)["subscribers"] == 0
