"""`ScriptedProvider`: the offline model for tests, demos and the stress harness.

``ScriptedProvider(steps)`` consumes one step per model call, in order (thread-safe);
``ScriptedProvider(fn=f)`` calls ``f(history, tools)`` for every call and uses the
step it returns, so it can answer concurrent calls deterministically by input. `f` is
a plain function called inline, on the caller's thread or event loop: it must be
quick and never block (to make an answer slow, return a step with a ``"delay"``).
A step:

* ``{"text": "..."}`` (a plain string is short for this)
* ``{"tool_calls": [{"name": ..., "args": {...}, "id": ...}]}``
* ``{"stream": ["chunk", ...]}``: deltas for `stream`, their concatenation otherwise
* ``{"content": Content}``
* ``{"error": "reason"}``: raises `AdkError(reason)`
* each with an optional ``"delay": seconds`` before it answers: slept by the sync
  methods, awaited (``asyncio.sleep``, the loop keeps running) by `agenerate`,
  `astream` and `astream_content`

The provider keeps no copy of the histories it is called with (a long run, a daemon
or the stress harness would grow without bound): a test that inspects what the model
saw opts in with ``record_histories=n`` and reads `histories`, the newest `n` in call
order (at most `MAX_RECORDED_HISTORIES`).

In an agent config, ``{"provider": "scripted", "script": [steps]}`` uses a fresh
scripted provider per config.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from providers import content as content_model
from providers.content import Content
from providers.errors import AdkError
from providers.outputs import ModelOutput, ToolCalls, ToolDeclaration, visible_text_deltas
from supervision import Task
from supervision.aio import wait_task

Step = Mapping[str, Any] | str
StepFunction = Callable[[Sequence[Content], Sequence[ToolDeclaration]], Step]

_STEP_KINDS = ("text", "tool_calls", "stream", "content", "error")
_STEP_KIND_SET = frozenset(_STEP_KINDS)
_CONFIG_KEYS = frozenset(
    {"provider", "script", "model", "instructions", "generation_config", "request_timeout"}
)
MAX_DELAY_SECONDS = 3600.0
MAX_RECORDED_HISTORIES = 10_000
"""The most histories `record_histories` may keep: the record stays bounded."""


class ScriptedProvider:
    """A deterministic model that answers from a script or a function."""

    name = "scripted"

    def __init__(
        self,
        steps: Sequence[Step] | None = None,
        *,
        fn: StepFunction | None = None,
        inline: bool = False,
        record_histories: int = 0,
    ) -> None:
        if (steps is None) == (fn is None):
            raise AdkError("invalid_script", "give either steps or fn")
        if (
            steps is not None
            and type(steps) is not list
            and (not isinstance(steps, Sequence) or isinstance(steps, (str, bytes)))
        ):
            raise AdkError("invalid_script", "steps is a list of step mappings")
        self._steps = [_check_step(step) for step in steps] if steps is not None else []
        self._fn = fn
        self._inline = inline
        """`fn` is quick and never blocks: the async calls run it on the event loop
        itself instead of in a pool task (a blocking one would stall the loop)."""
        self._next = 0
        self._lock = threading.Lock()
        self.calls = 0
        self._record_histories = (
            0  # the default, as most providers (one per scripted agent) are made
            if type(record_histories) is int and record_histories == 0
            else _check_record_histories(record_histories)
        )
        self._histories: deque[list[Content]] | None = (
            deque(maxlen=self._record_histories) if self._record_histories else None
        )

    @property
    def histories(self) -> list[list[Content]]:
        """The newest `record_histories` histories the provider was called with, in call
        order (a copy); empty unless the provider was made with ``record_histories=n``."""
        with self._lock:
            return [list(history) for history in self._histories or ()]

    def fresh(self) -> ScriptedProvider:
        """A new provider with the same script and `record_histories`, starting over at
        its first step with no calls recorded (one per evaluation sample, say); a function
        script is shared, being deterministic by input."""
        if self._fn is not None:
            return ScriptedProvider(
                fn=self._fn, inline=self._inline, record_histories=self._record_histories
            )
        return ScriptedProvider(
            self._steps, inline=self._inline, record_histories=self._record_histories
        )

    @classmethod
    def from_config_provider(cls) -> _ConfigScripted:
        return _ConfigScripted()

    def capabilities(self) -> dict[str, Any]:
        return {
            "streaming": True,
            "function_calling": True,
            "structured_output": False,
            "multimodal": True,
            "thinking": False,
            "safety_settings": False,
            "google_search_grounding": False,
            "builtin_tools": [],
            "content_schema_version": 1,
            "live": False,
        }

    def validate_config(self, config: Mapping[str, Any]) -> None:
        unknown = sorted(set(config) - _CONFIG_KEYS)
        if unknown:
            raise AdkError(
                ("unknown_config_keys", tuple(unknown)), f"unknown keys: {', '.join(unknown)}"
            )

    def remaining(self) -> int:
        with self._lock:
            return len(self._steps) - self._next

    def _take(
        self, history: Sequence[Content], tools: Sequence[ToolDeclaration]
    ) -> Mapping[str, Any]:
        with self._lock:
            self.calls += 1
            if self._histories is not None:
                self._histories.append(list(history))
            if self._fn is None:
                if self._next >= len(self._steps):
                    raise AdkError("script_exhausted", f"the script has {len(self._steps)} steps")
                step = self._steps[self._next]
                self._next += 1
                return step
        return _check_step(self._fn(history, tools))

    def generate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
    ) -> ModelOutput:
        return self._frames(history, tools)[1]

    def stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[str], None],
    ) -> ModelOutput:
        return _deliver_text(*self._frames(history, tools), on_delta)

    def stream_content(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[Content], None],
    ) -> ModelOutput:
        return _deliver_frames(*self._frames(history, tools), on_delta)

    async def agenerate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
    ) -> ModelOutput:
        return (await self._aframes(history, tools))[1]

    async def astream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[str], None],
    ) -> ModelOutput:
        return _deliver_text(*await self._aframes(history, tools), on_delta)

    async def astream_content(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[Content], None],
    ) -> ModelOutput:
        return _deliver_frames(*await self._aframes(history, tools), on_delta)

    def _frames(
        self, history: Sequence[Content], tools: Sequence[ToolDeclaration]
    ) -> tuple[list[Content], ModelOutput]:
        """One call: the frames a stream delivers, and the whole answer."""
        step = self._take(history, tools)
        _pause(step)
        return _step_frames(step)

    async def _aframes(
        self, history: Sequence[Content], tools: Sequence[ToolDeclaration]
    ) -> tuple[list[Content], ModelOutput]:
        """`_frames` with the step's delay awaited. A step function is user code that may
        block: it runs in a kernel task on the pool (its pid is the model call's), and
        the coroutine awaits it without holding a thread."""
        if self._fn is None or self._inline:
            step = self._take(history, tools)
        else:
            kind, value = await wait_task(Task.start(_taken, self, history, tools))
            if kind == "error":
                raise value
            step = value
        delay = step.get("delay", 0)
        if delay:
            await asyncio.sleep(delay)
        return _step_frames(step)


def _taken(
    provider: ScriptedProvider, history: Sequence[Content], tools: Sequence[ToolDeclaration]
) -> tuple[str, Any]:
    """In a task: the next step, or what taking it raised (kept as a value, so the
    coroutine raises the very same exception)."""
    try:
        return "ok", provider._take(history, tools)
    except Exception as error:
        return "error", error


def _deliver_text(
    frames: list[Content], answer: ModelOutput, on_delta: Callable[[str], None]
) -> ModelOutput:
    """A text stream: each frame's visible text deltas, then the whole answer."""
    for frame in frames:
        for delta in visible_text_deltas(frame.parts):
            on_delta(delta)
    return answer


def _deliver_frames(
    frames: list[Content], answer: ModelOutput, on_delta: Callable[[Content], None]
) -> ModelOutput:
    """A content stream: one Content per frame, then the whole answer."""
    for frame in frames:
        on_delta(frame)
    return answer


def _step_frames(step: Mapping[str, Any]) -> tuple[list[Content], ModelOutput]:
    """A taken step's stream frames and whole answer (raises for an error step)."""
    if "stream" in step:
        frames = [content_model.new([chunk], role="model") for chunk in step["stream"]]
        return frames, "".join(step["stream"])
    answer = _answer(step)
    if isinstance(answer, ToolCalls):
        return [answer.content], answer
    if isinstance(answer, str):
        return ([content_model.new([answer], role="model")] if answer else []), answer
    return [answer], answer


class _ConfigScripted:
    """The registered ``"scripted"`` provider: runs ``config["script"]``, one provider
    (and so one step cursor) per script list, remembering the last `MAX_SCRIPTS`."""

    name = "scripted"
    MAX_SCRIPTS = 4096

    def __init__(self) -> None:
        self._by_config: OrderedDict[int, tuple[Any, ScriptedProvider]] = OrderedDict()
        self._lock = threading.Lock()

    def _for(self, config: Mapping[str, Any]) -> ScriptedProvider:
        script = config.get("script")
        if script is None:
            raise AdkError(
                "missing_script", "a scripted config needs 'script': [steps] or a ScriptedProvider"
            )
        if isinstance(script, ScriptedProvider):
            return script
        with self._lock:
            entry = self._by_config.get(id(script))
            if entry is None or entry[0] is not script:
                entry = (script, ScriptedProvider(script))
                self._by_config[id(script)] = entry
                if len(self._by_config) > self.MAX_SCRIPTS:
                    self._by_config.popitem(last=False)
            else:
                self._by_config.move_to_end(id(script))
            return entry[1]

    def capabilities(self) -> dict[str, Any]:
        return ScriptedProvider(["x"]).capabilities()

    def validate_config(self, config: Mapping[str, Any]) -> None:
        ScriptedProvider(["x"]).validate_config(config)
        self._for(config)

    def generate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
    ) -> ModelOutput:
        return self._for(config).generate(config, history, tools)

    def stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[str], None],
    ) -> ModelOutput:
        return self._for(config).stream(config, history, tools, on_delta)

    def stream_content(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[Content], None],
    ) -> ModelOutput:
        return self._for(config).stream_content(config, history, tools, on_delta)

    async def agenerate(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
    ) -> ModelOutput:
        return await self._for(config).agenerate(config, history, tools)

    async def astream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[str], None],
    ) -> ModelOutput:
        return await self._for(config).astream(config, history, tools, on_delta)

    async def astream_content(
        self,
        config: Mapping[str, Any],
        history: Sequence[Content],
        tools: Sequence[ToolDeclaration],
        on_delta: Callable[[Content], None],
    ) -> ModelOutput:
        return await self._for(config).astream_content(config, history, tools, on_delta)


def _check_record_histories(count: int) -> int:
    """`count` when it is a whole number of histories to keep, 0..MAX_RECORDED_HISTORIES."""
    if isinstance(count, bool) or not isinstance(count, int):
        raise AdkError("invalid_record_histories", "record_histories is a whole number")
    if not 0 <= count <= MAX_RECORDED_HISTORIES:
        raise AdkError(
            "invalid_record_histories", f"record_histories must be 0..{MAX_RECORDED_HISTORIES}"
        )
    return count


def _check_step(step: Step) -> Mapping[str, Any]:
    if isinstance(step, str):
        return {"text": step}
    if type(step) is not dict and not isinstance(step, Mapping):
        raise AdkError("invalid_script_step", "a step is a mapping (or a string for text)")
    kind = None  # one pass over the keys: a step function's step is checked every call
    for key in step:
        if key in _STEP_KIND_SET and kind is None:
            kind = key
        elif key != "delay":
            kind = None
            break
    if kind is None:
        raise AdkError(
            "invalid_script_step", f"a step has exactly one of {_STEP_KINDS} (and optional 'delay')"
        )
    if type(step) is not dict or "delay" in step:  # a dict without one: its delay is 0
        delay = step.get("delay", 0)
        if (
            isinstance(delay, bool)
            or not isinstance(delay, int | float)
            or not 0 <= delay <= MAX_DELAY_SECONDS
        ):
            raise AdkError("invalid_script_step", f"delay must be 0..{MAX_DELAY_SECONDS} seconds")
    if kind == "stream" and not (
        isinstance(step["stream"], list) and all(isinstance(c, str) for c in step["stream"])
    ):
        raise AdkError("invalid_script_step", "stream is a list of strings")
    if kind == "content" and not isinstance(step["content"], Content):
        raise AdkError("invalid_script_step", "content must be a Content")
    if kind == "tool_calls" and not (isinstance(step["tool_calls"], list) and step["tool_calls"]):
        raise AdkError("invalid_script_step", "tool_calls is a non-empty list")
    return step


def _pause(step: Mapping[str, Any]) -> None:
    delay = step.get("delay", 0)
    if delay:
        time.sleep(delay)


def _answer(step: Mapping[str, Any]) -> str | Content | ToolCalls:
    if "error" in step:
        raise AdkError(step["error"], "scripted provider error")
    if "text" in step:
        return str(step["text"])
    if "stream" in step:
        return "".join(step["stream"])
    if "content" in step:
        return step["content"]  # type: ignore[no-any-return]
    calls = tuple(
        content_model.function_call(
            call["name"], call.get("args", {}), id=call.get("id") or f"call_{index}"
        )
        for index, call in enumerate(step["tool_calls"])
    )
    return ToolCalls(calls, Content("model", calls))
