"""GenServer: callbacks, replies, start/init, crashes, terminate and fencing."""

from __future__ import annotations

import threading
import time

import pytest
from structlog.testing import capture_logs

import supervision as sv
from tests.helpers import Recorder, wait_dead, wait_until

pytestmark = pytest.mark.usefixtures("each_dispatcher")


class Counter(sv.GenServer):
    def init(self, start):
        return start

    def handle_call(self, request, from_, state):
        if request == "get":
            return sv.Reply(state, state)
        if request == "crash":
            raise ValueError("boom with api_key=AIzaSyA-very-secret-value-123456")
        if request == "stop_with_reply":
            return sv.Stop("normal", state, reply="bye")
        if request == "bad_return":
            return 42
        if request == "self_call":
            return sv.Reply(sv.call(sv.self_pid(), "get"), state)
        if isinstance(request, tuple) and request[0] == "sleep":
            time.sleep(request[1])
            return sv.Reply("slept", state + 1000)
        raise AssertionError(request)

    def handle_cast(self, msg, state):
        if msg == "stop":
            return sv.Stop("normal", state)
        return state + msg

    def handle_info(self, msg, state):
        if msg == "info":
            return state + 100
        return state


def test_call_cast_and_info_thread_explicit_state():
    pid = Counter.start_link(1)
    sv.cast(pid, 2)
    sv.send(pid, "info")
    assert sv.call(pid, "get") == 103  # mailbox order: cast, info, then the call


def test_start_link_returns_after_init_and_links_caller():
    pid = Counter.start_link(0)
    assert pid.is_alive()
    assert repr(pid).startswith("<0.") and repr(pid).endswith(">")
    me = sv.self_pid()
    assert pid._process.counts()[0] == 1 and me._process.counts()[0] >= 1


def test_init_raising_fails_start_with_crash_reason_and_does_not_kill_caller():
    class Broken(sv.GenServer):
        def init(self, args):
            raise RuntimeError("no config")

    with pytest.raises(sv.StartError) as info:
        Broken.start_link()
    assert info.value.reason == sv.Crash("RuntimeError", "no config")
    # the caller was unlinked before the process exited: it is still alive
    assert sv.self_pid().is_alive()
    assert sv.monitor(Counter.start(0))  # the caller can carry on


def test_init_returning_stop_fails_start_with_that_reason():
    class Refuses(sv.GenServer):
        def init(self, args):
            return sv.Stop(("bad_args", args))

    with pytest.raises(sv.StartError) as info:
        Refuses.start(7)
    assert info.value.reason == ("bad_args", 7)


def test_name_registration_and_already_started():
    pid = Counter.start_link(5, name="gs-named")
    assert sv.whereis("gs-named") == pid
    assert sv.call("gs-named", "get") == 5
    with pytest.raises(sv.AlreadyStarted) as info:
        Counter.start(0, name="gs-named")
    assert info.value.pid == pid
    assert info.value.reason == ("already_started", pid)


def test_callback_exception_crashes_process_with_bounded_secret_free_reason():
    pid = Counter.start(0)
    ref = sv.monitor(pid)
    with capture_logs() as logs, pytest.raises(sv.ProcessExit) as info:
        sv.call(pid, "crash")
    reason = info.value.reason
    assert isinstance(reason, sv.Crash) and reason.kind == "ValueError"
    assert "AIza" not in reason.message and "[redacted]" in reason.message
    down = sv.receive(1.0, match=lambda m: isinstance(m, sv.Down) and m.ref == ref)
    assert down.reason == reason and not pid.is_alive()
    crashed = [e for e in logs if e["event"] == "supervision.process.crashed"]
    assert (
        len(crashed) == 1 and crashed[0]["server"] == "Counter" and crashed[0]["during"] == "call"
    )
    assert "AIza" not in str(crashed[0])


def test_crash_message_is_bounded():
    class Loud(sv.GenServer):
        def handle_cast(self, msg, state):
            raise RuntimeError("x" * 100_000)

    pid = Loud.start()
    sv.cast(pid, "go")
    reason = wait_dead(pid)
    assert (
        isinstance(reason, sv.Crash) and len(reason.message) <= sv.signals.MAX_CRASH_MESSAGE_CHARS
    )


def test_caller_sees_callee_death_at_once_not_at_timeout():
    pid = Counter.start(0)
    threading.Timer(0.05, lambda: sv.exit(pid, "kill")).start()
    started = time.monotonic()
    with pytest.raises(sv.ProcessExit) as info:
        sv.call(pid, ("sleep", 5.0), timeout=30.0)
    assert info.value.reason == "killed"
    assert time.monotonic() - started < 2.0


def test_call_timeout_then_late_reply_is_dropped_and_server_lives():
    pid = Counter.start_link(0)
    with pytest.raises(sv.CallTimeout):
        sv.call(pid, ("sleep", 0.3), timeout=0.05)
    assert sv.call(pid, "get") == 1000  # the late reply went nowhere; state advanced


def test_call_to_dead_pid_or_unknown_name_is_noproc():
    pid = Counter.start(0)
    sv.stop(pid)
    with pytest.raises(sv.ProcessExit) as info:
        sv.call(pid, "get")
    assert info.value.reason == "noproc"
    with pytest.raises(sv.ProcessExit):
        sv.call("nobody-has-this-name", "get")
    sv.cast("nobody-has-this-name", 1)  # casts never fail


def test_calling_self_is_refused():
    pid = Counter.start(0)
    with pytest.raises(sv.ProcessExit) as info:
        sv.call(pid, "self_call")
    assert isinstance(info.value.reason, sv.Crash) and info.value.reason.kind == "KernelError"


def test_bad_return_value_crashes():
    pid = Counter.start(0)
    with pytest.raises(sv.ProcessExit) as info:
        sv.call(pid, "bad_return")
    assert info.value.reason.kind == "bad_return_value"


def test_deferred_reply_from_another_thread_while_server_stays_responsive():
    class Deferred(sv.GenServer):
        def handle_call(self, request, from_, state):
            if request == "slow":
                threading.Timer(0.1, lambda: sv.reply(from_, "done later")).start()
                return sv.NoReply(state + 1)
            return sv.Reply(state, state)

    pid = Deferred.start_link(0)
    results = []
    waiter = threading.Thread(target=lambda: results.append(sv.call(pid, "slow")))
    waiter.start()
    wait_until(lambda: sv.call(pid, "get") == 1)  # answered while "slow" is pending
    waiter.join(5)
    assert results == ["done later"]


def test_deferred_call_fails_when_server_dies_before_replying():
    class Forgets(sv.GenServer):
        def handle_call(self, request, from_, state):
            return sv.NoReply(state)

        def handle_cast(self, msg, state):
            return sv.Stop(("shutdown", "bye"), state)

    pid = Forgets.start(0)
    threading.Timer(0.05, lambda: sv.cast(pid, "stop")).start()
    with pytest.raises(sv.ProcessExit) as info:
        sv.call(pid, "wait", timeout=5)
    assert info.value.reason == ("shutdown", "bye")


def test_stop_with_reply_runs_terminate_then_replies():
    log = Recorder()

    class Logged(Counter):
        def terminate(self, reason, state):
            log.add(("terminate", reason))

    pid = Logged.start(0)
    ref = sv.monitor(pid)
    assert sv.call(pid, "stop_with_reply") == "bye"
    down = sv.receive(2, match=lambda m: isinstance(m, sv.Down) and m.ref == ref)
    assert down.reason == "normal"
    assert log.snapshot() == [("terminate", "normal")]


def test_stop_function_runs_terminate_and_waits():
    log = Recorder()

    class Logged(Counter):
        def terminate(self, reason, state):
            time.sleep(0.05)
            log.add(("terminate", reason, state))

    pid = Logged.start(3)
    sv.stop(pid, ("shutdown", "maintenance"))
    assert not pid.is_alive()
    assert log.snapshot() == [("terminate", ("shutdown", "maintenance"), 3)]
    with pytest.raises(sv.ProcessExit):
        sv.stop(pid)


def test_terminate_raising_makes_that_the_exit_reason():
    class BadTerminate(Counter):
        def terminate(self, reason, state):
            raise KeyError("cleanup")

    pid = BadTerminate.start(0)
    with pytest.raises(sv.ProcessExit) as info:
        sv.stop(pid)
    assert info.value.reason.kind == "KeyError"


def test_terminate_runs_on_trapped_shutdown_from_parent_but_not_on_kill():
    log = Recorder()

    class Trapper(sv.GenServer):
        def init(self, args):
            sv.trap_exit(True)
            return args

        def terminate(self, reason, state):
            log.add((state, reason))

    sup = sv.Supervisor.start([sv.ChildSpec("a", lambda: Trapper.start_link("a"))])
    sv.exit(sup, "shutdown")  # from a stranger: a supervisor ignores it, as in OTP
    assert [c.id for c in sv.Supervisor.which_children(sup)] == ["a"]
    sv.stop(sup, "shutdown")  # the supervisor sends "shutdown" to its child, the parent
    assert log.snapshot() == [("a", "shutdown")]
    killed = Trapper.start("k")
    sv.exit(killed, "kill")
    assert wait_dead(killed) == "killed"
    time.sleep(0.05)
    assert ("k", "killed") not in log.snapshot()


def test_killed_busy_handler_is_fenced_its_results_discarded():
    log = Recorder()
    release = threading.Event()

    class Busy(sv.GenServer):
        def handle_cast(self, msg, state):
            release.wait(5)  # a sync handler cannot be pre-empted
            sv.send(msg, "sent after kill")
            log.add("handler returned")
            return state + 1

        def terminate(self, reason, state):
            log.add("terminate")

    pid = Busy.start(0)
    me = sv.self_pid()
    sv.cast(pid, me)
    time.sleep(0.05)
    sv.exit(pid, "kill")
    assert not pid.is_alive()  # dead at once, while its handler still runs
    release.set()
    wait_until(lambda: log.snapshot() == ["handler returned"])
    with pytest.raises(TimeoutError):
        sv.receive(0.2)  # the send from the fenced handler was dropped
    assert "terminate" not in log.snapshot()


def test_process_exit_signal_to_non_trapping_server_kills_it_immediately():
    pid = Counter.start(0)
    sv.exit(pid, ("shutdown", "x"))
    assert wait_dead(pid) == ("shutdown", "x")
    pid2 = Counter.start(0)
    sv.exit(pid2, "normal")  # ignored by a process that does not trap exits
    assert sv.call(pid2, "get") == 0


def test_unhandled_call_crashes_with_clear_reason():
    class Mute(sv.GenServer):
        pass

    pid = Mute.start()
    with pytest.raises(sv.ProcessExit) as info:
        sv.call(pid, "hello")
    assert info.value.reason.kind == "KernelError"
    assert "does not handle calls" in info.value.reason.message


def test_concurrent_callers_all_get_their_own_reply():
    class Echo(sv.GenServer):
        def handle_call(self, request, from_, state):
            return sv.Reply(request, state)

    pid = Echo.start_link()
    results: dict[int, list[int]] = {}

    def worker(n: int) -> None:
        results[n] = [sv.call(pid, n * 1000 + i) for i in range(200)]

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert all(results[n] == [n * 1000 + i for i in range(200)] for n in range(8))


def test_concurrent_starts_of_one_name_have_one_winner_and_never_hang():
    barrier = threading.Barrier(8)
    outcomes = []

    def start():
        barrier.wait()
        try:
            outcomes.append(Counter.start(0, name="contended-start", timeout=10))
        except sv.AlreadyStarted as error:
            outcomes.append(error)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    winners = [o for o in outcomes if isinstance(o, sv.Pid)]
    assert len(outcomes) == 8 and len(winners) == 1
    assert all(o.pid == winners[0] for o in outcomes if isinstance(o, sv.AlreadyStarted))
    sv.stop(winners[0])


def test_start_link_timeout_does_not_kill_the_caller():
    class SlowInit(sv.GenServer):
        def init(self, args):  # with a timeout, a pooled init runs on a pool thread
            time.sleep(0.5)
            return args

    with pytest.raises(sv.StartError) as info:
        SlowInit.start_link(0, timeout=0.05)
    assert info.value.reason == "timeout"
    assert sv.self_pid().is_alive()
    with pytest.raises(TimeoutError):
        sv.receive(0.6)  # no exit signal arrives later either


def test_negative_timeouts_time_out_at_once_and_leave_no_monitor():
    class Silent(sv.GenServer):
        def handle_call(self, request, from_, state):
            return sv.NoReply(state)

    pid = Silent.start_link()
    started = time.monotonic()
    with pytest.raises(sv.CallTimeout):
        sv.call(pid, "x", timeout=-1)
    assert time.monotonic() - started < 1
    assert pid._process.counts()[1] == 0


def test_a_server_cannot_stop_itself_with_stop():
    class SelfStopper(sv.GenServer):
        def handle_call(self, request, from_, state):
            sv.stop(sv.self_pid())
            return sv.Reply("unreachable", state)

    pid = SelfStopper.start()
    with pytest.raises(sv.ProcessExit) as info:
        sv.call(pid, "go", timeout=5)
    assert "cannot stop itself" in info.value.reason.message


def test_crash_messages_lose_bearer_tokens_behind_an_authorization_header():
    message = sv.Crash.from_exception(
        RuntimeError("upstream 502: Authorization: Bearer sk-LEAKED-123; api_key=abc")
    ).message
    assert "sk-LEAKED-123" not in message and "abc" not in message
    assert message.startswith("upstream 502: Authorization: [redacted]")


def test_a_reply_slot_exposes_its_outcome_read_only():
    """`From.failed` / `From.value`: what settled the slot, for code that waits on one."""
    replied = sv.From()
    assert replied.settle(42, False) and not replied.settle(0, False)  # first one wins
    assert replied.wait(0) and (replied.failed, replied.value) == (False, 42)
    assert replied.result() == 42
    died = sv.From()
    died.settle("killed", True)
    assert (died.failed, died.value) == (True, "killed")
    with pytest.raises(sv.ProcessExit):
        died.result()
    with pytest.raises(AttributeError):
        replied.value = 1  # read-only


def test_the_package_exports_what_the_kernel_readme_promises():
    """`supervision/__init__.py` exports every name of `__all__`, the GenServer names
    included; the README says everything public is exported."""
    for name in sv.__all__:
        assert getattr(sv, name) is not None, name
    for name in (
        "GenServer", "call", "cast", "reply", "stop", "Reply", "NoReply", "Stop", "From",
        "Ignore", "Exit", "Timeout", "get_state", "replace_state", "Ok", "Refused",
    ):  # fmt: skip
        assert name in sv.__all__, name
