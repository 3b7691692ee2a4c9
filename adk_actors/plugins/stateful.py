"""Stateful plugins: one supervised `PluginInstance` process per descriptor.

A `StatefulPlugin` has ``init(config) -> state`` and hooks ``hook(ctx, value,
config, state) -> (outcome, new_state)``. `start_instance` runs ``init`` in a task of
its own with a deadline (``stateful_plugin_init_timeout``), then starts the instance
as a ``temporary`` child of the plugin instance supervisor: a crashed instance is
never replaced behind its pid (`stop_instance` then says ``not_found``); a new one
starts from a fresh ``init``.

The instance serializes its callbacks: one at a time, each in a monitored `Task`
with the caller's deadline, the others waiting in a bounded queue
(``plugin_queue_full``). A new state is committed only when the callback finished
within its deadline while its caller (the owner) is still alive, and the state
encodes as JSON within ``max_state_bytes``; a callback whose owner died is killed and
its state discarded, a late one never commits. The committed state is kept as its
JSON encoding and every callback gets a freshly decoded copy of it, so a change made
in place by a callback that then times out, fails or loses its owner changes nothing.
A killed sync callback cannot be pre-empted: it runs on, fenced, on its thread, and
the instance starts no other callback until it has returned (calls stay serialized);
a queued caller whose deadline passes meanwhile gets ``plugin_instance_busy``, as
does a call whose task the full pool refuses (the instance lives on).
`InstancePlugin(pid)` is the descriptor's plugin that forwards every hook to the
instance.

Bounds: ``init_timeout`` at most `MAX_INIT_TIMEOUT`, ``max_queue`` at most
`MAX_QUEUE`, ``max_state_bytes`` at most `MAX_STATE_BYTES`, config at most 1 MiB; a
call's timeout at most 120 s (``invalid_plugin_instance_invocation``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Annotated, Any, NamedTuple

import msgspec

from adk_actors.app import PLUGIN_INSTANCE_SUPERVISOR, ensure_started
from adk_actors.plugins.descriptor import MAX_CONFIG_BYTES, MAX_ID_BYTES, MAX_TIMEOUT
from adk_actors.plugins.plugin import HOOKS, Plugin
from providers.errors import AdkError, decode_options
from supervision import (
    DEADLINE_REASON,
    CallTimeout,
    ChildSpec,
    Down,
    DynamicSupervisor,
    From,
    GenServer,
    KernelError,
    MaxChildrenReached,
    NoReply,
    Pid,
    ProcessExit,
    Reply,
    Task,
    TaskBusy,
    TaskFailed,
    TaskResult,
    TaskTimeout,
    call,
    demonitor,
    monitor,
    reply,
    self_pid,
    send_after,
)

MAX_INIT_TIMEOUT = 30.0
DEFAULT_INIT_TIMEOUT = 5.0
MAX_QUEUE = 4096
DEFAULT_MAX_QUEUE = 256
MAX_STATE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_STATE_BYTES = 1024 * 1024
FENCED_POLL_INTERVAL = 0.01


class StatefulPlugin:
    """Override ``init`` and the hooks you need (``hook(ctx, value, config, state)``
    returning ``(outcome, new_state)``)."""

    def init(self, config: Mapping[str, Any]) -> Any:
        return None

    def implemented_hooks(self) -> frozenset[str]:
        return frozenset(hook for hook in HOOKS if callable(getattr(self, hook, None)))


class InstanceOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: Annotated[str, msgspec.Meta(min_length=1)]
    init_timeout: Annotated[float, msgspec.Meta(gt=0, le=MAX_INIT_TIMEOUT)] = DEFAULT_INIT_TIMEOUT
    max_queue: Annotated[int, msgspec.Meta(ge=1, le=MAX_QUEUE)] = DEFAULT_MAX_QUEUE
    max_state_bytes: Annotated[int, msgspec.Meta(ge=1, le=MAX_STATE_BYTES)] = (
        DEFAULT_MAX_STATE_BYTES
    )
    config: dict[str, Any] = msgspec.field(default_factory=dict)


# -- the instance's protocol --------------------------------------------------------------


class Invoke(NamedTuple):
    hook: str
    ctx: Mapping[str, Any]
    value: Any
    deadline: float
    owner: Pid


class Status(NamedTuple):
    pass


class Hooks(NamedTuple):
    pass


class _Poll(NamedTuple):
    """Timer message: look again whether a fenced callback's thread has returned."""


class _Body:
    """Where one callback's body is: ``pending`` (not begun), ``running``, ``done``,
    or ``abandoned`` (stopped before it began: it never runs)."""

    __slots__ = ("_lock", "phase")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.phase = "pending"

    def begin(self) -> bool:
        with self._lock:
            if self.phase == "abandoned":
                return False
            self.phase = "running"
            return True

    def end(self) -> None:
        with self._lock:
            self.phase = "done"

    def abandon(self) -> bool:
        """The callback was stopped: True while its body still runs (fenced)."""
        with self._lock:
            if self.phase == "pending":
                self.phase = "abandoned"
            return self.phase == "running"

    def running(self) -> bool:
        with self._lock:
            return self.phase == "running"


@dataclass
class _Pending:
    request: Invoke
    from_: From
    ref: Any  # the owner's monitor


@dataclass
class _State:
    """Invariant: `running` is the one callback in flight (it got a decoded copy of
    `encoded`, the committed state's JSON); `fenced` is the body of a stopped sync
    callback whose thread may still run (no callback starts until it returned);
    `queue` holds at most ``options.max_queue`` callers in arrival order;
    `generation` counts committed states."""

    plugin: StatefulPlugin
    options: InstanceOptions
    config: Mapping[str, Any]
    encoded: bytes
    generation: int = 0
    queue: deque[_Pending] = field(default_factory=deque)
    running: tuple[Task, _Pending, _Body] | None = None
    fenced: _Body | None = None
    polling: bool = False


class PluginInstance(GenServer):
    def init(self, args: tuple[StatefulPlugin, InstanceOptions, bytes]) -> _State:
        plugin, options, encoded = args
        config = MappingProxyType(dict(options.config))
        return _State(plugin, options, config, encoded)

    def handle_call(self, request: Any, from_: From, state: _State) -> Any:
        match request:
            case Invoke():
                if len(state.queue) >= state.options.max_queue:
                    return Reply(("error", "plugin_queue_full"), state)
                state.queue.append(_Pending(request, from_, monitor(request.owner)))
                self._next(state)
                return NoReply(state)
            case Status():
                return Reply(_status(state), state)
            case Hooks():
                return Reply(state.plugin.implemented_hooks(), state)
        return Reply(("error", "unknown_request"), state)

    def handle_info(self, msg: Any, state: _State) -> Any:
        match msg:
            case TaskResult(pid=pid, ok=ok, value=value):
                if state.running is not None and state.running[0].pid == pid:
                    _task, pending, body = state.running
                    state.running = None
                    if not ok:
                        self._abandon(state, body)
                    self._settle(state, pending, ok, value)
                    self._next(state)
            case Down(ref=ref):
                self._owner_down(state, ref)
            case _Poll():
                state.polling = False
                self._next(state)
        return state

    def _abandon(self, state: _State, body: _Body) -> None:
        if body.abandon():
            state.fenced = body

    def _next(self, state: _State) -> None:
        if state.fenced is not None and not state.fenced.running():
            state.fenced = None
        while state.running is None and state.queue:
            if state.fenced is not None:  # a stopped callback's thread still runs
                self._expire_queued(state)
                if state.queue and not state.polling:
                    state.polling = True
                    send_after(self_pid(), _Poll(), FENCED_POLL_INTERVAL)
                return
            pending = state.queue.popleft()
            request = pending.request
            if time.monotonic() >= request.deadline:
                demonitor(pending.ref)
                reply(pending.from_, ("error", "stateful_plugin_timeout"))
                continue
            body = _Body()
            try:
                task = Task.start(
                    _callback,
                    body,
                    state.plugin,
                    request.hook,
                    request.ctx,
                    request.value,
                    state.config,
                    state.encoded,
                    deadline=request.deadline,
                    notify=True,
                )
            except (TaskBusy, MaxChildrenReached):  # this call fails, the instance lives
                body.abandon()
                demonitor(pending.ref)
                reply(pending.from_, ("error", "plugin_instance_busy"))
                continue
            state.running = (task, pending, body)

    def _expire_queued(self, state: _State) -> None:
        now = time.monotonic()
        waiting: deque[_Pending] = deque()
        for pending in state.queue:
            if now >= pending.request.deadline:
                demonitor(pending.ref)
                reply(pending.from_, ("error", "plugin_instance_busy"))
            else:
                waiting.append(pending)
        state.queue = waiting

    def _settle(self, state: _State, pending: _Pending, ok: bool, value: Any) -> None:
        demonitor(pending.ref)
        if not pending.request.owner.is_alive():  # nobody to answer: nothing commits
            return
        if not ok:
            reason = "stateful_plugin_timeout" if value == DEADLINE_REASON else "callback_failed"
            reply(pending.from_, ("error", reason))
            return
        outcome, new_state = value
        if time.monotonic() > pending.request.deadline:
            reply(pending.from_, ("error", "stateful_plugin_timeout"))
            return
        try:
            encoded = msgspec.json.encode(new_state)
        except (TypeError, msgspec.EncodeError, OverflowError, RecursionError, ValueError):
            reply(pending.from_, ("error", "invalid_plugin_state"))
            return
        if len(encoded) > state.options.max_state_bytes:
            reply(pending.from_, ("error", "plugin_state_too_large"))
            return
        state.encoded = encoded
        state.generation += 1
        reply(pending.from_, ("ok", outcome))

    def _owner_down(self, state: _State, ref: Any) -> None:
        if state.running is not None and state.running[1].ref == ref:
            task, _pending, body = state.running
            task.kill()  # its state is discarded with it
            state.running = None
            self._abandon(state, body)
            self._next(state)
            return
        state.queue = deque(pending for pending in state.queue if pending.ref != ref)


def _callback(
    body: _Body,
    plugin: StatefulPlugin,
    hook: str,
    ctx: Mapping[str, Any],
    value: Any,
    config: Mapping[str, Any],
    encoded: bytes,
) -> tuple[Any, Any]:
    if not body.begin():  # stopped before it began
        raise RuntimeError("the callback was stopped before it began")
    try:
        state = msgspec.json.decode(encoded)  # this callback's own copy
        result = getattr(plugin, hook)(ctx, value, config, state)
    finally:
        body.end()
    if not (isinstance(result, tuple) and len(result) == 2):
        raise TypeError("a stateful hook returns (outcome, new_state)")
    return result


def _status(state: _State) -> dict[str, Any]:
    return {
        "id": state.options.id,
        "identity": "pid",
        "restart_policy": "temporary",
        "busy": state.running is not None or (state.fenced is not None and state.fenced.running()),
        "queued": len(state.queue),
        "generation": state.generation,
    }


# -- the API ------------------------------------------------------------------------------


def start_instance(
    plugin: StatefulPlugin,
    *,
    id: str,
    config: Mapping[str, Any] | None = None,
    init_timeout: float = DEFAULT_INIT_TIMEOUT,
    max_queue: int = DEFAULT_MAX_QUEUE,
    max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
    supervisor: Any = PLUGIN_INSTANCE_SUPERVISOR,
) -> Pid:
    """Run ``plugin.init(config)`` in a task within `init_timeout`, then start its
    instance under `supervisor` (the tree's plugin instance supervisor by default);
    its pid. Errors: ``invalid_plugin_instance_spec``, ``stateful_plugin_init_timeout``,
    ``stateful_plugin_init_failed``, ``invalid_plugin_state``,
    ``too_many_plugin_instances``."""
    if not isinstance(plugin, StatefulPlugin):
        raise AdkError("invalid_plugin_instance_spec", "plugin is a StatefulPlugin")
    options = _instance_options(id, config, init_timeout, max_queue, max_state_bytes)
    if supervisor == PLUGIN_INSTANCE_SUPERVISOR:
        ensure_started()
    task = Task.start(plugin.init, MappingProxyType(dict(options.config)))
    try:
        initial = task.wait(options.init_timeout)
    except TaskTimeout:
        task.kill()
        raise AdkError("stateful_plugin_init_timeout", "init did not return in time") from None
    except TaskFailed:
        raise AdkError("stateful_plugin_init_failed", "init raised") from None
    try:
        encoded = msgspec.json.encode(initial)
    except (TypeError, msgspec.EncodeError, OverflowError, RecursionError, ValueError):
        raise AdkError("invalid_plugin_state", "a plugin's state is JSON") from None
    if len(encoded) > options.max_state_bytes:
        raise AdkError("plugin_state_too_large", "the initial state is over max_state_bytes")
    spec = ChildSpec(
        ("plugin_instance", options.id),
        lambda: PluginInstance.start_link((plugin, options, encoded)),
        restart="temporary",
    )
    try:
        pid = DynamicSupervisor.start_child(supervisor, spec)
    except MaxChildrenReached:
        raise AdkError(
            "too_many_plugin_instances", "the plugin instance supervisor is full"
        ) from None
    assert pid is not None
    return pid


def _instance_options(
    id: Any, config: Any, init_timeout: Any, max_queue: Any, max_state_bytes: Any
) -> InstanceOptions:
    if not isinstance(id, str) or not 0 < len(id.encode("utf-8")) <= MAX_ID_BYTES:
        raise AdkError(("invalid_plugin_instance_spec", "id"), "id is 1..256 bytes")
    try:
        options = decode_options(
            InstanceOptions,
            {
                "id": id,
                "config": dict(config or {}),
                "init_timeout": float(init_timeout)
                if isinstance(init_timeout, int) and not isinstance(init_timeout, bool)
                else init_timeout,
                "max_queue": max_queue,
                "max_state_bytes": max_state_bytes,
            },
            "invalid_plugin_instance_spec",
        )
        size = len(msgspec.json.encode(options.config))
    except (TypeError, msgspec.EncodeError, OverflowError):
        raise AdkError(("invalid_plugin_instance_spec", "config"), "config is JSON") from None
    if size > MAX_CONFIG_BYTES:
        raise AdkError(("invalid_plugin_instance_spec", "config"), "config is at most 1 MiB")
    return options


def invoke(pid: Pid, hook: str, ctx: Mapping[str, Any], value: Any, timeout: float) -> Any:
    """Run `hook` in the instance for the calling process (its owner): the outcome.
    Raises ``AdkError`` with ``not_found`` (no such instance),
    ``stateful_plugin_timeout``, ``plugin_queue_full``, ``callback_failed``, ..."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_TIMEOUT
        or hook not in HOOKS
    ):
        raise AdkError("invalid_plugin_instance_invocation", "timeout is in (0, 120] s")
    deadline = time.monotonic() + timeout
    try:
        answer = call(pid, Invoke(hook, ctx, value, deadline, self_pid()), timeout + 1.0)
    except CallTimeout:
        raise AdkError("stateful_plugin_timeout", "the instance did not answer") from None
    except (ProcessExit, KernelError):
        raise AdkError("not_found", "no such plugin instance") from None
    kind, payload = answer
    if kind == "ok":
        return payload
    raise AdkError(payload, "the stateful plugin failed")


def instance_status(pid: Pid) -> dict[str, Any]:
    """``id``, ``identity`` (``"pid"``), ``restart_policy`` (``"temporary"``), ``busy``,
    ``queued`` and ``generation`` (committed states)."""
    try:
        return call(pid, Status(), 5.0)  # type: ignore[no-any-return]
    except (ProcessExit, KernelError):
        raise AdkError("not_found", "no such plugin instance") from None


def stop_instance(pid: Pid, *, supervisor: Any = PLUGIN_INSTANCE_SUPERVISOR) -> None:
    """Stop a live instance; ``not_found`` for one that is gone (never restarted)."""
    try:
        DynamicSupervisor.which_child(supervisor, pid)
        DynamicSupervisor.terminate_child(supervisor, pid)
    except KernelError:
        raise AdkError("not_found", "no such plugin instance") from None


class InstancePlugin(Plugin):
    """The plugin of a descriptor backed by instance `pid`: each hook the stateful
    plugin implements is forwarded to it (within `timeout` seconds)."""

    def __init__(self, pid: Pid, timeout: float = 1.0) -> None:
        self.pid = pid
        self.call_timeout = timeout
        try:
            self._hooks: frozenset[str] = call(pid, Hooks(), 5.0)
        except (ProcessExit, KernelError):
            raise AdkError("not_found", "no such plugin instance") from None

    def implemented_hooks(self) -> frozenset[str]:
        return self._hooks

    def hook_function(self, hook: str) -> Any:
        if hook not in self._hooks:
            return None
        pid, timeout = self.pid, self.call_timeout

        def forward(ctx: Mapping[str, Any], value: Any, config: Mapping[str, Any]) -> Any:
            return invoke(pid, hook, ctx, value, timeout)

        return forward
