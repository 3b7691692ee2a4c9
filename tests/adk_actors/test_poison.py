"""Poisoned inputs: tool results and model arguments that are not JSON as they stand,
exceptions whose text must not travel, schemas that would fetch, mistyped parameters.

Each becomes a typed, structural refusal (an `AdkError`, or a tool error the model sees)
and the turn goes on; nothing of the poison is stored, returned or logged.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

import adk_actors as adk
from adk_actors.tools import ToolCatalog, ToolContext
from providers import content
from providers.content import Content, FunctionCallPart
from providers.outputs import ToolCalls

SECRET = "AIzaSECRET-do-not-leak"


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def sessions() -> Iterator[Any]:
    service = adk.sessions.InMemorySessionService()
    yield service
    service.close()


def tool_turn(sessions: Any, tool: Any, name: str, args: dict[str, Any] | None = None) -> Any:
    """Run one tool round under a Runner; the stored tool response and what the model saw."""
    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": name, "args": args or {}}]}, "done"], record_histories=10
    )
    agent = adk.spawn_agent("Poisoned", {"provider": model}, tools=[tool])
    assert adk.Runner(agent, "app", sessions).run("u", "s", "go") == "done"
    stored = [
        e
        for e in sessions.get_session("app", "u", "s").events
        if e.content and e.content.role == "tool"
    ]
    assert len(stored) == 1
    return stored[0].content.parts[0].response, model.histories[1][-1].parts[0].response


# -- 1. tool results that are not JSON as they stand ----------------------------------------

POISON_RESULTS = {
    "lone_surrogate": ({"x": "\ud800"}, "invalid_utf8"),
    "surrogate_key": ({"\udc00": 1}, "invalid_utf8"),
    "nan": ({"x": float("nan")}, "not_json_safe"),
    "infinity": (float("inf"), "not_json_safe"),
    "negative_infinity": ([float("-inf")], "not_json_safe"),
    "too_deep": ({"x": nested(64)}, "too_deep"),
    "far_too_deep": (nested(100_000), "too_deep"),
    "object": ({"x": object()}, "not_json_safe"),
    "int_key": ({1: "x"}, "not_json_safe"),
}


@pytest.mark.parametrize("label", sorted(POISON_RESULTS))
def test_poison_tool_results_become_a_tool_error_and_the_turn_goes_on(sessions, label):
    value, why = POISON_RESULTS[label]

    @adk.tool
    def poison() -> Any:
        """Return poison."""
        return value

    stored, seen = tool_turn(sessions, poison, "poison")
    expected = {
        "success": False,
        "error": {"kind": "invalid_tool_result", "operation": "poison", "reason": why},
    }
    assert stored == expected and seen == expected


def test_the_deepest_accepted_result_passes_unchanged(sessions):
    @adk.tool
    def deep() -> dict:
        """Deep."""
        return {"x": nested(63)}

    stored, _ = tool_turn(sessions, deep, "deep")
    assert stored == {"x": nested(63)}


def test_a_callback_replacing_a_result_with_poison_is_checked_too(sessions):
    @adk.tool
    def fine() -> str:
        """Fine."""
        return "ok"

    model = adk.ScriptedProvider(
        [{"tool_calls": [{"name": "fine", "args": {}}]}, "done"], record_histories=10
    )
    agent = adk.spawn_agent(
        "Replaced",
        {
            "provider": model,
            "callbacks": {"after_tool": lambda ctx, payload: {"replace": {"x": float("nan")}}},
        },
        tools=[fine],
    )
    assert adk.Runner(agent, "app", sessions).run("u", "s", "go") == "done"
    seen = model.histories[1][-1].parts[0].response
    assert seen["error"]["kind"] == "invalid_tool_result"
    before = adk.spawn_agent(
        "Before",
        {
            "provider": adk.ScriptedProvider(
                [{"tool_calls": [{"name": "fine", "args": {}}]}, "done"]
            ),
            "callbacks": {"before_tool": lambda ctx, call: {"replace": {"x": "\ud800"}}},
        },
        tools=[fine],
    )
    assert adk.Runner(before, "app", sessions).run("u", "s2", "go") == "done"


def test_the_catalog_alone_refuses_poison_results():
    @adk.tool
    def poison() -> dict:
        """Poison."""
        return {"x": "\ud800"}

    response = ToolCatalog([poison]).call(
        content.function_call("poison", {}, id="c"), ToolContext()
    )
    assert response.response["error"]["kind"] == "invalid_tool_result"
    content.validate(Content("tool", (response,)))  # what it returns is valid content


@pytest.mark.parametrize("shape", ["list", "dict"])
def test_a_result_that_contains_itself_is_refused_not_walked_forever(shape):
    """Review finding: a self-containing value with a non-JSON item in it made the
    change finder loop (and grow) forever."""
    if shape == "list":
        loop: Any = [object()]
        loop.append(loop)
    else:
        loop = {"x": object()}
        loop["y"] = loop

    @adk.tool
    def cyclic() -> dict:
        """Returns a value that contains itself."""
        return {"result": loop}

    response = ToolCatalog([cyclic]).call(
        content.function_call("cyclic", {}, id="c"), ToolContext()
    )
    assert response.response["error"]["kind"] == "invalid_tool_result"


class _DeepCaller:
    """A provider whose tool call's arguments nest past the bound (a provider that does not
    validate what it returns)."""

    name = "deep_caller"

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.seen: list[Any] = []

    def generate(self, config: Any, history: Any, tools: Any) -> Any:
        if history[-1].role == "tool":
            self.seen.append(history[-1].parts[0].response)
            return "done"
        call = FunctionCallPart("echo", {"x": nested(self.depth)}, "c1")
        return ToolCalls((call,), Content("model", (call,)))

    def stream(self, config: Any, history: Any, tools: Any, on_delta: Any) -> Any:
        return self.generate(config, history, tools)


@pytest.mark.parametrize("depth", [64, 500])
def test_model_arguments_nested_past_the_bound_are_a_tool_error(depth):
    ran = []

    class Echo(adk.Tool):
        name = "echo"
        description = "Echo."
        parameters = {
            "$ref": "#/$defs/any",
            "$defs": {
                "any": {
                    "anyOf": [
                        {"type": "array", "items": {"$ref": "#/$defs/any"}},
                        {"type": "object", "additionalProperties": {"$ref": "#/$defs/any"}},
                        {"type": "integer"},
                    ]
                }
            },
        }

        def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
            ran.append(args)
            return "ran"

    provider = _DeepCaller(depth)
    agent = adk.spawn_agent("Deep", {"provider": provider}, tools=[Echo()])
    assert adk.prompt(agent, "go") == "done"
    assert ran == []
    error = provider.seen[0]["error"]
    assert error["type"] == "invalid_tool_arguments"
    assert error["validation"] == {"kind": "too_deep", "path": [], "constraint": "max_depth"}


def test_the_catalog_refuses_arguments_that_are_not_json():
    @adk.tool
    def echo(x: Any) -> Any:
        """Echo."""
        return x

    catalog = ToolCatalog([echo])
    for args, kind in (
        ({"x": nested(64)}, "too_deep"),
        ({"x": nested(100_000)}, "too_deep"),
        ({"x": float("nan")}, "not_json"),
        ({"x": "\ud800"}, "invalid_utf8"),
    ):
        refusal = catalog.check_arguments("echo", args)
        assert refusal is not None and refusal["error"]["validation"]["kind"] == kind
    assert catalog.check_arguments("echo", {"x": nested(63)}) is None


# -- 2. exceptions contribute their class name, never their text ----------------------------


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError(SECRET),
        SystemExit(SECRET),
        adk.AdkError(f"free text with {SECRET}"),
        adk.AdkError((SECRET, 1)),
    ],
    ids=["runtime_error", "system_exit", "adk_error_text", "adk_error_tuple"],
)
def test_a_raising_tool_contributes_only_its_class(sessions, error, caplog):
    @adk.tool
    def boom() -> str:
        """Boom."""
        raise error

    stored, seen = tool_turn(sessions, boom, "boom")
    assert (
        stored
        == seen
        == {
            "success": False,
            "error": {
                "component": "tool",
                "operation": "boom",
                "class": type(error).__name__,
                "reason": "tool_failed",
            },
        }
    )
    assert SECRET not in str(sessions.get_session("app", "u", "s").events)
    assert SECRET not in caplog.text


def test_a_tools_own_stable_reason_is_kept():
    @adk.tool
    def refuses() -> str:
        """Refuses."""
        raise adk.AdkError("quota_exceeded", f"for key {SECRET}")

    response = ToolCatalog([refuses]).call(content.function_call("refuses", {}), ToolContext())
    assert response.response["error"]["reason"] == "quota_exceeded"
    assert SECRET not in str(response)


def test_keyboard_interrupt_is_not_swallowed():
    @adk.tool
    def interrupted() -> str:
        """Interrupted."""
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ToolCatalog([interrupted]).call(content.function_call("interrupted", {}), ToolContext())


def test_a_raising_provider_contributes_only_its_class_to_prompt():
    def model(history, tools):
        raise RuntimeError(SECRET)

    agent = adk.spawn_agent("Crashy", {"provider": adk.ScriptedProvider(fn=model)})
    with pytest.raises(adk.AdkError) as info:
        adk.prompt(agent, "hi")
    assert SECRET not in str(info.value.reason) and SECRET not in str(info.value)
    assert info.value.reason == ("turn_worker_exit", "RuntimeError")


# -- 4/5. schemas: mistyped, remote references ---------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        body = b'{"type": "object"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    _Recorder.requests = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.requests
    server.shutdown()
    server.server_close()
    thread.join(5)


def remote_schemas(base: str) -> list[Any]:
    return [
        {"$ref": f"{base}/schema.json"},
        {"type": "object", "properties": {"a": {"$ref": f"{base}/a.json#/x"}}},
        {"$id": f"{base}/root.json", "properties": {"a": {"$ref": "other.json"}}},
        {"$ref": "file:///etc/passwd"},
        {"$ref": "relative.json"},
        {"allOf": [{"$ref": f"{base}/all.json"}]},
    ]


def test_remote_references_are_refused_without_a_request(schema_server):
    base, requests = schema_server
    for schema in remote_schemas(base):

        class Remote(adk.Tool):
            name = "remote"
            parameters = schema

        with pytest.raises(adk.AdkError) as info:
            ToolCatalog([Remote()])
        assert info.value.reason == ("invalid_schema", "remote_ref", "remote")
        for key in ("input_schema", "output_schema"):
            with pytest.raises(adk.AdkError) as info:
                adk.spawn_agent("Contract", {"provider": adk.ScriptedProvider(["{}"]), key: schema})
            assert info.value.reason == ("invalid_schema", "remote_ref", key)

    class UnderRemoteId(adk.Tool):  # a local ref under a remote base: never resolved
        name = "remote"
        parameters = {"properties": {"a": {"$id": f"{base}/sub/", "$ref": "#/x"}}}

    with pytest.raises(adk.AdkError) as info:
        ToolCatalog([UnderRemoteId()])
    assert info.value.reason == ("invalid_tool_schema", "remote")
    assert requests == []


def test_local_references_still_compile():
    class Local(adk.Tool):
        name = "local"
        parameters = {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/a"}},
            "$defs": {"a": {"type": "string"}},
        }

    catalog = ToolCatalog([Local()])
    assert catalog.check_arguments("local", {"a": "x"}) is None
    assert catalog.check_arguments("local", {"a": 1}) is not None


@pytest.mark.parametrize(
    "schema", [5, "object", ["type"], b"{}", {"type": 5}, {"properties": []}, nested(5_000, {})]
)
def test_mistyped_schemas_are_adk_errors(schema):
    for key in ("input_schema", "output_schema"):
        with pytest.raises(adk.AdkError) as info:
            adk.spawn_agent("Typed", {"provider": adk.ScriptedProvider(["x"]), key: schema})
        assert info.value.reason == (f"invalid_{key}",)

    class Mistyped(adk.Tool):
        name = "mistyped"
        parameters = schema

    with pytest.raises(adk.AdkError) as info:
        ToolCatalog([Mistyped()])
    assert info.value.reason == ("invalid_tool_schema", "mistyped")


@pytest.mark.parametrize(
    "declaration",
    [5, None, {"name": "t", "description": 5}, {"name": 5}, {"name": "t", "parameters": "x"}],
)
def test_mistyped_declarations_are_adk_errors(declaration):
    class Odd(adk.Tool):
        name = "t"

        def schema(self) -> Any:
            return declaration

    with pytest.raises(adk.AdkError) as info:
        ToolCatalog([Odd()])
    assert info.value.reason[0] in ("invalid_tool_schema", "invalid_tool_name")


def test_contracts_refuse_deep_or_non_json_text():
    for answer in ("[" * 100_000 + "]" * 100_000, "NaN", "[Infinity]", str(nested(65))):
        agent = adk.spawn_agent(
            "Contracted",
            {"provider": adk.ScriptedProvider([answer]), "output_schema": {"type": "array"}},
        )
        with pytest.raises(adk.AdkError) as info:
            adk.prompt(agent, "go")
        assert info.value.reason[0] == "invalid_output"
        adk.stop_agent(agent)


# -- 4. session query cursors of the wrong type ---------------------------------------------


@pytest.mark.parametrize("cursor", [b"abc.def", 5, 1.5, ["x"], {"a": 1}, "\ud800.x", "a.b.c", ""])
def test_mistyped_cursors_are_invalid_cursor(sessions, cursor):
    sessions.create_session("app", "u", session_id="s1")
    sessions.add_event("app", "u", "s1", adk.Event.new("user", "i", content.from_text("hi")))
    for query in (
        lambda: sessions.query_sessions("app", "u", cursor=cursor),
        lambda: sessions.query_events("app", "u", "s1", cursor=cursor),
    ):
        with pytest.raises(adk.AdkError) as info:
            query()
        assert info.value.reason == "invalid_cursor"


def test_mistyped_page_sizes_and_authors_are_adk_errors(sessions):
    sessions.create_session("app", "u", session_id="s1")
    for limit in (None, "5", 0, 501, True, 2.0):
        with pytest.raises(adk.AdkError) as info:
            sessions.query_events("app", "u", "s1", limit=limit)
        assert info.value.reason == "invalid_limit"
    for author in (5, b"user", ["user"]):
        with pytest.raises(adk.AdkError) as info:
            sessions.query_events("app", "u", "s1", author=author)
        assert info.value.reason == "invalid_author"


def test_nothing_poisoned_is_ever_json_invalid(sessions):
    """Everything stored above encodes: spot-check one session's events round trip."""

    @adk.tool
    def poison() -> dict:
        """Poison."""
        return {"x": float("nan"), "y": "\ud800"}

    tool_turn(sessions, poison, "poison")
    for event in sessions.get_session("app", "u", "s").events:
        msgspec.json.decode(adk.events.encode(event))
