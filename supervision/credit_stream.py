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
``terminal``; a subscriber that dies is removed (the stream monitors it).
Stable runs, A2A task streams and Live subscriptions are built on this.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Any, Literal, NamedTuple

from supervision.errors import KernelError
from supervision.gen_server import From, GenServer, Reply, call
from supervision.pid import Pid
from supervision.primitives import demonitor, monitor
from supervision.process import Process, current_process, resolve
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


class _Subscriber:
    __slots__ = ("acked", "credit", "delivered", "mode", "process", "ref")

    def __init__(self, process: Process, mode: Mode, after: int, credit: int, ref: Ref) -> None:
        self.process = process
        self.mode = mode
        self.delivered = after  # last seq sent
        self.acked = after  # last seq acknowledged (credit mode)
        self.credit = credit
        self.ref = ref


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

    def handle_call(self, request: tuple[Any, ...], from_: From, state: _State) -> Any:
        op = request[0]
        if op == "publish":
            return Reply(self._publish(state, request[1]), state)
        if op == "finish":
            return Reply(self._finish(state, request[1]), state)
        if op == "subscribe":
            return Reply(self._subscribe(state, *request[1:]), state)
        if op == "ack":
            return Reply(self._ack(state, request[1], request[2]), state)
        if op == "unsubscribe":
            subscriber = state.subscribers.pop(request[1], None)
            if subscriber is not None:
                demonitor(subscriber.ref, flush=True)
            return Reply(("ok", subscriber is not None), state)
        if op == "status":
            return Reply(("ok", {**state.gap(0), "subscribers": len(state.subscribers)}), state)
        return Reply(
            ("error", StreamError("invalid_stream_option", f"unknown request {op!r}")), state
        )

    def handle_info(self, msg: Any, state: _State) -> Any:
        if type(msg) is Down:
            process = resolve(msg.pid)
            for key, subscriber in list(state.subscribers.items()):
                if subscriber.ref == msg.ref or key is process:
                    del state.subscribers[key]
        return state

    # -- publishing ----------------------------------------------------------------------

    def _publish(self, state: _State, item: Any) -> tuple[str, Any]:
        if state.terminal is not None:
            return ("error", StreamError("already_terminal", "the stream has ended"))
        state.latest += 1
        state.items.append((state.latest, item))
        if len(state.items) > state.max_buffered:
            state.items.popleft()
        self._pump_all(state)
        return ("ok", state.latest)

    def _finish(self, state: _State, outcome: Any) -> tuple[str, Any]:
        if state.terminal is not None:
            return ("error", StreamError("already_terminal", "the stream has ended"))
        state.terminal = (state.latest + 1, outcome)
        self._pump_all(state)
        return ("ok", state.terminal[0])

    # -- subscribing ---------------------------------------------------------------------

    def _subscribe(
        self, state: _State, who: Process, mode: Mode, after: int, credit: int
    ) -> tuple[str, Any]:
        if who in state.subscribers:
            return (
                "error",
                StreamError("invalid_stream_option", "this process is already subscribed"),
            )
        if len(state.subscribers) >= state.max_subscribers:
            return (
                "error",
                StreamError("too_many_subscribers", f"at most {state.max_subscribers} subscribers"),
            )
        end = state.terminal[0] if state.terminal is not None else state.latest
        if after > end:
            return (
                "error",
                StreamError("cursor_ahead", f"cursor {after} is beyond the latest sequence {end}"),
            )
        if after + 1 < state.oldest and after < state.latest:
            return (
                "error",
                StreamError("replay_gap", "items after the cursor were evicted", state.gap(after)),
            )
        subscriber = _Subscriber(who, mode, after, credit, monitor(who.pid))
        state.subscribers[who] = subscriber
        self._pump(state, subscriber)
        return ("ok", state.gap(after))

    def _ack(self, state: _State, who: Process, seq: int) -> tuple[str, Any]:
        subscriber = state.subscribers.get(who)
        if subscriber is None:
            return ("error", StreamError("not_subscribed", "this process is not subscribed"))
        if subscriber.mode != "credit":
            return ("error", StreamError("not_credit_subscriber", "push subscribers do not ack"))
        if seq == subscriber.acked:
            return ("ok", seq)  # repeating the last ack is harmless
        if not subscriber.acked < seq <= subscriber.delivered:
            return (
                "error",
                StreamError("invalid_credit_ack", f"{seq} was not delivered or is already acked"),
            )
        subscriber.acked = seq
        gap = self._pump(state, subscriber)
        if gap is not None:
            return (
                "error",
                StreamError(
                    "replay_gap",
                    "the next item was evicted: unsubscribe and subscribe again from a cursor in the window",
                    gap,
                ),
            )
        return ("ok", seq)

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


def _bounded(name: str, value: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise StreamError("invalid_stream_option", f"{name} must be an int in {low}..{high}")
    return value


def _unwrap(result: tuple[str, Any]) -> Any:
    status, value = result
    if status == "ok":
        return value
    raise value


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
        return _unwrap(call(stream, ("publish", item), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def finish(stream: Pid | Hashable, outcome: Any, timeout: float | None = 5.0) -> int:
        """End the stream with `outcome`; returns the terminal's sequence number."""
        return _unwrap(call(stream, ("finish", outcome), timeout))  # type: ignore[no-any-return]

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
        """Subscribe `subscriber` (default: the caller) to items after sequence `after`."""
        if mode not in ("push", "credit"):
            raise StreamError("invalid_stream_option", "mode must be 'push' or 'credit'")
        _bounded("credit", credit, 1, MAX_CREDIT)
        _bounded("after", after, 0, 2**62)
        who = _subscriber(subscriber)
        return _unwrap(call(stream, ("subscribe", who, mode, after, credit), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def ack(
        stream: Pid | Hashable,
        seq: int,
        *,
        subscriber: Pid | None = None,
        timeout: float | None = 5.0,
    ) -> None:
        """Acknowledge items up to `seq` (credit subscribers); releases more items."""
        _unwrap(call(stream, ("ack", _subscriber(subscriber), seq), timeout))

    @staticmethod
    def unsubscribe(
        stream: Pid | Hashable, *, subscriber: Pid | None = None, timeout: float | None = 5.0
    ) -> bool:
        return _unwrap(call(stream, ("unsubscribe", _subscriber(subscriber)), timeout))  # type: ignore[no-any-return]

    @staticmethod
    def status(stream: Pid | Hashable, timeout: float | None = 5.0) -> dict[str, Any]:
        """``latest_sequence``, ``oldest_available_sequence``, ``terminal``, ``subscribers``."""
        status = _unwrap(call(stream, ("status",), timeout))
        status.pop("after_sequence", None)
        return status  # type: ignore[no-any-return]


def next_message(
    stream: Pid, timeout: float | None
) -> StreamItem | StreamTerminal | StreamDetached:
    """For a plain-thread subscriber: the next message from `stream` in this thread's mailbox.

    Raises `TimeoutError` when nothing is deliverable in time.
    """
    from supervision.process import receive

    kinds = (StreamItem, StreamTerminal, StreamDetached)
    message = receive(timeout, match=lambda m: type(m) in kinds and m.stream == stream)
    return message  # type: ignore[no-any-return]


def _subscriber(pid: Pid | None) -> Process:
    process = current_process() if pid is None else resolve(pid)
    if process is None:
        raise StreamError("not_subscribed", f"{pid!r} is not alive")
    return process
