"""The timer service hands timers over without a lock (session 31): a starter that sets
a timer never waits for the timer thread. These pin what the hand-over must keep: an
earlier timer rings the sleeping thread, firing and cancelling never both win under
concurrent use, and cancelled timers far in the future do not pile up."""

from __future__ import annotations

import random
import threading
import time

import supervision as sv
from supervision.timer_service import _SLACK, service
from tests.helpers import wait_until


def test_an_earlier_timer_rings_a_thread_asleep_until_a_later_one():
    """The thread sleeps toward a timer an hour away; one due in 50 ms fires then, not
    in an hour (the ring), and the far one is cancelled with nothing left."""
    with sv.Inbox() as inbox:
        far = sv.send_after(inbox.pid, "far", 3600.0)
        time.sleep(0.05)  # the thread is asleep toward `far` (or toward an older timer)
        began = time.monotonic()
        sv.send_after(inbox.pid, "near", 0.05)
        assert inbox.receive(10.0) == "near"
        assert time.monotonic() - began < 5.0  # an hour without the ring
        assert sv.cancel_timer(far) is not None


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
    """10,000 timers an hour away, all cancelled: the thread drops their entries (a
    cancel rings it once dropped ones outnumber live ones), so what it holds stays
    within twice the live timers plus a slack."""
    with sv.Inbox() as inbox:
        timers = [sv.send_after(inbox.pid, ("pile", i), 3600.0) for i in range(10_000)]
        for timer in timers:
            assert sv.cancel_timer(timer) is not None
        wait_until(
            lambda: (
                len(service._heap) + len(service._incoming) <= 2 * len(service._active) + _SLACK + 1
            )
        )
