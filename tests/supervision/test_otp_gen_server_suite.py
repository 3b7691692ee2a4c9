"""GenServer against OTP's own tests: cases ported from ``lib/stdlib/test/gen_server_SUITE.erl``.

Every test names the case it follows. The server under test, `Suite`, plays the part
of the suite's own callback module; its requests are typed (NamedTuples, `match`).
Differences from the Erlang suite: `{ok, State}` is a bare state, `{noreply, S, T}`
is ``NoReply(S, timeout=T)``, ``{continue, C}`` is ``continue_=C``, ``exit(R)`` is
``raise Exit(R)``, ``sys:get_state`` is `get_state`.
"""

from __future__ import annotations

import math
import threading
from typing import Any, NamedTuple

import pytest
from structlog.testing import capture_logs

import supervision as sv
from tests.helpers import Recorder, wait_dead, wait_until

pytestmark = pytest.mark.usefixtures("each_dispatcher")


# -- the suite's messages ------------------------------------------------------------------


class Ping(NamedTuple):
    pass


class StopCall(NamedTuple):
    """``stop``: stop with reason ``stopped``, replying ``ok``."""


class ExitWith(NamedTuple):
    """``exit(Reason)`` from a callback."""

    reason: Any


class DelayedAnswer(NamedTuple):
    """Defer the reply; the idle timeout answers ``delayed``."""

    seconds: float


class CallWithin(NamedTuple):
    """Reply ``ok``; a `NextCall` within `seconds` is answered ``ok``, later ``False``."""

    seconds: float


class NextCall(NamedTuple):
    pass


class DelayedCast(NamedTuple):
    """After `seconds` with no message, tell `to` ``delayed``."""

    to: sv.Pid
    seconds: float


class TimeoutZero(NamedTuple):
    """Send ourselves `AfterTimeoutZero`, then return a zero timeout."""

    to: sv.Pid


class AfterTimeoutZero(NamedTuple):
    to: sv.Pid


class ContinueReply(NamedTuple):
    to: sv.Pid


class ContinueNoReply(NamedTuple):
    to: sv.Pid


class ContinueContinue(NamedTuple):
    to: sv.Pid


class ContinueStop(NamedTuple):
    pass


class ContinueTimeout(NamedTuple):
    to: sv.Pid
    seconds: float


# handle_continue payloads
class Message(NamedTuple):
    to: sv.Pid


class MessageReply(NamedTuple):
    to: sv.Pid
    from_: sv.From


class AfterContinue(NamedTuple):
    to: sv.Pid


class Timed(NamedTuple):
    to: sv.Pid
    seconds: float


# what `Suite` sends back to the test
class Continued(NamedTuple):
    pid: sv.Pid


class BeforeContinue(NamedTuple):
    pid: sv.Pid


class AfterContinued(NamedTuple):
    pid: sv.Pid


class Ack(NamedTuple):
    pid: sv.Pid


class EventTimeout(NamedTuple):
    pid: sv.Pid


class Delayed(NamedTuple):
    pid: sv.Pid


# init arguments
class InitContinue(NamedTuple):
    to: sv.Pid


class InitTimeout(NamedTuple):
    to: sv.Pid
    seconds: float


class InitWait(NamedTuple):
    release: threading.Event


class Suite(sv.GenServer):
    """The suite's callback module."""

    def __init__(self) -> None:
        self.terminated = Recorder()

    def init(self, args: Any) -> Any:
        match args:
            case "ignore":
                return sv.Ignore()
            case "stop":
                return sv.Stop("stopped")
            case ("crash", kind):
                if kind == "exit":
                    raise sv.Exit("bailout")
                raise RuntimeError("bailout")
            case InitWait(release):
                release.wait(10)
                return []
            case InitContinue(to):
                sv.send(sv.self_pid(), AfterContinue(to))
                return sv.NoReply([], continue_=Message(to))
            case InitTimeout(to, seconds):
                return sv.NoReply(("event_timeout", to), timeout=seconds)
            case ("state", state):
                return state
        return []

    def handle_call(self, request: Any, from_: sv.From, state: Any) -> Any:
        match request:
            case Ping():
                return sv.Reply("pong", state)
            case StopCall():
                return sv.Stop("stopped", state, reply="ok")
            case ExitWith(reason):
                raise sv.Exit(reason)
            case DelayedAnswer(seconds):
                return sv.NoReply(("reply_to", from_, state), timeout=seconds)
            case CallWithin(seconds):
                return sv.Reply("ok", "call_within", timeout=seconds)
            case NextCall():
                return sv.Reply(state == "call_within", [])
            case ContinueReply(to):
                sv.send(sv.self_pid(), AfterContinue(to))
                return sv.Reply("ok", state, continue_=Message(to))
            case ContinueNoReply(to):
                sv.send(sv.self_pid(), AfterContinue(to))
                return sv.NoReply(state, continue_=MessageReply(to, from_))
            case "both_actions":
                return sv.Reply("ok", state, timeout=1.0, continue_=Message(sv.self_pid()))
            case "bad_timeout":
                return sv.Reply("ok", state, timeout=-1)
        return sv.Reply(("error", "invalid_request"), state)

    def handle_cast(self, msg: Any, state: Any) -> Any:
        match msg:
            case DelayedCast(to, seconds):
                return sv.NoReply(("delayed_cast", to), timeout=seconds)
            case TimeoutZero(to):
                sv.send(sv.self_pid(), AfterTimeoutZero(to))
                return sv.NoReply(("event_timeout", to), timeout=0)
            case ContinueNoReply(to):
                sv.send(sv.self_pid(), AfterContinue(to))
                return sv.NoReply(state, continue_=Message(to))
            case ExitWith(reason):
                raise sv.Exit(reason)
        return state

    def handle_info(self, msg: Any, state: Any) -> Any:
        match msg, state:
            case sv.Timeout(), ("reply_to", from_, inner):
                sv.reply(from_, "delayed")
                return inner
            case sv.Timeout(), "call_within":
                return []
            case sv.Timeout(), ("delayed_cast", to):
                sv.send(to, Delayed(sv.self_pid()))
                return []
            case sv.Timeout(), ("event_timeout", to):
                sv.send(to, EventTimeout(sv.self_pid()))
                return []
            case AfterTimeoutZero(to), _:
                sv.send(to, AfterTimeoutZero(sv.self_pid()))
                return state
            case AfterContinue(to), _:
                sv.send(to, AfterContinued(sv.self_pid()))
                sv.send(to, Ack(sv.self_pid()))
                return state
            case ContinueNoReply(to), _:
                sv.send(sv.self_pid(), AfterContinue(to))
                return sv.NoReply(state, continue_=Message(to))
            case ContinueContinue(to), _:
                return sv.NoReply(state, continue_=ContinueContinue(to))
            case ContinueStop(), _:
                return sv.NoReply(state, continue_=ContinueStop())
            case ContinueTimeout(to, seconds), _:
                return sv.NoReply(state, continue_=Timed(to, seconds))
        return state

    def handle_continue(self, payload: Any, state: Any) -> Any:
        match payload:
            case Message(to):
                sv.send(to, Continued(sv.self_pid()))
                return state
            case MessageReply(to, from_):
                sv.send(to, Continued(sv.self_pid()))
                sv.reply(from_, "ok")
                return state
            case ContinueContinue(to):
                sv.send(to, BeforeContinue(sv.self_pid()))
                sv.send(sv.self_pid(), AfterContinue(to))
                return sv.NoReply(state, continue_=Message(to))
            case ContinueStop():
                return sv.Stop("normal", state)
            case Timed(to, seconds):
                return sv.NoReply(("event_timeout", to), timeout=seconds)
        raise AssertionError(payload)

    def terminate(self, reason: Any, state: Any) -> None:
        self.terminated.add(reason)


def read_replies(pid: sv.Pid) -> list[type]:
    """The suite's ``read_replies``: what `pid` sent up to its `Ack`, by class (one-field
    NamedTuples compare equal as tuples, so the class is what tells them apart)."""
    replies: list[type] = []
    while True:
        message = sv.receive(5.0)
        assert message[0] == pid
        if type(message) is Ack:
            return replies
        replies.append(type(message))


def next_from(pid: sv.Pid) -> type:
    """The class of the next message, which must come from `pid`."""
    message = sv.receive(5.0)
    assert message[0] == pid
    return type(message)


def no_message(wait: float = 0.05) -> bool:
    try:
        sv.receive(wait)
    except TimeoutError:
        return True
    return False


# -- start ---------------------------------------------------------------------------------


def test_start_anonymous_call_stop_then_noproc():
    """Follows gen_server_SUITE:start (anonymous, anonymous linked)."""
    sv.trap_exit(True)
    try:
        pid = Suite.start()
        assert sv.call(pid, Ping()) == "pong"
        assert sv.call(pid, StopCall()) == "ok"
        assert wait_dead(pid) == "stopped"
        with pytest.raises(sv.ProcessExit) as info:
            sv.call(pid, Ping(), timeout=1)
        assert info.value.reason == "noproc"
        linked = Suite.start_link()
        assert sv.call(linked, StopCall()) == "ok"
        assert sv.receive(5, match=lambda m: isinstance(m, sv.ExitSignal)) == sv.ExitSignal(
            linked, "stopped"
        )
    finally:
        sv.trap_exit(False)


def test_start_with_timeout_fails_with_timeout_and_the_process_is_gone():
    """Follows gen_server_SUITE:start (anonymous with timeout): ``{error, timeout}``,
    on both dispatchers; the half-started process is killed and its name is free."""
    release = threading.Event()
    try:
        pid = Suite.start(timeout=5)
        assert sv.call(pid, Ping()) == "pong"
        sv.stop(pid)
        with pytest.raises(sv.StartError) as info:
            Suite.start(InitWait(release), name="otp-slow-init", timeout=0.05)
        assert info.value.reason == "timeout"
        assert sv.whereis("otp-slow-init") is None
        with pytest.raises(sv.KernelError) as invalid:
            Suite.start(timeout=-1)  # refused before anything starts
        assert invalid.value.reason == "invalid_timeout"
        again = Suite.start(name="otp-slow-init", timeout=5)  # the name is free at once
        assert sv.call("otp-slow-init", Ping()) == "pong"
        sv.stop(again)
    finally:
        release.set()


def test_start_ignore_returns_none_frees_the_name_and_sends_no_exit():
    """Follows gen_server_SUITE:start (anonymous with ignore): ``ignore``."""
    before = sv.kernel_stats()["processes"]
    sv.trap_exit(True)
    try:
        assert Suite.start("ignore") is None
        assert Suite.start_link("ignore", name="otp-ignored") is None
        assert sv.whereis("otp-ignored") is None
        assert no_message()  # the caller gets no exit signal
        assert sv.kernel_stats()["processes"] == before
    finally:
        sv.trap_exit(False)


def test_start_stop_and_already_started():
    """Follows gen_server_SUITE:start (anonymous with stop; local register)."""
    with pytest.raises(sv.StartError) as info:
        Suite.start("stop")
    assert info.value.reason == "stopped"
    pid = Suite.start(name="otp-my-test-name")
    with pytest.raises(sv.AlreadyStarted) as taken:
        Suite.start(name="otp-my-test-name")
    assert taken.value.reason == ("already_started", pid)
    assert sv.call("otp-my-test-name", StopCall()) == "ok"
    wait_dead(pid)
    with pytest.raises(sv.ProcessExit):
        sv.call(pid, Ping())


START_FAILURES = [
    pytest.param("stop", sv.StartError, "stopped", id="stop"),
    pytest.param("ignore", None, None, id="ignore"),
    pytest.param(
        ("crash", "error"), sv.StartError, sv.Crash("RuntimeError", "bailout"), id="raise"
    ),
    pytest.param(("crash", "exit"), sv.StartError, "bailout", id="exit"),
]


@pytest.mark.parametrize("linked", [False, True], ids=["start", "start_link"])
@pytest.mark.parametrize(("args", "error", "reason"), START_FAILURES)
def test_loop_start_fail_never_leaves_the_name_taken(linked, args, error, reason, leak_check):
    """Follows gen_server_SUITE:loop_start_fail: a failed start, repeated at once with the
    same name (the suite's named ETS table), finds the name free every time."""
    start = Suite.start_link if linked else Suite.start
    sv.trap_exit(True)
    try:
        for _ in range(100):
            if error is None:
                assert start(args, name="otp-loop-start-fail") is None
            else:
                with pytest.raises(error) as info:
                    start(args, name="otp-loop-start-fail")
                assert not isinstance(info.value, sv.AlreadyStarted)
                assert info.value.reason == reason
            assert sv.whereis("otp-loop-start-fail") is None
        assert no_message()  # current OTP: a failed start_link sends the caller no EXIT
    finally:
        sv.trap_exit(False)


def test_loop_start_fail_on_init_timeout():
    """Follows gen_server_SUITE:loop_start_fail (``{wait, 1000, void}`` with
    ``{timeout, 200}``): each timed-out start frees the name before it returns."""
    release = threading.Event()
    try:
        for _ in range(10):
            with pytest.raises(sv.StartError) as info:
                Suite.start_link(InitWait(release), name="otp-loop-timeout", timeout=0.01)
            assert info.value.reason == "timeout"
            assert sv.whereis("otp-loop-timeout") is None
    finally:
        release.set()


class FailingChild(sv.GenServer):
    def init(self, args: Any) -> Any:
        raise RuntimeError("child fails")


def test_loop_start_fail_of_a_supervisor_frees_its_name_and_its_children_names():
    """Follows gen_server_SUITE:loop_start_fail, for a supervisor (a GenServer on the
    thread dispatcher) whose init fails: a named first child starts, the second fails."""
    specs = [
        sv.ChildSpec("ok", lambda: Suite.start_link(name="otp-sup-child")),
        sv.ChildSpec("bad", lambda: FailingChild.start_link(name="otp-sup-bad")),
    ]
    for _ in range(200):
        with pytest.raises(sv.StartError) as info:
            sv.Supervisor.start(specs, name="otp-failing-sup")
        assert not isinstance(info.value, sv.AlreadyStarted)
        assert info.value.reason[:2] == ("failed_to_start_child", "bad")
        assert sv.whereis("otp-failing-sup") is None
        assert sv.whereis("otp-sup-child") is None
        assert sv.whereis("otp-sup-bad") is None


def test_loop_start_fail_of_a_supervisor_with_a_bad_child_spec():
    """Follows gen_server_SUITE:loop_start_fail, for a supervisor given a malformed spec."""
    for _ in range(50):
        with pytest.raises(sv.SupervisorError):
            sv.Supervisor.start_link(
                [sv.ChildSpec("bad", "not callable")],  # type: ignore[arg-type]
                name="otp-bad-spec-sup",
            )
        assert sv.whereis("otp-bad-spec-sup") is None


def test_a_supervisor_skips_a_child_whose_init_ignores():
    """Follows gen_server_SUITE:start (``ignore``), as a supervisor sees it: no child."""
    sup = sv.Supervisor.start_link([sv.ChildSpec("ignored", lambda: Suite.start_link("ignore"))])
    assert [child.pid for child in sv.Supervisor.which_children(sup)] == [None]
    sv.stop(sup)


# -- stop --------------------------------------------------------------------------------


def test_stop1_anonymous_normal_then_noproc():
    """Follows gen_server_SUITE:stop1."""
    pid = Suite.start()
    sv.stop(pid)
    assert not pid.is_alive()
    with pytest.raises(sv.ProcessExit) as info:
        sv.stop(pid)
    assert info.value.reason == "noproc"


@pytest.mark.parametrize("timeout", [None, math.inf, 10])
def test_stop2_other_reason_infinity(timeout):
    """Follows gen_server_SUITE:stop2: ``stop(Pid, other_reason, infinity)``."""
    pid = Suite.start()
    server = pid._process.server
    sv.stop(pid, "other_reason", timeout)
    assert not pid.is_alive()
    assert server.terminated.snapshot() == ["other_reason"]


@pytest.mark.parametrize(
    "timeout", [-1, -0.5, -math.inf, math.nan, "invalid_timeout", True, False, [5]]
)
def test_stop3_invalid_timeout_raises_before_anything_is_sent(timeout):
    """Follows gen_server_SUITE:stop3: an invalid timeout raises; the server lives on."""
    pid = Suite.start()
    server = pid._process.server
    with pytest.raises(sv.KernelError) as info:
        sv.stop(pid, "other_reason", timeout)
    assert info.value.reason == "invalid_timeout"
    assert pid.is_alive() and sv.call(pid, Ping()) == "pong"
    assert server.terminated.snapshot() == []  # nothing was sent
    sv.stop(pid)
    assert not pid.is_alive()


def test_stop4_registered_name():
    """Follows gen_server_SUITE:stop4."""
    pid = Suite.start(name="otp-to-stop")
    sv.stop("otp-to-stop")
    assert not pid.is_alive() and sv.whereis("otp-to-stop") is None
    with pytest.raises(sv.ProcessExit) as info:
        sv.stop("otp-to-stop")
    assert info.value.reason == "noproc"


# -- crash: exit(Reason) from a callback -----------------------------------------------------


@pytest.mark.parametrize("reason", [("shutdown", "reason"), "shutdown"])
def test_crash_exit_with_a_shutdown_reason_is_no_crash(reason):
    """Follows gen_server_SUITE:crash (``exit({shutdown, reason})``, ``exit(shutdown)``):
    the caller and the linked, trapping test see exactly that reason; no crash report."""
    sv.trap_exit(True)
    try:
        pid = Suite.start_link()
        server = pid._process.server
        with capture_logs() as logs, pytest.raises(sv.ProcessExit) as info:
            sv.call(pid, ExitWith(reason))
        assert info.value.reason == reason
        exit_signal = sv.receive(5, match=lambda m: isinstance(m, sv.ExitSignal))
        assert exit_signal == sv.ExitSignal(pid, reason)
        assert server.terminated.snapshot() == [reason]  # terminate/2 ran
        assert not [e for e in logs if e["event"] == "supervision.process.crashed"]
    finally:
        sv.trap_exit(False)


def test_crash_exit_crashed_is_a_crash_with_that_reason():
    """Follows gen_server_SUITE:crash (``exit(crashed)`` in handle_call): a crash report."""
    pid = Suite.start()
    ref = sv.monitor(pid)
    with capture_logs() as logs, pytest.raises(sv.ProcessExit) as info:
        sv.call(pid, ExitWith("crashed"))
    assert info.value.reason == "crashed"
    down = sv.receive(5, match=lambda m: isinstance(m, sv.Down) and m.ref == ref)
    assert down.reason == "crashed"
    crashed = [e for e in logs if e["event"] == "supervision.process.crashed"]
    assert len(crashed) == 1 and crashed[0]["during"] == "call"


def test_crash_exit_from_cast_with_a_chosen_reason():
    """Follows gen_server_SUITE:cast (``{stop, {From, stopped}, State}``), with exit/1."""
    pid = Suite.start()
    sv.cast(pid, ExitWith(("stopped", "by cast")))
    assert wait_dead(pid) == ("stopped", "by cast")


class ExitingTerminate(sv.GenServer):
    def terminate(self, reason: Any, state: Any) -> None:
        raise sv.Exit(("crash", "terminate"))


def test_terminate_crash_format_exit_in_terminate_is_the_exit_reason():
    """Follows gen_server_SUITE:terminate_crash_format (``exit({crash, terminate})``)."""
    pid = ExitingTerminate.start()
    with pytest.raises(sv.ProcessExit) as info:
        sv.stop(pid)
    assert info.value.reason == ("crash", "terminate")


class Transient(sv.GenServer):
    def handle_cast(self, msg: Any, state: Any) -> Any:
        raise sv.Exit(msg)


@pytest.mark.parametrize(("reason", "restarted"), [("normal", False), ("boom", True)])
def test_crash_exit_normal_does_not_restart_a_transient_child(reason, restarted):
    """Follows gen_server_SUITE:crash: ``exit(normal)`` is a normal exit, so a transient
    child is not restarted; any other reason is abnormal and it is."""
    sup = sv.Supervisor.start_link(
        [sv.ChildSpec("t", lambda: Transient.start_link(name="otp-transient"), "transient")]
    )
    first = sv.whereis("otp-transient")
    sv.cast(first, reason)
    assert wait_dead(first) == reason
    if restarted:
        wait_until(lambda: sv.whereis("otp-transient") not in (None, first))
    else:
        wait_until(lambda: [c.pid for c in sv.Supervisor.which_children(sup)] == [None])
        assert sv.whereis("otp-transient") is None
    sv.stop(sup)


# -- call: timeouts returned by handle_call ------------------------------------------------


def test_call_delayed_answer_and_call_within():
    """Follows gen_server_SUITE:call: ``{noreply, S, T}`` answered from handle_info(timeout),
    and ``{reply, ok, call_within, T}`` whose timeout a call within T cancels."""
    pid = Suite.start_link(name="otp-call")
    assert sv.call("otp-call", DelayedAnswer(0.001)) == "delayed"
    assert sv.call("otp-call", CallWithin(60)) == "ok"
    assert sv.call("otp-call", NextCall()) is True  # within: state still call_within
    assert pid._process.counts()[2] == 0  # the call cancelled the timer
    assert sv.call("otp-call", CallWithin(0.001)) == "ok"
    wait_until(lambda: sv.get_state("otp-call") == [])  # the timeout ran; get_state did not stop it
    assert sv.call("otp-call", NextCall()) is False
    with pytest.raises(sv.ProcessExit) as info:
        sv.call("otp-call", "both_actions")
    assert info.value.reason.kind == "bad_return_value"


def test_call_bad_timeout_value_crashes():
    """Follows gen_server_SUITE:call (bad return value): an invalid timeout."""
    pid = Suite.start()
    with pytest.raises(sv.ProcessExit) as info:
        sv.call(pid, "bad_timeout")  # checked before the reply: the caller sees the crash
    reason = info.value.reason
    assert reason.kind == "bad_return_value" and "timeout" in reason.message


# -- handle_info(timeout) ---------------------------------------------------------------------


def test_handle_event_timeout_plain_system_requests_do_not_cancel_it(leak_check):
    """Follows gen_server_SUITE:handle_event_timeout_plain: `get_state` (a system
    message) leaves the timeout running; a request cancels it."""
    me = sv.self_pid()
    pid = Suite.start()
    sv.cast(pid, DelayedCast(me, 0.05))
    assert sv.get_state(pid) == ("delayed_cast", me)
    assert next_from(pid) is Delayed
    sv.cast(pid, DelayedCast(me, 60))
    assert sv.call(pid, Ping()) == "pong"
    assert pid._process.counts()[2] == 0  # cancelled, not merely late
    assert no_message()
    sv.stop(pid)


def test_handle_event_timeout_zero_a_queued_message_comes_first():
    """Follows gen_server_SUITE:handle_event_timeout_zero, for the plain
    ``{noreply, S, 0}``: a message already in the mailbox cancels a zero timeout; with
    an empty mailbox the timeout runs at once."""
    me = sv.self_pid()
    pid = Suite.start()
    sv.cast(pid, TimeoutZero(me))
    assert next_from(pid) is AfterTimeoutZero
    assert no_message()  # the queued message cancelled the timeout
    sv.send(pid, ContinueTimeout(me, 0))  # continue, then a zero timeout: nothing queued
    assert next_from(pid) is EventTimeout
    sv.stop(pid)


@pytest.mark.parametrize("interrupt", [False, True])
def test_start_event_timeout_from_init(interrupt):
    """Follows gen_server_SUITE:start_event_timeout: init returns a timeout; a call
    before it runs out cancels it."""
    me = sv.self_pid()
    pid = Suite.start_link(InitTimeout(me, 60 if interrupt else 0.01))
    if interrupt:
        assert sv.call(pid, Ping()) == "pong"
        assert pid._process.counts()[2] == 0
        assert no_message()
    else:
        assert next_from(pid) is EventTimeout
    sv.stop(pid)


def test_continue_timeout_from_handle_continue():
    """Follows gen_server_SUITE:handle_event_timeout (``continue_timeout``)."""
    me = sv.self_pid()
    pid = Suite.start()
    sv.send(pid, ContinueTimeout(me, 0.01))
    assert next_from(pid) is EventTimeout
    sv.stop(pid)


# -- continue --------------------------------------------------------------------------------


@pytest.mark.parametrize("start_timeout", [None, 5.0])
def test_continue(start_timeout):
    """Follows gen_server_SUITE:continue: after init, call (reply and noreply), cast and
    info, handle_continue runs before the message the callback sent itself. (A pooled
    init runs on the caller's thread, or with a start timeout on a pool thread.)"""
    me = sv.self_pid()
    pid = Suite.start_link(InitContinue(me), timeout=start_timeout)
    assert read_replies(pid) == [Continued, AfterContinued]

    assert sv.call(pid, ContinueReply(me)) == "ok"
    assert read_replies(pid) == [Continued, AfterContinued]

    assert sv.call(pid, ContinueNoReply(me)) == "ok"  # answered by handle_continue
    assert read_replies(pid) == [Continued, AfterContinued]

    sv.cast(pid, ContinueNoReply(me))
    assert read_replies(pid) == [Continued, AfterContinued]

    sv.send(pid, ContinueNoReply(me))
    assert read_replies(pid) == [Continued, AfterContinued]

    sv.send(pid, ContinueContinue(me))
    assert read_replies(pid) == [BeforeContinue, Continued, AfterContinued]

    ref = sv.monitor(pid)
    sv.send(pid, ContinueStop())
    down = sv.receive(5, match=lambda m: isinstance(m, sv.Down) and m.ref == ref)
    assert down.reason == "normal"


class NoContinue(sv.GenServer):
    def handle_cast(self, msg: Any, state: Any) -> Any:
        return sv.NoReply(state, continue_=msg)


def test_undef_handle_continue_crashes():
    """Follows gen_server_SUITE:undef_handle_continue: a continue with no handle_continue."""
    pid = NoContinue.start()
    sv.cast(pid, "go")
    reason = wait_dead(pid)
    assert reason.kind == "KernelError" and "continue_" in reason.message


# -- get_state / replace_state -------------------------------------------------------------


def test_get_state():
    """Follows gen_server_SUITE:get_state."""
    state = ("some", "state")
    Suite.start_link(("state", state), name="otp-get-state")
    assert sv.get_state("otp-get-state") == state
    assert sv.get_state("otp-get-state", 5) == state
    pid = Suite.start_link(("state", state))
    assert sv.get_state(pid) == state
    assert sv.get_state(pid, timeout=None) == state
    with pytest.raises(sv.KernelError) as invalid:
        sv.get_state(pid, timeout=-1)
    assert invalid.value.reason == "invalid_timeout"
    sv.stop(pid)
    with pytest.raises(sv.ProcessExit) as dead:
        sv.get_state(pid)
    assert dead.value.reason == "noproc"
    with pytest.raises(sv.ProcessExit):
        sv.get_state("otp-nobody-here")


def test_replace_state():
    """Follows gen_server_SUITE:replace_state, a raising function included."""
    Suite.start_link(("state", "initial"), name="otp-replace-state")
    assert sv.replace_state("otp-replace-state", lambda _: "replaced") == "replaced"
    assert sv.get_state("otp-replace-state") == "replaced"
    pid = Suite.start_link(("state", "replaced"))
    assert sv.replace_state(pid, lambda s: s + " again", 5) == "replaced again"
    assert sv.get_state(pid, 5) == "replaced again"

    def fail(state: Any) -> Any:
        raise ValueError("fail")

    with pytest.raises(sv.KernelError) as info:
        sv.replace_state(pid, fail)
    assert info.value.reason == ("callback_failed", sv.Crash("ValueError", "fail"))
    assert sv.get_state(pid, 5) == "replaced again"  # unchanged, and the server lives
    assert sv.call(pid, Ping()) == "pong"
    sv.stop(pid)
    with pytest.raises(sv.ProcessExit):
        sv.replace_state(pid, lambda s: s)


class SelfInspect(sv.GenServer):
    def handle_call(self, request: Any, from_: sv.From, state: Any) -> Any:
        return sv.Reply(sv.get_state(sv.self_pid()), state)


def test_calling_self_with_get_state_is_refused():
    """Follows gen_server_SUITE:calling_self, for the debugging requests."""
    pid = SelfInspect.start()
    with pytest.raises(sv.ProcessExit) as info:
        sv.call(pid, "go")
    assert info.value.reason.kind == "KernelError"


def test_a_flushed_down_does_not_cancel_an_idle_timeout():
    """Follows gen_server_SUITE:handle_event_timeout_plain with OTP's demonitor(flush):
    a flushed 'DOWN' never arrives, so it cannot cancel the idle timeout (review
    finding: the timeout was disarmed before the flushed message was dropped)."""
    fired = threading.Event()

    class Target(sv.GenServer):
        pass

    class Watcher(sv.GenServer):
        def handle_call(self, target: Any, from_: Any, state: Any) -> Any:
            ref = sv.monitor(target)
            sv.stop(target)  # its Down is queued behind this call
            sv.demonitor(ref, flush=True)
            return sv.Reply("armed", state, timeout=0.05)

        def handle_info(self, msg: Any, state: Any) -> Any:
            if isinstance(msg, sv.Timeout):
                fired.set()
            return state

    watcher = Watcher.start()
    assert sv.call(watcher, Target.start()) == "armed"
    assert fired.wait(10)
    sv.stop(watcher)
