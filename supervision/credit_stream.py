"""Credit streams: a bounded, sequence-numbered stream with a replay window.

A stream process keeps the last `max_buffered` items, numbered from 1. Publishers
append; one terminal item ends the stream (it takes the next number and is not
counted in the buffer). Subscribers are processes; they receive
`StreamItem(stream, seq, item)` messages, then one `StreamTerminal(stream, seq,
outcome)`:

* a **push** subscriber gets every retained item after its cursor, then live items;
  one whose mailbox grows past `push_bound` is detached (`StreamDetached`);
* a **credit** subscriber holds at most `credit` unacknowledged items and gets more
  only when it calls `ack(seq)`; the terminal waits for credit too but needs no ack.

A cursor older than the window is refused with a ``replay_gap`` error carrying
``after_sequence``, ``oldest_available_sequence``, ``latest_sequence`` and
``terminal``; a subscriber that dies is removed (the stream monitors it). A dead
subscriber pid is never subscribed, whether or not the stream has seen its `Down`:
`subscribe` accepts it (the window, nothing installed, as an Erlang monitor of a dead
pid fires at once), `unsubscribe` answers False and `ack` `not_subscribed`.
Stable runs, A2A task streams and Live subscriptions are built on this.

What a subscriber sends (`subscribe`, `ack`, `unsubscribe`) also has an awaitable
form for asyncio code (`subscribe_async`, ...): the same request, arguments and
errors, awaited with `supervision.aio.call`, so no thread is parked and the event loop
never blocks however busy the stream is. A subscribe whose caller gives up (a
timeout, or a cancelled await) is withdrawn: a `Withdraw` cast, queued behind the
`Subscribe`, removes the subscription that request made, and no other.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Any, Literal, NamedTuple

from supervision.aio import call as acall
from supervision.errors import CallTimeout, KernelError
from supervision.gen_server import From, GenServer, Reply, Stop, call, cast
from supervision.pid import Pid
from supervision.primitives import demonitor, monitor
from supervision.process import Process, current_process, receive, resolve
from supervision.protocol import Answer, Ok, Refused, describe, log_unexpected, unwrap
from supervision.signals import Down, Ref

DEFAULT_MAX_BUFFERED = 256
MAX_BUFFERED_CEILING = 65_536
DEFAULT_MAX_SUBSCRIBERS = 1024
MAX_SUBSCRIBERS_CEILING = 65_536
DEFAULT_PUSH_BOUND = 1024
MAX_CREDIT = 1024

Mode = Literal["push", "credit"]


class StreamItem(NamedTuple):
    stream: Pid
    seq: int
    item: Any


class StreamTerminal(NamedTuple):
    stream: Pid
    seq: int
    outcome: Any


class StreamDetached(NamedTuple):
    """The stream dropped this subscriber (``slow_subscriber``)."""

    stream: Pid
    reason: str


class StreamError(KernelError):
    """A stream refused a request: ``replay_gap``, ``cursor_ahead``, ``invalid_credit_ack``,
    ``not_credit_subscriber``, ``not_subscribed``, ``already_terminal``,
    ``too_many_subscribers``, ``invalid_stream_option``. A replay gap's details are in `gap`."""

    def __init__(self, reason: str, detail: str, gap: dict[str, Any] | None = None) -> None:
        super().__init__(reason, detail)
        self.gap = gap


# -- the requests a stream answers, each with `Ok(value)` or `Refused(StreamError)` ----------


class Publish(NamedTuple):
    """Append `item`; the answer is its sequence number."""

    item: Any


class Finish(NamedTuple):
    """End the stream with `outcome`; the answer is the terminal's sequence number."""

    outcome: Any


class Subscribe(NamedTuple):
    """Subscribe `subscriber` to the items after `after`; the answer is the window.
    `token`, when given, names the subscription this request makes (see `Withdraw`)."""

    subscriber: Pid
    mode: Mode
    after: int
    credit: int
    token: Ref | None = None


class Ack(NamedTuple):
    """A credit subscriber acknowledges the items up to `seq`."""

    subscriber: Pid
    seq: int


class Withdraw(NamedTuple):
    """Cast: remove `subscriber` if the `Subscribe` carrying `token` subscribed it (a
    caller that gave up on its answer sends this right after it, so it is handled
    after it); a subscription made by any other request stays."""

    subscriber: Pid
    token: Ref


class Unsubscribe(NamedTuple):
    """Remove `subscriber`; the answer says whether it was subscribed."""

    subscriber: Pid


class Status(NamedTuple):
    """The window and the subscriber count."""


class Close(NamedTuple):
    """Cast: stop once everything sent before this is handled (see `close_async`)."""


MAX_SEQUENCE = 2**62
"""A cursor or an ack beyond this is malformed (no stream gets that far)."""


def _check_subscribe(request: Subscribe) -> StreamError | None:
    """Why a `Subscribe` is malformed, or None: checked by the stream itself, so a
    request built by hand cannot put a bad subscriber into its state."""
    if type(request.subscriber) is not Pid:
        return StreamError("invalid_stream_option", "the subscriber must be a Pid")
    if request.mode not in ("push", "credit"):
        return StreamError("invalid_stream_option", "mode must be 'push' or 'credit'")
    if request.token is not None and type(request.token) is not Ref:
        return StreamError("invalid_stream_option", "the token must be a Ref")
    return _out_of_bounds("credit", request.credit, 1, MAX_CREDIT) or _out_of_bounds(
        "after", request.after, 0, MAX_SEQUENCE
    )


class _Subscriber:
    __slots__ = ("acked", "credit", "delivered", "mode", "process", "ref", "token")

    def __init__(self, process: Process, request: Subscribe, ref: Ref) -> None:
        self.process = process
        self.mode = request.mode
        self.delivered = request.after  # last seq sent
        self.acked = request.after  # last seq acknowledged (credit mode)
        self.credit = request.credit
        self.ref = ref  # the stream's monitor on the subscriber
        self.token = request.token  # the request that subscribed it (`Withdraw`)


class _State:
    def __init__(self, max_buffered: int, max_subscribers: int, push_bound: int) -> None:
        self.max_buffered = max_buffered
        self.max_subscribers = max_subscribers
        self.push_bound = push_bound
        self.items: deque[tuple[int, Any]] = deque()
        self.latest = 0
        self.terminal: tuple[int, Any] | None = None
        self.subscribers: dict[Process, _Subscriber] = {}

    @property
    def oldest(self) -> int:
        return self.items[0][0] if self.items else self.latest + 1

    def gap(self, after: int) -> dict[str, Any]:
        return {
            "after_sequence": after,
            "oldest_available_sequence": self.oldest,
            "latest_sequence": self.latest,
            "terminal": self.terminal is not None,
        }

    def item(self, seq: int) -> Any:
        return self.items[seq - self.oldest][1]


class _StreamServer(GenServer):
    def init(self, args: tuple[int, int, int]) -> _State:
        return _State(*args)

    def handle_call(self, request: object, from_: From, state: _State) -> Reply:
        match request:
            case Publish(item):
                return Reply(self._publish(state, item), state)
            case Finish(outcome):
                return Reply(self._finish(state, outcome), state)
            case Subscribe(pid):
                error = _check_subscribe(request)
                if error is not None:
                    return Reply(Refused(error), state)
                return Reply(self._subscribe(state, resolve(pid), request), state)
            case Ack(Pid() as pid, seq):
                error = _out_of_bounds("seq", seq, 0, MAX_SEQUENCE)
                if error is not None:
                    return Reply(Refused(error), state)
                return Reply(self._ack(state, _live_subscriber(state, pid), seq), state)
            case Unsubscribe(Pid() as pid):
                subscriber = _live_subscriber(state, pid)
                if subscriber is not None:
                    del state.subscribers[subscriber.process]
                    demonitor(subscriber.ref, flush=True)
                return Reply(Ok(subscriber is not None), state)
            case Status():
                return Reply(Ok({**state.gap(0), "subscribers": len(state.subscribers)}), state)
            case Ack() | Unsubscribe():
                why = f"{describe(request)}: the subscriber must be a Pid"
                return Reply(Refused(StreamError("invalid_stream_option", why)), state)
        error = StreamError("invalid_stream_option", f"not a stream request: {describe(request)}")
        return Reply(Refused(error), state)

    def handle_cast(self, msg: Any, state: _State) -> Any:
        match msg:
            case Publish(item):  # `publish_async`: a refusal (already ended) is dropped
                self._publish(state, item)
            case Finish(outcome):
                self._finish(state, outcome)
            case Withdraw(Pid() as pid, Ref() as token):
                process = resolve(pid)
                subscriber = None if process is None else state.subscribers.get(process)
                if process is not None and subscriber is not None and subscriber.token == token:
                    del state.subscribers[process]
                    demonitor(subscriber.ref, flush=True)
            case Close():
                return Stop("normal", state)
            case _:
                log_unexpected("CreditStream", "cast", msg)
        return state

    def handle_info(self, msg: Any, state: _State) -> Any:
        if type(msg) is Down:
            process = resolve(msg.pid)
            for key, subscriber in list(state.subscribers.items()):
                if subscriber.ref == msg.ref or key is process:
                    del state.subscribers[key]
        return state

    # -- publishing ----------------------------------------------------------------------

    def _publish(self, state: _State, item: Any) -> Answer:
        if state.terminal is not None:
            return Refused(StreamError("already_terminal", "the stream has ended"))
        state.latest += 1
        state.items.append((state.latest, item))
        if len(state.items) > state.max_buffered:
            state.items.popleft()
        self._pump_all(state)
        return Ok(state.latest)

    def _finish(self, state: _State, outcome: Any) -> Answer:
        if state.terminal is not None:
            return Refused(StreamError("already_terminal", "the stream has ended"))
        state.terminal = (state.latest + 1, outcome)
        self._pump_all(state)
        return Ok(state.terminal[0])

    # -- subscribing ---------------------------------------------------------------------

    def _subscribe(self, state: _State, who: Process | None, request: Subscribe) -> Answer:
        after = request.after
        if who is None or not who.alive:
            # As a monitor of a dead pid fires at once: a dead subscriber is accepted
            # (the same checks and window as a live one) and is gone at once, so it
            # is never counted and nothing is sent to it.
            _live_subscriber(state, request.subscriber)  # drops a stale entry
            return self._window(state, after)
        if who in state.subscribers:
            return Refused(
                StreamError("invalid_stream_option", "this process is already subscribed")
            )
        if len(state.subscribers) >= state.max_subscribers:
            return Refused(
                StreamError("too_many_subscribers", f"at most {state.max_subscribers} subscribers")
            )
        window = self._window(state, after)
        if type(window) is not Ok:
            return window
        subscriber = _Subscriber(who, request, monitor(who.pid))
        state.subscribers[who] = subscriber
        self._pump(state, subscriber)
        return window

    @staticmethod
    def _window(state: _State, after: int) -> Answer:
        """The window a subscriber from cursor `after` gets, or why the cursor is refused."""
        end = state.terminal[0] if state.terminal is not None else state.latest
        if after > end:
            return Refused(
                StreamError("cursor_ahead", f"cursor {after} is beyond the latest sequence {end}")
            )
        if after + 1 < state.oldest and after < state.latest:
            return Refused(
                StreamError("replay_gap", "items after the cursor were evicted", state.gap(after))
            )
        return Ok(state.gap(after))

    def _ack(self, state: _State, subscriber: _Subscriber | None, seq: int) -> Answer:
        if subscriber is None:
            return Refused(StreamError("not_subscribed", "this process is not subscribed"))
        if subscriber.mode != "credit":
            return Refused(StreamError("not_credit_subscriber", "push subscribers do not ack"))
        if seq == subscriber.acked:
            return Ok(seq)  # repeating the last ack is harmless
        if not subscriber.acked < seq <= subscriber.delivered:
            return Refused(
                StreamError("invalid_credit_ack", f"{seq} was not delivered or is already acked")
            )
        subscriber.acked = seq
        gap = self._pump(state, subscriber)
        if gap is not None:
            return Refused(
                StreamError(
                    "replay_gap",
                    "the next item was evicted: unsubscribe and subscribe again from a cursor in the window",
                    gap,
                )
            )
        return Ok(seq)

    # -- delivery ------------------------------------------------------------------------

    def _pump_all(self, state: _State) -> None:
        for subscriber in list(state.subscribers.values()):
            self._pump(state, subscriber)

    def _pump(self, state: _State, subscriber: _Subscriber) -> dict[str, Any] | None:
        """Send what the subscriber may have now; returns a gap if the next item is gone."""
        me = self_stream()
        process = subscriber.process
        while True:
            if (
                subscriber.mode == "credit"
                and subscriber.delivered - subscriber.acked >= subscriber.credit
            ):
                return None
            next_seq = subscriber.delivered + 1
            if next_seq <= state.latest:
                if next_seq < state.oldest:
                    return state.gap(subscriber.delivered)
                process.deliver(StreamItem(me, next_seq, state.item(next_seq)))
                subscriber.delivered = next_seq
                if subscriber.mode == "push" and _mailbox_size(process) > state.push_bound:
                    self._detach(state, subscriber, "slow_subscriber")
                    return None
                continue
            if state.terminal is not None and next_seq == state.terminal[0]:
                process.deliver(StreamTerminal(me, next_seq, state.terminal[1]))
                state.subscribers.pop(process, None)
                demonitor(subscriber.ref, flush=True)
            return None

    @staticmethod
    def _detach(state: _State, subscriber: _Subscriber, reason: str) -> None:
        state.subscribers.pop(subscriber.process, None)
        demonitor(subscriber.ref, flush=True)
        subscriber.process.deliver(StreamDetached(self_stream(), reason))


def self_stream() -> Pid:
    process = current_process()
    assert process is not None
    return process.pid


def _mailbox_size(process: Process) -> int:
    size = getattr(process, "mailbox_size", None)
    if size is not None:
        return int(size())
    pending = getattr(process, "pending", None)
    return int(pending()) if pending is not None else 0


def _out_of_bounds(name: str, value: object, low: int, high: int) -> StreamError | None:
    """An ``invalid_stream_option`` error unless `value` is an int in `low`..`high`."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return StreamError("invalid_stream_option", f"{name} must be an int in {low}..{high}")
    return None


def _bounded(name: str, value: int, low: int, high: int) -> int:
    error = _out_of_bounds(name, value, low, high)
    if error is not None:
        raise error
    return value


class CreditStream:
    """Start and use credit streams. Every function takes the stream's pid or name."""

    @staticmethod
    def start_link(
        *,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
        max_subscribers: int = DEFAULT_MAX_SUBSCRIBERS,
        push_bound: int = DEFAULT_PUSH_BOUND,
        name: Hashable | None = None,
    ) -> Pid:
        args = (
            _bounded("max_buffered", max_buffered, 1, MAX_BUFFERED_CEILING),
            _bounded("max_subscribers", max_subscribers, 1, MAX_SUBSCRIBERS_CEILING),
            _bounded("push_bound", push_bound, 1, 1_000_000),
        )
        return _StreamServer.start_link(args, name=name)

    @staticmethod
    def publish(stream: Pid | Hashable, item: Any, timeout: float | None = 5.0) -> int:
        """Append `item`; returns its sequence number."""
        return unwrap(call(stream, Publish(item), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def publish_async(stream: Pid | Hashable, item: Any) -> None:
        """Append `item` without waiting (a cast): for a publisher that must never block,
        such as a server in the pooled dispatcher. Items from one publisher keep their
        order, and it can count their sequence numbers itself (1, 2, ...)."""
        cast(stream, Publish(item))

    @staticmethod
    def finish_async(stream: Pid | Hashable, outcome: Any) -> None:
        """End the stream with `outcome` without waiting (a cast; see `publish_async`)."""
        cast(stream, Finish(outcome))

    @staticmethod
    def close_async(stream: Pid | Hashable) -> None:
        """Stop the stream once what its publisher sent before is handled (a cast, so
        an asynchronous publisher never loses its last items to its own exit)."""
        cast(stream, Close())

    @staticmethod
    def finish(stream: Pid | Hashable, outcome: Any, timeout: float | None = 5.0) -> int:
        """End the stream with `outcome`; returns the terminal's sequence number."""
        return unwrap(call(stream, Finish(outcome), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def subscribe(
        stream: Pid | Hashable,
        *,
        after: int = 0,
        mode: Mode = "push",
        credit: int = 1,
        subscriber: Pid | None = None,
        timeout: float | None = 5.0,
    ) -> dict[str, Any]:
        """Subscribe `subscriber` (default: the caller) to items after sequence `after`.

        Returns the window (`after_sequence`, `oldest_available_sequence`,
        `latest_sequence`, `terminal`); raises `StreamError` for a refusal (nothing is
        subscribed), `ProcessExit` if the stream is not alive, `CallTimeout` if it did
        not answer in time (the subscription is then withdrawn: see `Withdraw`). A dead
        `subscriber` gets the window too and is gone at once (see the module doc)."""
        request = _subscribe_request(subscriber, mode, after, credit)
        try:
            answer = call(stream, request, timeout)
        except CallTimeout:
            _withdraw(stream, request)
            raise
        return unwrap(answer)  # type: ignore[no-any-return]

    @staticmethod
    async def subscribe_async(
        stream: Pid | Hashable,
        *,
        after: int = 0,
        mode: Mode = "push",
        credit: int = 1,
        subscriber: Pid | None = None,
        timeout: float | None = 5.0,
    ) -> dict[str, Any]:
        """`subscribe` for asyncio code: the same arguments, answer and errors, awaited
        (`supervision.aio.call`: no thread is parked, the event loop keeps running).
        A timeout or a cancelled await withdraws the subscription, so nothing stays
        subscribed for a caller that gave up (items the stream sent meanwhile may be
        in the subscriber's mailbox)."""
        request = _subscribe_request(subscriber, mode, after, credit)
        try:
            answer = await acall(stream, request, timeout)
        except (CallTimeout, asyncio.CancelledError):
            _withdraw(stream, request)
            raise
        return unwrap(answer)  # type: ignore[no-any-return]

    @staticmethod
    def ack(
        stream: Pid | Hashable,
        seq: int,
        *,
        subscriber: Pid | None = None,
        timeout: float | None = 5.0,
    ) -> None:
        """Acknowledge items up to `seq` (credit subscribers); releases more items."""
        unwrap(call(stream, Ack(_subscriber(subscriber), seq), timeout))

    @staticmethod
    async def ack_async(
        stream: Pid | Hashable,
        seq: int,
        *,
        subscriber: Pid | None = None,
        timeout: float | None = 5.0,
    ) -> None:
        """`ack` for asyncio code (awaited: the event loop keeps running). An ack whose
        await was cancelled or timed out may still be applied: the stream handles it
        once it gets to it."""
        unwrap(await acall(stream, Ack(_subscriber(subscriber), seq), timeout))

    @staticmethod
    def unsubscribe(
        stream: Pid | Hashable, *, subscriber: Pid | None = None, timeout: float | None = 5.0
    ) -> bool:
        """Remove `subscriber` (default: the caller); whether it was subscribed (False
        for a subscriber that is dead, so it is safe in cleanup code)."""
        return unwrap(call(stream, Unsubscribe(_subscriber(subscriber)), timeout))  # type: ignore[no-any-return]

    @staticmethod
    async def unsubscribe_async(
        stream: Pid | Hashable, *, subscriber: Pid | None = None, timeout: float | None = 5.0
    ) -> bool:
        """`unsubscribe` for asyncio code (awaited: the event loop keeps running). One
        whose await was cancelled or timed out is still carried out."""
        request = Unsubscribe(_subscriber(subscriber))
        return unwrap(await acall(stream, request, timeout))  # type: ignore[no-any-return]

    @staticmethod
    def status(stream: Pid | Hashable, timeout: float | None = 5.0) -> dict[str, Any]:
        """``latest_sequence``, ``oldest_available_sequence``, ``terminal``, ``subscribers``."""
        status = unwrap(call(stream, Status(), timeout))
        status.pop("after_sequence", None)
        return status  # type: ignore[no-any-return]


def next_message(
    stream: Pid, timeout: float | None
) -> StreamItem | StreamTerminal | StreamDetached:
    """For a plain-thread subscriber: the next message from `stream` in this thread's mailbox.

    Raises `TimeoutError` when nothing is deliverable in time.
    """
    kinds = (StreamItem, StreamTerminal, StreamDetached)
    message = receive(timeout, match=lambda m: type(m) in kinds and m.stream == stream)
    return message  # type: ignore[no-any-return]


def _subscribe_request(who: Pid | None, mode: Mode, after: int, credit: int) -> Subscribe:
    """A `Subscribe` with a fresh token, so that it can be withdrawn (and only it)."""
    return Subscribe(_subscriber(who), mode, after, credit, Ref())


def _withdraw(stream: Pid | Hashable, request: Subscribe) -> None:
    """Undo `request` if the stream carries it out after all (its caller gave up)."""
    assert request.token is not None
    cast(stream, Withdraw(request.subscriber, request.token))


def _subscriber(who: Pid | Hashable | None) -> Pid:
    """The subscriber's pid: the caller's by default, a pid as it is (dead or alive: the
    stream answers for it), or the pid of a registered name (`not_subscribed` if
    nobody holds it)."""
    if type(who) is Pid:
        return who
    process = current_process() if who is None else resolve(who)
    if process is None:
        raise StreamError("not_subscribed", f"{who!r} is not alive")
    return process.pid


def _live_subscriber(state: _State, pid: Pid) -> _Subscriber | None:
    """The subscription of `pid`, or None. A dead subscriber is not subscribed, whether
    or not its pid still resolves and its `Down` has arrived: its entry, if any, is
    dropped now (the `Down` then finds nothing)."""
    process = resolve(pid)
    subscriber = None if process is None else state.subscribers.get(process)
    if subscriber is None or process is None or process.alive:
        return subscriber
    del state.subscribers[process]
    demonitor(subscriber.ref, flush=True)
    return None
