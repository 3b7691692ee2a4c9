"""The timer service hands timers over without a lock (session 31): a starter that sets
a timer never waits for the timer thread. These pin what the hand-over must keep: an
earlier timer rings the sleeping thread, firing and cancelling never both win under
concurrent use, and cancelled timers far in the future do not pile up."""

from __future__ import annotations

import random
import threading
import time

import supervision as sv
from supervision.process import resolve
from supervision.timer_service import _SLACK, TimerRef, _TimerService, service
from tests.helpers import wait_until


def test_an_earlier_timer_rings_a_thread_asleep_until_a_later_one():
    """A service of its own (no other test's timer wakes its thread) sleeps toward a
    timer an hour away; one due in 50 ms fires then, not in an hour (the ring), and the
    far one is cancelled with nothing left."""
    own = _TimerService()
    with sv.Inbox() as inbox:
        target = resolve(inbox.pid)
        far = TimerRef(inbox.pid, target, "far", time.monotonic() + 3600.0)
        own.schedule(far)
        wait_until(lambda: own._ring_before > time.monotonic())  # asleep toward `far`
        own.schedule(TimerRef(inbox.pid, target, "near", time.monotonic() + 0.05))
        assert inbox.receive(10.0) == "near"  # an hour without the ring
        assert own.cancel(far)
        assert own.active_count() == 0


def test_concurrent_schedules_and_cancels_fire_each_live_timer_once_and_no_cancelled_one():
    """Eight threads each set 300 timers due within 50 ms and cancel every other one:
    each timer whose cancel lost the race (it had fired) was delivered once, each
    cancelled one never; nothing stays scheduled."""
    delivered: list[tuple[int, int]] = []
    cancelled: set[tuple[int, int]] = set()
    lock = threading.Lock()

    with sv.Inbox() as inbox:

        def worker(n: int) -> None:
            rng = random.Random(n)
            timers = [sv.send_after(inbox.pid, (n, i), rng.uniform(0.0, 0.05)) for i in range(300)]
            for i, timer in enumerate(timers):
                if i % 2 and sv.cancel_timer(timer) is not None:
                    with lock:
                        cancelled.add((n, i))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        expected = 8 * 300 - len(cancelled)
        while len(delivered) < expected:
            delivered.append(inbox.receive(10.0))
        time.sleep(0.1)  # anything cancelled that would still fire has fired by now
        extra = []
        try:
            while True:
                extra.append(inbox.receive(0.0))
        except TimeoutError:
            pass
    assert extra == []
    assert len(set(delivered)) == len(delivered) == expected  # each once
    assert not cancelled & set(delivered)
    assert cancelled  # some cancels won
    # none of them is left scheduled (other tests' timers may be: the service is shared)
    wait_until(lambda: all(type(timer.message) is not tuple for timer in list(service._active)))


def test_cancelled_timers_far_in_the_future_do_not_pile_up():
    """10,000 timers an hour away on a service of its own, all cancelled: the thread
    drops their entries (a cancel rings it once dropped ones outnumber live ones), so
    what it holds stays within twice the live timers plus a slack."""
    own = _TimerService()
    with sv.Inbox() as inbox:
        target = resolve(inbox.pid)
        timers = [
            TimerRef(inbox.pid, target, ("pile", i), time.monotonic() + 3600.0)
            for i in range(10_000)
        ]
        for timer in timers:
            own.schedule(timer)
        for timer in timers:
            assert own.cancel(timer)
        wait_until(lambda: len(own._heap) + len(own._incoming) <= _SLACK)
        assert own.active_count() == 0
