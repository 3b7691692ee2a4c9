"""`AgentFile`: what a checked agent config file says, ready to spawn.

`load_agent_file` (``loader.py``) builds one; it is a frozen value: its JSON-safe
parts (`agent_config`, `runner_options`, `script`) plus the tools its ``"tools"``
import paths resolved to. `config` makes a fresh ``spawn_agent`` config from it each
time, so every agent spawned from one file starts its script from the first step.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from adk_actors.config_file.tool_paths import UnimportedTool
from providers.content import Content
from providers.outputs import ToolDeclaration
from providers.scripted import ScriptedProvider, Step

DEFAULT_AGENT_NAME = "CliAgent"
DEFAULT_MODEL = "gemini-3.1-flash-lite"

ProviderName = Literal["gemini", "scripted"]


class AgentFile(msgspec.Struct, frozen=True, kw_only=True):
    """One agent config file, checked: spawn it with `spawn_from_file`.

    `agent_config` holds the agent keys (model, instructions, global_instruction,
    generation_config, schemas, ...) without the provider; `runner_options` the
    `adk.Runner` keyword options; `tools` the import paths as written and
    `tool_objects` what they resolved to (`UnimportedTool` values when the file was
    loaded inside `without_tool_imports`).
    """

    path: str
    name: str
    provider: ProviderName
    model: str | None
    agent_config: dict[str, Any]
    runner_options: dict[str, Any]
    tools: tuple[str, ...] = ()
    tool_objects: tuple[Any, ...] = ()
    script: tuple[dict[str, Any], ...] | None = None
    script_repeat: bool = False

    @property
    def config(self) -> dict[str, Any]:
        """A fresh ``adk.spawn_agent`` config (a new scripted model each time)."""
        config: dict[str, Any] = {"provider": self.provider, **_copy(self.agent_config)}
        if self.provider == "scripted" and self.script is not None:
            steps = [_copy(step) for step in self.script]
            if self.script_repeat:
                # it answers forever (a daemon, a load test) and, like every scripted
                # provider, keeps no histories: its memory stays bounded
                config["provider"] = ScriptedProvider(fn=_Cycle(steps), inline=True)
            else:
                config["script"] = steps
        return config

    @property
    def tools_imported(self) -> bool:
        """False when the tool paths were only checked for syntax (nothing imported)."""
        return not any(isinstance(tool, UnimportedTool) for tool in self.tool_objects)

    @property
    def tool_names(self) -> list[str] | None:
        """The names the model sees for this file's tools; None when they were not
        imported (only a tool's object knows its name)."""
        if not self.tools_imported:
            return None
        return [str(getattr(tool, "name", "")) for tool in self.tool_objects]

    def needs_api_key(self) -> bool:
        """True when the model is Gemini (which reads its key from the environment)."""
        return self.provider == "gemini"


class _Cycle:
    """A script that starts again from its first step once every step was used."""

    def __init__(self, steps: Sequence[Mapping[str, Any]]) -> None:
        self._steps = list(steps)
        self._next = itertools.cycle(range(len(self._steps)))
        self._lock = threading.Lock()

    def __call__(self, history: Sequence[Content], tools: Sequence[ToolDeclaration]) -> Step:
        with self._lock:
            return self._steps[next(self._next)]


def _copy(value: Any) -> Any:
    """A deep copy of a JSON-shaped value (mappings and lists; scalars as they are)."""
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(item) for item in value]
    return value
