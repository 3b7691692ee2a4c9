"""Inbox: a private mailbox process owned by its creator, readable from threads and asyncio."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import supervision as sv
from tests.helpers import in_thread, wait_dead, wait_until

pytestmark = pytest.mark.usefixtures("leak_check")


class Holder(sv.GenServer):
    """A server that opens an inbox in its own name and hands out its pid."""

    def handle_call(self, request, from_, state):
        inbox = sv.Inbox("held")
        return sv.Reply(inbox.pid, inbox)


def test_messages_sent_to_its_pid_are_received_in_order():
    with sv.Inbox() as inbox:
        for n in range(3):
            sv.send(inbox.pid, n)
        assert [inbox.receive(1.0) for _ in range(3)] == [0, 1, 2]
    assert inbox.closed


def test_match_takes_the_first_accepted_message_and_leaves_the_rest():
    with sv.Inbox() as inbox:
        for message in ("a", 1, "b", 2):
            sv.send(inbox.pid, message)
        assert inbox.receive(1.0, match=lambda m: isinstance(m, int)) == 1
        assert [inbox.receive(1.0) for _ in range(3)] == ["a", "b", 2]


def test_receive_times_out_and_a_closed_inbox_raises_process_exit():
    inbox = sv.Inbox()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        inbox.receive(0.05)
    assert time.monotonic() - started >= 0.04
    with pytest.raises(TimeoutError):
        inbox.receive(0.05, match=lambda m: False)
    sv.send(inbox.pid, "dropped on close")
    inbox.close()
    inbox.close()  # idempotent
    with pytest.raises(sv.ProcessExit) as info:
        inbox.receive(0.05)
    assert info.value.reason == "normal"
    with pytest.raises(sv.ProcessExit):
        inbox.monitor(sv.self_pid())
    sv.send(inbox.pid, "to nobody")  # sending to a dead pid does nothing


def test_close_wakes_a_blocked_receive():
    inbox = sv.Inbox()
    threading.Timer(0.05, inbox.close).start()
    with pytest.raises(sv.ProcessExit):
        inbox.receive(5.0)


def test_it_exits_when_its_owner_thread_ends():
    inbox = in_thread(sv.Inbox)
    wait_until(lambda: inbox.closed)
    assert wait_dead(inbox.pid) == "normal"


def test_it_exits_when_its_owner_server_exits():
    holder = Holder.start_link()
    inbox_pid = sv.call(holder, "open")
    assert inbox_pid.is_alive()
    ref = sv.monitor(inbox_pid)
    sv.stop(holder)
    down = sv.receive(1.0, match=lambda m: isinstance(m, sv.Down) and m.ref == ref)
    assert down.reason == "normal"


def test_an_inbox_made_by_a_dead_owner_is_closed_at_once():
    def made_by_a_killed_thread():
        doomed = Holder.start_link()
        sv.exit(doomed, "boom")  # the link kills this thread's pseudo-process
        return sv.Inbox()

    assert in_thread(made_by_a_killed_thread).closed


def test_monitor_delivers_down_into_the_inbox_not_the_owner():
    target = Holder.start()
    with sv.Inbox() as inbox:
        ref = inbox.monitor(target)
        sv.stop(target, "shutdown")
        assert inbox.receive(1.0) == sv.Down(ref, target, "shutdown")
        with pytest.raises(TimeoutError):
            sv.receive(0.02)  # the owner's own mailbox got nothing


def test_monitor_of_a_dead_or_unknown_process_is_noproc_at_once():
    dead = Holder.start()
    sv.stop(dead)
    with sv.Inbox() as inbox:
        ref = inbox.monitor(dead)
        assert inbox.receive(1.0) == sv.Down(ref, dead, "noproc")
        ref = inbox.monitor("nobody.registered.this")
        assert inbox.receive(1.0) == sv.Down(ref, "nobody.registered.this", "noproc")


def test_demonitor_with_flush_drops_a_delivered_down():
    target = Holder.start()
    with sv.Inbox() as inbox:
        ref = inbox.monitor(target)
        sv.stop(target)
        wait_until(lambda: not target.is_alive())
        time.sleep(0.01)
        assert inbox.demonitor(ref, flush=True) is False
        with pytest.raises(TimeoutError):
            inbox.receive(0.02)


def test_a_dead_inbox_is_seen_by_its_monitors_and_subscriptions():
    inbox = sv.Inbox()
    stream = sv.CreditStream.start_link()
    sv.CreditStream.subscribe(stream, subscriber=inbox.pid)
    assert sv.CreditStream.status(stream)["subscribers"] == 1
    inbox.close()
    wait_until(lambda: sv.CreditStream.status(stream)["subscribers"] == 0)
    sv.stop(stream)


def test_set_waker_runs_after_each_delivery():
    woken = []
    with sv.Inbox() as inbox:
        inbox.set_waker(lambda: woken.append(1))
        sv.send(inbox.pid, "a")
        sv.send(inbox.pid, "b")
        assert len(woken) == 2
        inbox.set_waker(None)
        sv.send(inbox.pid, "c")
        assert len(woken) == 2


def test_areceive_returns_a_waiting_message_and_times_out():
    async def scenario():
        with sv.Inbox() as inbox:
            sv.send(inbox.pid, "ready")
            assert await inbox.areceive(timeout=0) == "ready"
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await inbox.areceive(timeout=0.05)
            assert time.monotonic() - started >= 0.04
            with pytest.raises(TimeoutError):
                await inbox.areceive(timeout=0)
            sv.send(inbox.pid, 1)
            with pytest.raises(TimeoutError):
                await inbox.areceive(timeout=0.05, match=lambda m: m == 2)
            assert await inbox.areceive(timeout=1.0) == 1

    asyncio.run(scenario())


def test_areceive_is_woken_by_a_later_matching_message_and_by_close():
    async def scenario():
        inbox = sv.Inbox()
        loop = asyncio.get_running_loop()
        loop.call_later(0.02, sv.send, inbox.pid, "skip")
        loop.call_later(0.04, sv.send, inbox.pid, "take")
        assert await inbox.areceive(timeout=5.0, match=lambda m: m == "take") == "take"
        assert await inbox.areceive(timeout=0) == "skip"  # passed over, not lost
        threading.Timer(0.02, inbox.close).start()
        with pytest.raises(sv.ProcessExit):
            await inbox.areceive(timeout=5.0)

    asyncio.run(scenario())


def test_a_cancelled_areceive_leaves_no_waiter_behind():
    async def scenario():
        with sv.Inbox() as inbox:
            waiting = asyncio.ensure_future(inbox.areceive())
            await asyncio.sleep(0.01)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert not inbox._process._waiters
            sv.send(inbox.pid, "still there")
            assert inbox.receive(1.0) == "still there"

    asyncio.run(scenario())


def test_a_thousand_inboxes_await_on_one_loop_without_a_thread_each():
    count = 1000

    async def scenario():
        inboxes = [sv.Inbox() for _ in range(count)]
        threads_before = threading.active_count()
        waiting = [asyncio.ensure_future(inbox.areceive(timeout=30)) for inbox in inboxes]
        await asyncio.sleep(0.05)  # every areceive is parked on its future
        assert threading.active_count() <= threads_before + 2
        assert not any(task.done() for task in waiting)

        def send_all():
            for n, inbox in enumerate(inboxes):
                sv.send(inbox.pid, n)

        sender = threading.Thread(target=send_all)
        sender.start()
        results = await asyncio.wait_for(asyncio.gather(*waiting), timeout=30)
        sender.join()
        for inbox in inboxes:
            inbox.close()
        return results

    assert asyncio.run(scenario()) == list(range(count))
