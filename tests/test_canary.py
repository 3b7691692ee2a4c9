"""A canary: a unique secret put everywhere a credential can come from must come out
nowhere the runtime stores, returns or logs.

The canary is the API key (``GEMINI_API_KEY``, so every request carries it as
``x-goog-api-key``), tool arguments, the text of tool exceptions, provider error bodies
and response headers. Agents (`adk.prompt`), the Runner (in-memory and LMDB sessions)
and stable runs (`adk.runs`) run against the loopback fake Gemini server; then every
event, session, raw LMDB byte, log line (root logger at DEBUG, and structlog's own
event dicts), error and status is searched for it.

Exception text goes further than redaction: a tool or provider exception contributes
only its class name to what is stored or returned, so even a bare canary (no
``token=`` in front of it to recognise) must not appear there.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog
from structlog.testing import LogCapture

import adk_actors as adk
from providers.fake_gemini import FakeGemini, FakeResponse, RecordedRequest, candidate

MODEL = "gemini-3.1-flash-lite"


# -- fixtures -------------------------------------------------------------------------


@pytest.fixture
def canary(monkeypatch: pytest.MonkeyPatch) -> str:
    value = f"canary-{uuid.uuid4()}"
    monkeypatch.setenv("GEMINI_API_KEY", value)
    return value


class _Capture(LogCapture):
    """Keeps every structlog event dict and lets it go on to be rendered."""

    def __call__(self, logger: Any, method_name: str, event_dict: Any) -> Any:
        self.entries.append(dict(event_dict, log_level=method_name))
        return event_dict


@dataclass
class Logs:
    records: list[logging.LogRecord] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = []
        for record in self.records:
            out.append(record.getMessage())
            out.append(repr(record.args))
            if record.exc_info is not None or record.exc_text:
                out.append(logging.Formatter().format(record))
        return out


@pytest.fixture
def logs() -> Iterator[Logs]:
    """Every stdlib record at DEBUG on the root logger, and every structlog event dict."""
    captured = Logs()

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.records.append(record)

    handler = Keep(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    was_configured, old = structlog.is_configured(), structlog.get_config()
    capture = _Capture()
    structlog.configure(
        processors=[capture, structlog.processors.KeyValueRenderer()],
        logger_factory=structlog.stdlib.LoggerFactory(),
    )
    captured.events = capture.entries
    try:
        yield captured
    finally:
        structlog.reset_defaults()
        if was_configured:
            structlog.configure(**old)
        root.removeHandler(handler)
        root.setLevel(old_level)


@pytest.fixture
def app() -> Iterator[None]:
    adk.start()
    yield
    adk.stop()


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


# -- helpers --------------------------------------------------------------------------


def _texts(value: Any) -> list[str]:
    """Every way a value could be shown: str, repr, and JSON of its builtins."""
    shown = [str(value), repr(value)]
    try:
        shown.append(msgspec.json.encode(value, enc_hook=repr).decode())
    except (TypeError, msgspec.EncodeError, ValueError):
        pass
    if isinstance(value, BaseException):
        shown += [repr(value.args), repr(getattr(value, "reason", None))]
        shown.append(repr(getattr(value, "detail", None)))
    return shown


def assert_clean(secret: str, **things: Any) -> None:
    """No `thing` shows `secret` in any form; the message names every leak."""
    leaks = []
    for name, thing in things.items():
        for text in _texts(thing):
            if secret in text:
                at = text.index(secret)
                leaks.append(f"{name}: ...{text[max(0, at - 160) : at + 60]}...")
                break
    assert not leaks, "canary leaked:\n" + "\n".join(leaks)


def gemini(fake: FakeGemini) -> dict[str, Any]:
    """An agent config for the fake; the key comes from GEMINI_API_KEY (the canary)."""
    return {"provider": "gemini", "model": MODEL, "base_url": fake.base_url}


def tool_call(name: str, args: dict[str, Any]) -> FakeResponse:
    return FakeResponse.json(candidate([{"functionCall": {"name": name, "args": args}}]))


def echo_key_error(status: int, secret: str) -> FakeResponse:
    """A Google error whose body, status and headers all echo the key."""
    return FakeResponse.error(
        status,
        f"API key not valid: AIzaSyFAKE{secret[:8]}. key={secret} {secret}",
        secret,
        headers={"x-echo-key": secret, "Set-Cookie": f"sid={secret}; Path=/"},
    )


def leaky_tools(secret: str) -> list[Any]:
    """`lookup` raises with the canary behind a Bearer; `bare` raises the bare canary
    (only the class may leave); `halt` raises SystemExit with the bare canary."""

    @adk.tool
    def lookup(api_key: str, note: str) -> str:
        """Looks a thing up."""
        raise RuntimeError(f"upstream refused Authorization: Bearer {secret} for {api_key}")

    @adk.tool
    def bare(note: str) -> str:
        """Fails with a message nobody can recognise as a secret."""
        raise RuntimeError(f"{secret} {note}")

    @adk.tool
    def halt(note: str) -> str:
        """Raises SystemExit."""
        raise SystemExit(f"{secret} {note}")

    return [lookup, bare, halt]


def script_tool_round(fake: FakeGemini, secret: str, tool: str = "lookup") -> None:
    """The model calls `tool` with the canary in its arguments, then answers."""
    args = (
        {"api_key": secret, "note": f"token={secret}"}
        if tool == "lookup"
        else {"note": f"token={secret}"}
    )
    fake.enqueue(tool_call(tool, args))
    fake.reply_text("done")


def sent_the_key(fake: FakeGemini, secret: str) -> bool:
    return bool(fake.requests) and all(
        request.headers.get("x-goog-api-key") == secret for request in fake.requests
    )


def check_logs(secret: str, logs: Logs, *, expect_events: bool = True) -> None:
    assert logs.events or not expect_events, "no structlog event: the capture is not wired"
    assert_clean(
        secret,
        **{f"log line {i}": line for i, line in enumerate(logs.lines())},
        **{f"structlog event {i}": event for i, event in enumerate(logs.events)},
    )


# -- agents ---------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["lookup", "bare", "halt"])
def test_prompt_with_leaky_tool(
    app: None, fake: FakeGemini, canary: str, logs: Logs, tool: str
) -> None:
    agent = adk.spawn_agent("CanaryTools", gemini(fake), tools=leaky_tools(canary))
    script_tool_round(fake, canary, tool)
    answer = adk.prompt(agent, "look it up")
    assert answer == "done"
    assert sent_the_key(fake, canary)
    tool_response = fake.requests[1].body["contents"][-1]["parts"][0]["functionResponse"]
    assert_clean(canary, answer=answer, tool_response=tool_response)
    assert tool_response["response"]["error"]["class"] in ("RuntimeError", "SystemExit")
    assert_clean(canary, info=adk.agent_info(agent))
    check_logs(canary, logs)


@pytest.mark.parametrize("status", [400, 401, 403, 500, 503])
def test_prompt_with_provider_error_echoing_the_key(
    app: None, fake: FakeGemini, canary: str, logs: Logs, status: int
) -> None:
    agent = adk.spawn_agent("CanaryErrors", gemini(fake))
    fake.handler = lambda request: echo_key_error(status, canary)
    with pytest.raises(adk.AdkError) as info:
        adk.prompt(agent, "hello")
    assert sent_the_key(fake, canary)
    assert_clean(canary, error=info.value, info=adk.agent_info(agent))
    check_logs(canary, logs)


@pytest.mark.parametrize("form", ["bare", "keyed"])
@pytest.mark.parametrize("kind", [RuntimeError, SystemExit])
def test_provider_exceptions_leave_only_their_class(
    app: None, canary: str, logs: Logs, form: str, kind: type[BaseException]
) -> None:
    """A provider raising: its class may be named, its text never (a bare canary is not
    recognisable as a secret, so only leaving the text out keeps it in). Local log
    lines may keep redacted exception text, so they are checked for the keyed form."""
    text = canary if form == "bare" else f"api_key={canary}"

    def raising(history: Any, tools: Any) -> Any:
        raise kind(f"{text} in a provider")

    agent = adk.spawn_agent("CanaryProvider", {"provider": adk.ScriptedProvider(fn=raising)})
    with pytest.raises(adk.AdkError) as info:
        adk.prompt(agent, "hello")
    assert_clean(canary, error=info.value, info=adk.agent_info(agent))
    if form == "keyed":
        check_logs(canary, logs, expect_events=False)


# -- Runner and stable runs -----------------------------------------------------------


def sessions_of(kind: str, tmp_path: Path) -> Any:
    if kind == "memory":
        return adk.sessions.InMemorySessionService()
    return adk.sessions.LmdbSessionService(tmp_path / "sessions")


def lmdb_bytes(tmp_path: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted((tmp_path / "sessions").glob("*")))


def check_store(secret: str, kind: str, sessions: Any, tmp_path: Path, sid: str) -> None:
    session = sessions.get_session("canary", "u", sid)
    assert session is not None and session.events
    assert_clean(
        secret,
        **{f"event {i}": event for i, event in enumerate(session.events)},
        state=session.state,
    )
    if kind == "lmdb":
        raw = lmdb_bytes(tmp_path)
        assert raw, "no LMDB file was written"
        assert secret.encode() not in raw, "the canary is in the LMDB file"


@pytest.mark.parametrize("kind", ["memory", "lmdb"])
@pytest.mark.parametrize("tool", ["lookup", "bare", "halt"])
def test_runner_with_leaky_tool(
    app: None, fake: FakeGemini, canary: str, logs: Logs, tmp_path: Path, kind: str, tool: str
) -> None:
    sessions = sessions_of(kind, tmp_path)
    agent = adk.spawn_agent("CanaryRunner", gemini(fake), tools=leaky_tools(canary))
    runner = adk.Runner(agent, "canary", sessions)
    script_tool_round(fake, canary, tool)
    events = list(runner.run_async("u", "s1", "look it up"))
    assert sent_the_key(fake, canary)
    assert_clean(canary, **{f"streamed {i}": event for i, event in enumerate(events)})
    check_store(canary, kind, sessions, tmp_path, "s1")
    check_logs(canary, logs)
    if kind == "lmdb":
        sessions.close()


@pytest.mark.parametrize("kind", ["memory", "lmdb"])
@pytest.mark.parametrize("status", [400, 500])
def test_runner_with_provider_error(
    app: None, fake: FakeGemini, canary: str, logs: Logs, tmp_path: Path, kind: str, status: int
) -> None:
    sessions = sessions_of(kind, tmp_path)
    agent = adk.spawn_agent("CanaryRunnerErrors", gemini(fake))
    runner = adk.Runner(agent, "canary", sessions)
    fake.handler = lambda request: echo_key_error(status, canary)
    with pytest.raises(adk.AdkError) as info:
        runner.run("u", "s2", "hello")
    assert sent_the_key(fake, canary)
    assert_clean(canary, error=info.value)
    check_store(canary, kind, sessions, tmp_path, "s2")
    check_logs(canary, logs)
    if kind == "lmdb":
        sessions.close()


@pytest.mark.parametrize("kind", ["memory", "lmdb"])
def test_stable_runs(
    app: None, fake: FakeGemini, canary: str, logs: Logs, tmp_path: Path, kind: str
) -> None:
    sessions = sessions_of(kind, tmp_path)
    tools_agent = adk.spawn_agent("CanaryRuns", gemini(fake), tools=leaky_tools(canary))
    failing_agent = adk.spawn_agent("CanaryRunsErrors", gemini(fake))
    answers: list[FakeResponse] = [
        tool_call("lookup", {"api_key": canary, "note": f"token={canary}"}),
        FakeResponse.json(candidate([{"text": "done"}])),
    ]

    def answer(request: RecordedRequest) -> FakeResponse:
        return answers.pop(0) if answers else echo_key_error(500, canary)

    fake.handler = answer
    outcomes = {}
    for name, agent in (("tools", tools_agent), ("failing", failing_agent)):
        runner = adk.Runner(agent, "canary", sessions)
        run_id = adk.runs.start(runner, "u", f"run-{name}", "look it up")
        items = list(adk.runs.subscribe(run_id))
        outcome = adk.runs.wait(run_id, timeout=60)
        outcomes[name] = outcome
        assert_clean(
            canary,
            outcome=outcome,
            status=adk.runs.status(run_id),
            listed=adk.runs.list(),
            **{f"item {i}": item for i, item in enumerate(items)},
        )
        check_store(canary, kind, sessions, tmp_path, f"run-{name}")
    assert isinstance(outcomes["tools"], adk.Completed)
    assert not isinstance(outcomes["failing"], adk.Completed)
    assert sent_the_key(fake, canary)
    check_logs(canary, logs)
    if kind == "lmdb":
        sessions.close()


def test_the_canary_check_itself_finds_a_leak(canary: str) -> None:
    """The search is not vacuous: a canary anywhere in a value is found."""
    leaky: Callable[[], None] = lambda: assert_clean(canary, event={"a": [("b", canary)]})  # noqa: E731
    with pytest.raises(AssertionError, match="canary leaked"):
        leaky()
