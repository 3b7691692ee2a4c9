"""Tools: `@tool` for plain functions (schema from type hints and docstring) and
`Tool` for explicit schemas.

A tool's `execute(args, ctx)` returns a JSON-safe value or raises; the agent turns
either into a function response for the model. `ctx` is a `ToolContext`: who is
calling (app, user, session, invocation, call id) and a read-only view of state.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, get_type_hints

import msgspec

from providers.errors import AdkError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_CONTEXT_PARAMETERS = ("ctx", "tool_context", "context")
MAX_CONFIRMATION_HINT_CHARS = 512


@dataclass(frozen=True)
class ToolContext:
    """What a tool learns about the call; `state` is read-only."""

    app_name: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    invocation_id: str | None = None
    call_id: str | None = None
    agent_name: str | None = None
    state: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    ancestry: tuple[str, ...] = ()
    """The agents delegating down to this call, root first (never sent to a model)."""
    global_instruction: str | None = None
    """The root agent's global instruction, carried across delegation."""


class Tool:
    """An explicit tool: set `name` and `description`, implement `schema` (or set
    `parameters`) and `execute`. Define `require_confirmation` to ask for approval."""

    name: str = ""
    description: str = ""
    parameters: Mapping[str, Any] | None = None
    parallel_safe: bool = False

    def schema(self) -> dict[str, Any]:
        """``{"name", "description", "parameters": JSON Schema}``."""
        declaration: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.parameters is not None:
            declaration["parameters"] = dict(self.parameters)
        return declaration

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.execute")

    @property
    def is_async(self) -> bool:
        """An ``async def execute`` runs on the reactor; a plain one on a pool thread."""
        return inspect.iscoroutinefunction(self.execute)

    def needs_confirmation(self, args: dict[str, Any], ctx: ToolContext) -> bool:
        """True when the tool wants a human to approve this call."""
        return self.confirmation(args, ctx)[0]

    def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> tuple[bool, str | None]:
        """(approval required, bounded hint) from `require_confirmation`: a bool, or a
        callable ``(args, ctx)`` returning a bool or ``{"required": bool, "hint": str}``."""
        check = getattr(self, "require_confirmation", None)
        if check is None or check is False:
            return False, None
        if check is True:
            return True, None
        decision = check(args, ctx) if callable(check) else check
        if isinstance(decision, Mapping):
            hint = decision.get("hint")
            return bool(decision.get("required")), (
                hint[:MAX_CONFIRMATION_HINT_CHARS] if isinstance(hint, str) else None
            )
        return bool(decision), None


class FunctionTool(Tool):
    """A tool made from a plain function by `@tool`."""

    def __init__(
        self, fn: Callable[..., Any], name: str | None = None, description: str | None = None
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        doc = inspect.getdoc(fn) or ""
        summary, argument_docs = _parse_docstring(doc)
        self.description = description if description is not None else summary
        self._context_parameter, fields = _arguments(fn, self.name)
        self.parameters = _schema_of(f"{self.name}_arguments", fields, argument_docs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def __repr__(self) -> str:
        return f"<tool {self.name}>"

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        kwargs = dict(args)
        if self._context_parameter is not None:
            kwargs[self._context_parameter] = ctx
        return self.fn(**kwargs)


def tool(
    fn: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None
) -> Any:
    """Make a plain function a tool: JSON Schema from its type hints, description from
    its docstring. A parameter named ``ctx`` (or ``tool_context``) receives the
    `ToolContext` and is hidden from the model. Every other parameter needs a type
    hint: one without is refused here with ``("missing_type_hint", tool, parameter)``."""

    def wrap(function: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(function, name, description)

    return wrap(fn) if fn is not None else wrap


def check_name(name: str, what: str = "tool") -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise AdkError(
            ("invalid_tool_name", name if isinstance(name, str) else None),
            f"{what} names match [A-Za-z_][A-Za-z0-9_]*",
        )
    return name


def _arguments(fn: Callable[..., Any], name: str) -> tuple[str | None, list[Any]]:
    """The context parameter's name (or None) and the arguments' struct fields."""
    try:
        hints = get_type_hints(fn)
    except Exception:
        raise AdkError(("invalid_tool_schema", name), "its type hints do not resolve") from None
    fields: list[Any] = []
    context_parameter = None
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.name in _CONTEXT_PARAMETERS:
            context_parameter = parameter.name
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise AdkError(
                ("invalid_tool_schema", name), "tools take named parameters, not *args/**kwargs"
            )
        if parameter.name not in hints:  # never guess "anything": the model needs a type
            raise AdkError(
                ("missing_type_hint", name, parameter.name),
                f"parameter {parameter.name!r} of tool {name!r} has no type hint; annotate "
                f"it (e.g. `{parameter.name}: str`, or `{parameter.name}: typing.Any` to "
                "accept any JSON value)",
            )
        annotation = hints[parameter.name]
        if parameter.default is inspect.Parameter.empty:
            fields.append((parameter.name, annotation))
        else:
            fields.append((parameter.name, annotation, parameter.default))
    return context_parameter, fields


def _schema_of(
    struct_name: str, fields: list[Any], argument_docs: dict[str, str]
) -> dict[str, Any]:
    generated = _generated_schema(struct_name, fields)
    definitions = generated.get("$defs", {})
    root = dict(definitions.pop(struct_name))
    root.pop("title", None)
    root["additionalProperties"] = False
    properties = {key: dict(value) for key, value in root.get("properties", {}).items()}
    for key, text in argument_docs.items():
        if key in properties:
            properties[key]["description"] = text
    root["properties"] = properties
    if definitions:
        root["$defs"] = definitions
    return root


RECENT_SIGNATURES = 256
"""Generated argument schemas kept, by signature (most recently used)."""

_signatures: OrderedDict[tuple[Any, ...], bytes] = OrderedDict()
_signatures_lock = threading.Lock()
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()
_SCALARS = (str, int, float, bool, type(None))


def _generated_schema(struct_name: str, fields: list[Any]) -> dict[str, Any]:
    """msgspec's JSON Schema of a struct `struct_name` with `fields`, always a fresh
    value. Generating it (a struct class, then msgspec's schema walk) is most of the
    cost of `@tool`; a function wrapped again with the same signature (a tool object
    per agent) reuses the JSON text of the last one instead."""
    key = _signature_key(struct_name, fields)
    if key is not None:
        with _signatures_lock:
            cached = _signatures.get(key)
            if cached is not None:
                _signatures.move_to_end(key)
        if cached is not None:
            return _decoder.decode(cached)  # type: ignore[no-any-return]
    struct = msgspec.defstruct(struct_name, fields, forbid_unknown_fields=True)
    try:
        generated = msgspec.json.schema(struct)
    except TypeError:
        raise AdkError(
            ("invalid_tool_schema", struct_name), "a parameter type has no JSON Schema"
        ) from None
    if key is not None:
        data = _encoder.encode(generated)
        if _decoder.decode(data) == generated:  # kept only if its JSON text is all of it
            with _signatures_lock:
                _signatures[key] = data
                while len(_signatures) > RECENT_SIGNATURES:
                    _signatures.popitem(last=False)
    return generated


def _signature_key(struct_name: str, fields: list[Any]) -> tuple[Any, ...] | None:
    """What the generated schema depends on: the name, and each field's name, type (by
    equality and by repr: ``int | str`` equals ``str | int`` but is written in its own
    order) and default (scalars only, with their type); None if not hashable."""
    parts: list[Any] = [struct_name]
    try:
        for field_name, annotation, *default in fields:
            if default and type(default[0]) not in _SCALARS:
                return None
            typed_default = (type(default[0]), default[0]) if default else ()
            parts.append((field_name, annotation, repr(annotation), typed_default))
        key = tuple(parts)
        hash(key)
    except Exception:  # an unhashable type or default, a failing __repr__
        return None
    return key


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary paragraph, and ``name: text`` lines of an ``Args:`` section."""
    summary_lines: list[str] = []
    arguments: dict[str, str] = {}
    section = "summary"
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.lower() in ("args:", "arguments:", "parameters:"):
            section = "args"
            continue
        if stripped.lower() in ("returns:", "raises:", "examples:", "yields:"):
            section = "other"
            continue
        if section == "summary":
            if not stripped and summary_lines:
                section = "other"
            elif stripped:
                summary_lines.append(stripped)
        elif section == "args" and ":" in stripped:
            key, text = stripped.split(":", 1)
            arguments[key.split("(")[0].strip()] = text.strip()
    return " ".join(summary_lines), arguments
