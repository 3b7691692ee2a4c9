"""`ToolCatalog`: an immutable snapshot of an agent's tools, schemas compiled once.

Building a catalog reads every schema once, compiles it with fastjsonschema (never
fetching anything: a ``$ref`` that is not a local ``#...`` fragment is refused, see
`adk_actors.tools.schema`), and refuses invalid or mistyped declarations and schemas
(``("invalid_tool_schema", name)``) and duplicate names (``("duplicate_tool_name",
name, first_source, second_source)``). Calling a tool validates its arguments first:
the model sees only the structure of a violation (kind, path, constraint), never the
values; arguments that are not JSON as they stand (nested more than
`providers.content.MAX_JSON_DEPTH` deep: kind ``too_deep``; NaN, infinity, a non-string
key: ``not_json``; a lone surrogate: ``invalid_utf8``) are refused the same way, before
any schema runs. A tool that raises (any exception, `SystemExit` included, but not
`KeyboardInterrupt` or a cancellation) becomes a failed function response naming only
the exception's class, and its reason if it is a stable ``snake_case`` `AdkError`
reason, never the exception's text; the turn goes on. A result that is not JSON as it
stands (a lone surrogate, NaN or infinity, deeper than `MAX_JSON_DEPTH`, an object,
larger than `MAX_RESULT_BYTES`) is replaced by the structural error
``invalid_tool_result`` (with ``reason`` ``invalid_utf8``, ``not_json_safe``,
``too_deep`` or ``result_too_large``): the poison is neither stored nor shown.

A call refused for a structural reason answers the model with `structural_error`:
``{"success": false, "error": {"kind": <reason>, ...}}`` (``not_found``,
``tool_catalog_changed``, ``invalid_tool_result``, ``tool_confirmation_requires_runner``,
``tool_confirmation_evaluation_failed``, ...). Invalid arguments keep the spec's own
shape, ``{"type": "invalid_tool_arguments", "validation": {"kind", "path",
"constraint"}}``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import fastjsonschema

from adk_actors.tools.schema import InvalidSchema, compile_schema
from adk_actors.tools.suspension import Suspension
from adk_actors.tools.tool import Tool, ToolContext, check_name
from adk_actors.tools.toolset import Toolset, ToolsetSnapshot
from providers.content import FunctionCallPart, FunctionResponsePart, canonical_json
from providers.errors import AdkError
from supervision.logs import get_logger

_log = get_logger("adk.tools")

MAX_RESULT_BYTES = 1 << 20

_NOT_CAUGHT = (KeyboardInterrupt, GeneratorExit, asyncio.CancelledError)
"""What a tool may raise that is not its failure: the process is being interrupted."""
_STABLE_REASON = re.compile(r"[a-z][a-z0-9_]{0,63}")

_RULE_KINDS = {
    "required": "required_property",
    "type": "expected_type",
    "additionalProperties": "additional_property",
    "enum": "enum_mismatch",
    "const": "const_mismatch",
    "pattern": "pattern_mismatch",
    "anyOf": "any_of_mismatch",
    "oneOf": "one_of_mismatch",
    "allOf": "all_of_mismatch",
}


class _Entry(NamedTuple):
    """One tool of a catalog (a tuple: every agent holds one per tool, and a tuple is
    the smallest and quickest to make of the immutable records)."""

    tool: Tool
    declaration: dict[str, Any]
    validate: Callable[[Any], Any]
    source: str


_NOT_RESERVED: Mapping[str, str] = MappingProxyType({})
_SOURCES: dict[str, str] = {}
"""``tool <class qualname>`` by qualname: one string shared by every catalog of a tool
class (each idle agent held its own copy), at most `_MAX_SOURCES` of them."""
_MAX_SOURCES = 256


def _class_source(tool: Tool) -> str:
    qualname = type(tool).__qualname__
    source = _SOURCES.get(qualname)
    if source is None:
        source = f"tool {qualname}"
        if len(_SOURCES) < _MAX_SOURCES:
            source = _SOURCES.setdefault(qualname, source)
    return source


class ToolCatalog:
    """The tools an agent may call, as one immutable snapshot."""

    def __init__(
        self,
        tools: Iterable[Tool | Toolset | ToolsetSnapshot],
        *,
        reserved: Mapping[str, str] | None = None,
    ) -> None:
        entries: dict[str, _Entry] = {}
        taken = reserved or _NOT_RESERVED  # name -> source, e.g. sub-agents (only read)
        expanded: list[Tool] = []
        for tool in tools:  # a toolset contributes its snapshot's tools
            if isinstance(tool, Toolset):
                tool = tool.snapshot()
            if isinstance(tool, ToolsetSnapshot):
                expanded.extend(tool.tools)
            else:
                expanded.append(tool)
        for tool in expanded:
            if not isinstance(tool, Tool):
                raise AdkError(
                    ("invalid_tool", type(tool).__name__),
                    "tools are @adk.tool functions or adk.Tool instances",
                )
            declaration = _declaration(tool)
            name = check_name(declaration.get("name", ""))
            if not isinstance(declaration.get("description", ""), str):
                raise AdkError(("invalid_tool_schema", name), "a tool's description is a string")
            source = getattr(tool, "source", None) or (
                f"sub-agent {name}" if type(tool).__name__ == "AgentTool" else _class_source(tool)
            )
            if name in entries or name in taken:
                first = entries[name].source if name in entries else taken[name]
                raise AdkError(
                    ("duplicate_tool_name", name, first, source), f"two tools are named {name!r}"
                )
            parameters = declaration.get("parameters", {"type": "object"})
            try:
                validate = compile_schema(parameters)
            except InvalidSchema as refused:
                raise AdkError(
                    refused.reason(("invalid_tool_schema", name), name),
                    f"the parameter schema of {name!r} is refused ({refused.why})",
                ) from None
            entries[name] = _Entry(tool, declaration, validate, source)
        self._entries = entries
        self._async: dict[str, bool] | None = None  # `is_async` per tool, asked once

    def declarations(self) -> list[dict[str, Any]]:
        """What the model is told: ``{"name", "description", "parameters"}`` per tool."""
        return [entry.declaration for entry in self._entries.values()]

    def names(self) -> list[str]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def tool(self, name: str) -> Tool | None:
        entry = self._entries.get(name)
        return entry.tool if entry else None

    def validator(self, name: str) -> Callable[[Any], Any] | None:
        """Tool `name`'s compiled argument validator: one object, shared by every catalog
        whose tool has an equal parameter schema (`adk_actors.tools.schema`)."""
        entry = self._entries.get(name)
        return entry.validate if entry else None

    def check_arguments(self, name: str, args: Any) -> dict[str, Any] | None:
        """None if `args` are valid for tool `name`, else the structural error payload."""
        entry = self._entries.get(name)
        if entry is None:
            return structural_error("not_found", name=name)
        try:
            canonical_json(args, not_json="not_json", not_canonical="not_json", too_deep="too_deep")
            entry.validate(args)
        except AdkError as refused:  # not JSON as it stands: no schema has run
            kind = refused.reason
            return _invalid_arguments({"kind": kind, "path": [], "constraint": _CONSTRAINT[kind]})
        except RecursionError:  # a recursive schema: the depth check runs first, though
            return _invalid_arguments({"kind": "too_deep", "path": [], "constraint": "max_depth"})
        except fastjsonschema.JsonSchemaValueException as error:
            return _invalid_arguments(_structure(error, entry, args))
        return None

    def call(self, call: FunctionCallPart, ctx: ToolContext) -> FunctionResponsePart:
        """Validate and run one call outside a Runner; every outcome is a function
        response for the model (a call needing approval fails closed, never runs)."""
        refusal = self.check_arguments(call.name, call.args)
        if refusal is None:
            refusal = confirmation_refusal(self._entries[call.name].tool, call, ctx)
        if refusal is not None:
            return FunctionResponsePart(call.name, refusal, call.id)
        response = self.execute(call, ctx, approved=True)
        if isinstance(response, Suspension):  # only a Runner can pause
            raise AdkError(
                "tool_confirmation_requires_runner",
                f"{call.name!r} pauses for a human or an operation; only a Runner can",
            )
        return response

    def execute(
        self, call: FunctionCallPart, ctx: ToolContext, *, approved: bool = False
    ) -> FunctionResponsePart | Suspension:
        """Run a call whose arguments `check_arguments` already accepted. Without a Runner
        (`approved` false) a call needing approval fails closed; a `Suspension` result is
        returned as is for the Runner to pause on."""
        entry = self._runnable(call, ctx, approved)
        try:
            value = entry.tool.execute(dict(call.args), ctx)
        except _NOT_CAUGHT:
            raise
        except BaseException as error:  # SystemExit too: a tool never ends its caller
            return FunctionResponsePart(call.name, _failure(call.name, error), call.id)
        return _response(call, value)

    async def aexecute(
        self, call: FunctionCallPart, ctx: ToolContext, *, approved: bool = False
    ) -> FunctionResponsePart | Suspension:
        """`execute` for an async tool (see `is_async`), awaited on the caller's loop."""
        entry = self._runnable(call, ctx, approved)
        try:
            value = await entry.tool.execute(dict(call.args), ctx)
        except _NOT_CAUGHT:
            raise
        except BaseException as error:
            return FunctionResponsePart(call.name, _failure(call.name, error), call.id)
        return _response(call, value)

    def is_async(self, name: str) -> bool:
        """Is this tool a coroutine (run on the reactor, holding no thread)? Asked of
        the tool once (its ``execute`` does not change), then remembered."""
        known = self._async
        if known is None:
            known = self._async = {}
        found = known.get(name)
        if found is None:
            entry = self._entries.get(name)
            if entry is None:
                return False
            found = known[name] = bool(entry.tool.is_async)
        return found

    def _runnable(self, call: FunctionCallPart, ctx: ToolContext, approved: bool) -> _Entry:
        entry = self._entries[call.name]
        if not approved and entry.tool.needs_confirmation(call.args, ctx):
            raise AdkError(
                "tool_confirmation_requires_runner",
                f"{call.name!r} needs human approval, which only a Runner can pause for",
            )
        return entry


def structural_error(kind: str, **details: Any) -> dict[str, Any]:
    """The payload a model sees for a call refused for a structural reason: ``kind``
    names it, `details` are structural too (names, ids, hints), never argument values."""
    return {"success": False, "error": {"kind": kind, **details}}


def requires_runner(hint: str | None = None) -> dict[str, Any]:
    """A call needing approval outside a Runner: nothing can pause, so it fails closed."""
    details = {} if hint is None else {"hint": hint}
    return structural_error("tool_confirmation_requires_runner", **details)


def confirmation_refusal(
    tool: Tool, call: FunctionCallPart, ctx: ToolContext
) -> dict[str, Any] | None:
    """Outside a Runner: None if `tool` needs no approval for this call, else the
    model-visible refusal (a failing check is ``tool_confirmation_evaluation_failed``)."""
    try:
        required, hint = tool.confirmation(dict(call.args), ctx)
    except _NOT_CAUGHT:
        raise
    except BaseException as error:
        return evaluation_failed(call.name, error)
    return requires_runner(hint) if required else None


def evaluation_failed(name: str, error: BaseException) -> dict[str, Any]:
    _log.warning("adk.tool.confirmation_failed", tool=name, error=type(error).__name__)
    return structural_error("tool_confirmation_evaluation_failed", operation=name)


def _response(call: FunctionCallPart, value: Any) -> FunctionResponsePart | Suspension:
    if isinstance(value, Suspension):
        return value
    return FunctionResponsePart(call.name, checked_result(call.name, value), call.id)


def _declaration(tool: Tool) -> dict[str, Any]:
    """A tool's declaration as a dict (``("invalid_tool_schema", name)`` if it is not one)."""
    try:
        declaration = tool.schema()
        if isinstance(declaration, Mapping):
            return dict(declaration)
    except Exception:  # a broken schema() is the tool's definition failing
        pass
    name = getattr(tool, "name", None)
    raise AdkError(
        ("invalid_tool_schema", name if isinstance(name, str) else None),
        "a tool's schema() is a mapping",
    )


_CONSTRAINT = {"too_deep": "max_depth", "not_json": "json", "invalid_utf8": "utf8"}


def _invalid_arguments(validation: dict[str, Any]) -> dict[str, Any]:
    return {"success": False, "error": {"type": "invalid_tool_arguments", "validation": validation}}


def _structure(
    error: fastjsonschema.JsonSchemaValueException, entry: _Entry, args: Any
) -> dict[str, Any]:
    path = [str(step) for step in (error.path or [])][1:]  # drop fastjsonschema's "data"
    rule = str(error.rule or "invalid")
    if rule == "required" and isinstance(args, Mapping):
        # name the first missing property: schema vocabulary, not a value
        schema = entry.declaration.get("parameters", {})
        node = schema
        for step in path:
            node = node.get("properties", {}).get(step, {}) if isinstance(node, Mapping) else {}
        required = node.get("required", []) if isinstance(node, Mapping) else []
        present = args
        for step in path:
            present = present.get(step, {}) if isinstance(present, Mapping) else {}
        missing = [
            name for name in required if not isinstance(present, Mapping) or name not in present
        ]
        if missing:
            path = [*path, missing[0]]
    return {"kind": _RULE_KINDS.get(rule, rule), "path": path, "constraint": rule}


def checked_result(name: str, value: Any) -> dict[str, Any]:
    """The function-response payload of tool `name` returning `value` (a dict as it is,
    anything else as ``{"result": value}``), if it is JSON as it stands and at most
    `MAX_RESULT_BYTES`; otherwise the structural error ``invalid_tool_result``. One
    canonical encode (`providers.content.canonical_json`) checks all of it: what a
    callback or a resume puts in a tool's place is checked the same way."""
    payload = value if isinstance(value, dict) else {"result": value}
    try:
        size = len(
            canonical_json(
                payload,
                not_json="not_json_safe",
                not_canonical="not_json_safe",
                too_deep="too_deep",
            )
        )
    except AdkError as refused:
        return structural_error("invalid_tool_result", operation=name, reason=refused.reason)
    if size > MAX_RESULT_BYTES:
        return structural_error("invalid_tool_result", operation=name, reason="result_too_large")
    return payload


def _failure(name: str, error: BaseException) -> dict[str, Any]:
    """What the model sees of a tool that raised: the class, never the text; an
    `AdkError`'s reason only if it is a stable ``snake_case`` word."""
    reason = (
        error.reason
        if isinstance(error, AdkError)
        and isinstance(error.reason, str)
        and _STABLE_REASON.fullmatch(error.reason)
        else "tool_failed"
    )
    if reason == "tool_catalog_changed":  # fail closed, and say so
        return structural_error("tool_catalog_changed", operation=name)
    _log.warning("adk.tool.failed", tool=name, error_class=type(error).__name__, reason=reason)
    return {
        "success": False,
        "error": {
            "component": "tool",
            "operation": name,
            "class": type(error).__name__,
            "reason": reason,
        },
    }


def declarations_of(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    return ToolCatalog(tools).declarations()
