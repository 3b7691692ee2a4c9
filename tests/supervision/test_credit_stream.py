"""Credit streams: replay, credit, gaps, terminal exactly once, subscriber lifecycle."""

from __future__ import annotations

import threading

import pytest

import supervision as sv
from supervision.credit_stream import (
    CreditStream,
    StreamDetached,
    StreamError,
    StreamItem,
    StreamTerminal,
    next_message,
)
from tests.helpers import in_thread, wait_until


def drain(stream, count, timeout=2.0):
    return [next_message(stream, timeout) for _ in range(count)]


def nothing_arrives(stream, wait=0.1):
    with pytest.raises(TimeoutError):
        next_message(stream, wait)
    return True


def reason(fn):
    with pytest.raises(StreamError) as info:
        fn()
    return info.value


def test_late_push_subscriber_gets_retained_items_then_the_same_terminal():
    stream = CreditStream.start_link()
    assert [CreditStream.publish(stream, f"e{i}") for i in (1, 2)] == [1, 2]
    assert CreditStream.finish(stream, "completed") == 3
    CreditStream.subscribe(stream)
    assert drain(stream, 3) == [
        StreamItem(stream, 1, "e1"),
        StreamItem(stream, 2, "e2"),
        StreamTerminal(stream, 3, "completed"),
    ]
    assert nothing_arrives(stream)
    assert CreditStream.status(stream)["subscribers"] == 0  # done after the terminal


def test_push_subscriber_gets_live_items_in_order():
    stream = CreditStream.start_link()
    CreditStream.publish(stream, "before")
    CreditStream.subscribe(stream, after=1)
    for i in range(50):
        CreditStream.publish(stream, i)
    CreditStream.finish(stream, "done")
    messages = drain(stream, 51)
    assert [m.seq for m in messages] == list(range(2, 53))
    assert messages[-1] == StreamTerminal(stream, 52, "done")


def test_credit_one_with_a_one_item_buffer():
    stream = CreditStream.start_link(max_buffered=1)
    CreditStream.subscribe(stream, mode="credit", credit=1)
    CreditStream.publish(stream, "a")
    CreditStream.publish(stream, "b")
    CreditStream.finish(stream, "completed")
    assert drain(stream, 1) == [StreamItem(stream, 1, "a")]
    assert nothing_arrives(stream)  # unacked: nothing more, even after completion
    CreditStream.ack(stream, 1)
    assert drain(stream, 1) == [StreamItem(stream, 2, "b")]
    assert nothing_arrives(stream)
    CreditStream.ack(stream, 2)
    assert drain(stream, 1) == [StreamTerminal(stream, 3, "completed")]  # needs no ack
    assert nothing_arrives(stream)


def test_resubscribe_after_eviction_is_a_replay_gap_and_installs_nothing():
    stream = CreditStream.start_link(max_buffered=1)
    for item in "abc":
        CreditStream.publish(stream, item)
    CreditStream.finish(stream, "done")
    error = reason(lambda: CreditStream.subscribe(stream, after=0, mode="credit"))
    assert error.reason == "replay_gap"
    assert error.gap == {
        "after_sequence": 0,
        "oldest_available_sequence": 3,
        "latest_sequence": 3,
        "terminal": True,
    }
    assert CreditStream.status(stream)["subscribers"] == 0
    CreditStream.subscribe(stream, after=2)  # a cursor inside the window works
    assert drain(stream, 2) == [StreamItem(stream, 3, "c"), StreamTerminal(stream, 4, "done")]


def test_ack_whose_next_item_was_evicted_is_a_gap_and_keeps_the_subscriber():
    stream = CreditStream.start_link(max_buffered=2)
    CreditStream.subscribe(stream, mode="credit")
    for item in "abcd":
        CreditStream.publish(stream, item)
    assert drain(stream, 1) == [StreamItem(stream, 1, "a")]
    error = reason(lambda: CreditStream.ack(stream, 1))
    assert error.reason == "replay_gap" and error.gap["oldest_available_sequence"] == 3
    assert CreditStream.status(stream)["subscribers"] == 1


def test_credit_errors():
    stream = CreditStream.start_link()
    assert reason(lambda: CreditStream.ack(stream, 1)).reason == "not_subscribed"
    CreditStream.subscribe(stream)
    assert reason(lambda: CreditStream.ack(stream, 1)).reason == "not_credit_subscriber"
    CreditStream.unsubscribe(stream)
    CreditStream.subscribe(stream, mode="credit", credit=2)
    for item in "abc":
        CreditStream.publish(stream, item)
    drain(stream, 2)
    assert (
        reason(lambda: CreditStream.ack(stream, 3)).reason == "invalid_credit_ack"
    )  # not delivered
    CreditStream.ack(stream, 2)  # cumulative
    CreditStream.ack(stream, 2)  # repeating the last ack is idempotent
    assert reason(lambda: CreditStream.ack(stream, 1)).reason == "invalid_credit_ack"
    assert drain(stream, 1) == [StreamItem(stream, 3, "c")]
    assert reason(lambda: CreditStream.subscribe(stream)).reason == "invalid_stream_option"  # twice
    other = in_thread(lambda: reason(lambda: CreditStream.subscribe(stream, after=99)).reason)
    assert other == "cursor_ahead"


def test_terminal_is_delivered_exactly_once_and_publishing_after_it_fails():
    stream = CreditStream.start_link()
    CreditStream.subscribe(stream)
    CreditStream.finish(stream, "x")
    assert drain(stream, 1) == [StreamTerminal(stream, 1, "x")]
    assert reason(lambda: CreditStream.finish(stream, "y")).reason == "already_terminal"
    assert reason(lambda: CreditStream.publish(stream, "late")).reason == "already_terminal"
    assert nothing_arrives(stream)


def test_dead_subscriber_is_removed():
    stream = CreditStream.start_link()
    ready, done = threading.Event(), threading.Event()

    def subscriber():
        CreditStream.subscribe(stream, mode="credit")
        ready.set()
        done.wait(5)

    thread = threading.Thread(target=subscriber)
    thread.start()
    ready.wait(5)
    assert CreditStream.status(stream)["subscribers"] == 1
    done.set()
    thread.join()
    wait_until(lambda: CreditStream.status(stream)["subscribers"] == 0)


def test_slow_push_subscriber_is_detached():
    stream = CreditStream.start_link(push_bound=5)
    CreditStream.subscribe(stream)
    for i in range(10):
        CreditStream.publish(stream, i)
    messages = drain(stream, 7)
    assert [m.seq for m in messages[:6]] == list(range(1, 7))
    assert messages[6] == StreamDetached(stream, "slow_subscriber")
    assert CreditStream.status(stream)["subscribers"] == 0


def test_server_subscriber_acks_from_handle_info():
    class Consumer(sv.GenServer):
        def init(self, stream):
            CreditStream.subscribe(stream, mode="credit", credit=1)
            return (stream, [])

        def handle_info(self, msg, state):
            stream, seen = state
            seen.append(msg)
            if isinstance(msg, StreamItem):
                CreditStream.ack(stream, msg.seq)
            return state

        def handle_call(self, request, from_, state):
            return sv.Reply(list(state[1]), state)

    stream = CreditStream.start_link()
    consumer = Consumer.start_link(stream)
    for i in range(20):
        CreditStream.publish(stream, i)
    CreditStream.finish(stream, "end")
    seen = wait_until(lambda: (lambda s: s if len(s) == 21 else None)(sv.call(consumer, "get")))
    assert [m.seq for m in seen] == list(range(1, 22))
    assert seen[-1] == StreamTerminal(stream, 21, "end")


def test_bounds_are_checked():
    with pytest.raises(StreamError):
        CreditStream.start_link(max_buffered=0)
    with pytest.raises(StreamError):
        CreditStream.start_link(max_buffered=10**9)
    stream = CreditStream.start_link(max_subscribers=1)
    CreditStream.subscribe(stream)
    assert (
        in_thread(lambda: reason(lambda: CreditStream.subscribe(stream)).reason)
        == "too_many_subscribers"
    )
    with pytest.raises(StreamError):
        CreditStream.subscribe(stream, mode="credit", credit=0)


def test_malformed_requests_are_refused_and_change_nothing():
    """Typed requests: anything else (the old tuple protocol, a subscriber that is not
    a pid, a seq that is not an int) is `invalid_stream_option`; the stream keeps its
    items and subscribers and never crashes."""
    from supervision.credit_stream import Ack, Publish, Subscribe, Unsubscribe
    from supervision.protocol import Ok, Refused

    stream = CreditStream.start_link()
    CreditStream.subscribe(stream, mode="credit", credit=1)
    CreditStream.publish(stream, "a")
    before = CreditStream.status(stream)
    me = sv.self_pid()
    for request in (
        ("publish", "x"),
        ("ack", me, 1),
        "status",
        Subscribe("not a pid", "push", 0, 1),
        Subscribe(me, "pull", 0, 1),
        Subscribe(me, "credit", -1, 1),
        Subscribe(me, "credit", 0, 0),
        Subscribe(me, "credit", 0, True),
        Ack(me, "1"),
        Ack(me, 1.0),
        Ack("not a pid", 1),
        Unsubscribe(None),
    ):
        answer = sv.call(stream, request)
        assert type(answer) is Refused, request
        assert answer.error.reason == "invalid_stream_option", request
    assert reason(lambda: CreditStream.ack(stream, "1")).reason == "invalid_stream_option"
    assert reason(lambda: CreditStream.subscribe(stream, mode="pull")).reason == (
        "invalid_stream_option"
    )
    sv.cast(stream, ("publish", "an old-style tuple"))
    sv.send(stream, Publish("sent, not called"))
    assert CreditStream.status(stream) == before
    assert next_message(stream, 1.0) == StreamItem(stream, 1, "a")
    assert sv.call(stream, Ack(me, 1)) == Ok(1)  # the subscription survived it all
    sv.stop(stream)


def test_async_publishing_keeps_order_and_close_waits_for_it():
    """`publish_async`/`finish_async` are casts: one publisher's items keep their order
    and numbers, and `close_async` stops the stream only after them."""
    stream = CreditStream.start_link(max_buffered=8)
    CreditStream.subscribe(stream)
    for item in ("a", "b", "c"):
        CreditStream.publish_async(stream, item)
    CreditStream.finish_async(stream, "done")
    CreditStream.close_async(stream)
    received = [next_message(stream, 2.0) for _ in range(4)]
    assert [(m.seq, getattr(m, "item", None)) for m in received[:3]] == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
    ]
    assert received[3] == StreamTerminal(stream, 4, "done")
    wait_until(lambda: not stream.is_alive())
