"""Session and event rules taken from the reference implementation's tests (erlang_adk
0.7.0), on both services (memory and LMDB, real files in a temp directory)."""

from __future__ import annotations

import threading

import pytest

import adk_actors as adk
from adk_actors import events
from adk_actors.events import Event, EventActions, EventError, Pause
from providers import content
from providers.content import Content, FunctionCallPart, TextPart
from providers.errors import is_secret_key


@pytest.fixture(params=["memory", "lmdb"])
def sessions(request, tmp_path):
    if request.param == "memory":
        service = adk.sessions.InMemorySessionService()
    else:
        service = adk.sessions.LmdbSessionService(tmp_path / "sessions")
    yield service
    service.close()


def reason(fn):
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value.reason


def text_event(text="hi", author="user", **fields):
    return Event.new(author, "inv-1", content.from_text(text), **fields)


def has_secret_key(value):
    if isinstance(value, dict):
        return any(is_secret_key(k) or has_secret_key(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_secret_key(item) for item in value)
    return False


# -- 1. queries never show credentials ---------------------------------------------------------


def test_query_results_drop_credential_keys(sessions):
    """Follows erlang_adk test/sessions/adk_session_query_test.erl:
    filtered_events_and_state_are_json_safe (query state and tool events carry no
    credential-named key; the stored session keeps them)."""
    sessions.create_session(
        "app",
        "u",
        "safe-query",
        {
            "topic": "otp",
            "access_token": "hidden",
            "client-secret": "hidden",
            "user:api_key": "hidden",
            "profile": {"name": "Ada", "password": "hidden"},
        },
    )
    call = content.new(
        [content.function_call("oauth", {"scope": "mail", "auth": {"refresh_token": "r"}})],
        role="model",
    )
    answer = content.new(
        [content.function_response("oauth", {"access_token": "t", "value": 42})], role="tool"
    )
    for event in (
        text_event("hello"),
        Event.new("agent", "inv-1", call),
        Event.new(
            "tool",
            "inv-1",
            answer,
            actions=EventActions(state_delta={"temp:bearer": "b", "count": 1}),
            provider_metadata={"provider": "p", "metadata": {"promptTokenCount": 3}},
        ),
        text_event("done", author="agent", is_final=True),
    ):
        sessions.add_event("app", "u", "safe-query", event)

    (session,) = sessions.query_sessions("app", "u").sessions
    assert session.state == {"topic": "otp", "profile": {"name": "Ada"}, "count": 1}
    (tool,) = sessions.query_events("app", "u", "safe-query", author="tool").events
    assert tool.content.parts[0].response == {"value": 42}
    assert tool.actions.state_delta == {"count": 1}
    assert tool.provider_metadata == {"provider": "p", "metadata": {"promptTokenCount": 3}}
    shown = sessions.query_events("app", "u", "safe-query").events
    assert shown[1].content.parts[0].args == {"scope": "mail", "auth": {}}
    assert not any(has_secret_key(events.to_dict(event)) for event in shown)
    assert [event.text() for event in shown][::3] == ["hello", "done"]

    stored = sessions.get_session("app", "u", "safe-query")  # nothing stored changed
    assert stored.state["access_token"] == "hidden" and stored.state["user:api_key"] == "hidden"
    # events are redacted when made (Event.new): the value never reached the store
    assert stored.events[2].content.parts[0].response["access_token"] == "[redacted]"
    assert stored.events[1].content.parts[0].args["auth"] == {"refresh_token": "[redacted]"}


def test_event_without_secrets_covers_actions_and_keeps_clean_events():
    """Follows erlang_adk test/sessions/adk_session_query_test.erl:
    filtered_events_and_state_are_json_safe (the reference prunes an event's content and
    its whole actions map; here every free-form part of `EventActions`)."""
    event = text_event(
        actions=EventActions(
            pause=Pause(reason="r", continuation_id="c", details={"type": "x", "token": "t"}),
            long_running_operation={"operation_id": "op", "metadata": {"api_key": "k"}},
            requested_tool_confirmations={"c1": {"hint": "ok", "password": "p"}},
            resume={"continuation_id": "c", "credentials": "x"},
        )
    )
    shown = events.without_secrets(event).actions
    assert shown.pause.details == {"type": "x"}
    assert shown.long_running_operation == {"operation_id": "op", "metadata": {}}
    assert shown.requested_tool_confirmations == {"c1": {"hint": "ok"}}
    assert shown.resume == {"continuation_id": "c"}
    assert event.actions.pause.details["token"] == "t"  # the event itself is unchanged
    clean = text_event(actions=EventActions(state_delta={"topic": "otp"}))
    assert events.without_secrets(clean) is clean


# -- 2. lone surrogates are a typed invalid_utf8 ------------------------------------------------

BAD = "bad \ud800 text"


def _function_call_content(args):
    return Content("model", (FunctionCallPart("lookup", args),))


SURROGATE_EVENTS = {
    "content-text": lambda: Event.new("user", "inv", Content("user", (TextPart(BAD),))),
    "call-arg-value": lambda: Event.new("a", "inv", _function_call_content({"q": BAD})),
    "call-arg-key": lambda: Event.new("a", "inv", _function_call_content({BAD: 1})),
    "state-value": lambda: text_event(actions=EventActions(state_delta={"k": BAD})),
    "state-key": lambda: text_event(actions=EventActions(state_delta={BAD: 1})),
    "author": lambda: text_event(author=BAD),
    "invocation-id": lambda: Event.new("user", BAD, content.from_text("x")),
    "branch": lambda: text_event(branch=BAD),
    "error-message": lambda: text_event(error=EventError(reason="x", message=BAD)),
    "pause-hint": lambda: text_event(
        actions=EventActions(pause=Pause(reason="r", continuation_id="c", hint=BAD))
    ),
    "provider-metadata": lambda: text_event(provider_metadata={"metadata": {"q": BAD}}),
}


@pytest.mark.parametrize("field", sorted(SURROGATE_EVENTS))
def test_invalid_utf8_in_an_event_is_typed_and_stores_nothing(sessions, field):
    """Follows erlang_adk test/core/adk_event_test.erl: invalid_utf8_is_rejected_before_jsx_test
    (invalid UTF-8 anywhere in an event is ``invalid_utf8`` before any encoder runs, and
    the session is unchanged)."""
    sessions.create_session("app", "u", "s", {"kept": 1})
    bad = SURROGATE_EVENTS[field]()
    assert reason(lambda: sessions.add_event("app", "u", "s", bad)) == "invalid_utf8"
    assert reason(lambda: sessions.add_event_if_state("app", "u", "s", bad, {})) == "invalid_utf8"
    assert reason(lambda: events.encode(bad)) == "invalid_utf8"
    session = sessions.get_session("app", "u", "s")
    assert session.events == () and session.state == {"kept": 1}


def test_invalid_utf8_in_state_ids_and_deltas_is_typed(sessions):
    """Follows erlang_adk test/core/adk_event_test.erl: invalid_utf8_is_rejected_before_jsx_test
    (the same rule for state written without an event, runtime deltas, ids and keys)."""
    sessions.create_session("app", "u", "s", {"kept": 1})
    assert reason(lambda: sessions.update_state("app", "u", "s", {"k": BAD})) == "invalid_utf8"
    assert reason(lambda: sessions.update_state("app", "u", "s", {"user:" + BAD: 1})) == (
        "invalid_utf8"
    )
    assert reason(lambda: sessions.create_session("app", "u", "new", {"k": [BAD]})) == (
        "invalid_utf8"
    )
    assert reason(lambda: sessions.create_session("app", "u", BAD)) == "invalid_utf8"
    assert reason(lambda: sessions.create_session(BAD, "u")) == "invalid_utf8"
    runtime = {"_adk:paused:inv": {"note": BAD}}
    assert (
        reason(lambda: sessions.add_event("app", "u", "s", text_event(), runtime_delta=runtime))
        == "invalid_utf8"
    )
    assert reason(lambda: sessions.take_state("app", "u", "s", "key" + BAD)) == "invalid_utf8"
    summary = Event.new("agent", "c", Content("model", (TextPart(BAD),)))
    first = sessions.add_event("app", "u", "s", text_event("one"))
    assert reason(lambda: sessions.compact_events("app", "u", "s", [first.id], summary)) == (
        "invalid_utf8"
    )
    session = sessions.get_session("app", "u", "s", include_internal=True)
    assert session.state == {"kept": 1} and [e.text() for e in session.events] == ["one"]
    assert [s.id for s in sessions.list_sessions("app", "u")] == ["s"]


# -- 4. take_state ---------------------------------------------------------------------------


def test_take_state_is_atomic(sessions):
    """Follows erlang_adk test/sessions/adk_state_scoping_test.erl: test_take_state_is_atomic
    and test/sessions/erlang_adk_session_mnesia_test.erl: test_atomic_take_state (of 20
    racing takes exactly one gets the value, the rest ``not_found``; the key is gone)."""
    sessions.create_session("app", "u", "s", {"temp:claim": "claimed", "other": 1})
    barrier = threading.Barrier(20)
    results = []

    def take():
        barrier.wait()
        try:
            results.append(sessions.take_state("app", "u", "s", "temp:claim"))
        except adk.AdkError as error:
            results.append(error.reason)

    threads = [threading.Thread(target=take) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results.count("claimed") == 1
    assert results.count("not_found") == 19
    assert sessions.get_session("app", "u", "s").state == {"other": 1}


def test_take_state_scopes_defaults_and_missing_sessions(sessions):
    """Follows erlang_adk src/sessions/erlang_adk_session.erl take_state/4 as exercised by
    test/sessions/adk_state_scoping_test.erl: test_take_state_is_atomic (a missing
    session or key is ``not_found``; ``user:``/``app:`` keys are taken from their scope)."""
    sessions.create_session("app", "u", "s", {"user:name": "Ada", "app:v": "1", "none": None})
    sessions.create_session("app", "u", "t")
    assert sessions.take_state("app", "u", "s", "user:name") == "Ada"
    assert sessions.take_state("app", "u", "s", "app:v") == "1"
    assert sessions.take_state("app", "u", "s", "none") is None  # present, with value None
    assert sessions.get_session("app", "u", "t").state == {}  # gone from every scope
    assert reason(lambda: sessions.take_state("app", "u", "s", "none")) == "not_found"
    assert sessions.take_state("app", "u", "s", "none", default="fallback") == "fallback"
    assert reason(lambda: sessions.take_state("app", "u", "missing", "k", default=0)) == (
        "not_found"
    )
    assert reason(lambda: sessions.take_state("app", "u", "s", "")) == "invalid_state_key"
    # the runtime's own keys are not the caller's to take: a pause stays resumable
    paused = {"kind": "tool_confirmation"}
    sessions.add_event("app", "u", "s", text_event(), runtime_delta={"_adk:paused:i": paused})
    assert reason(lambda: sessions.take_state("app", "u", "s", "_adk:paused:i")) == (
        "invalid_state_key"
    )
    state = sessions.get_session("app", "u", "s", include_internal=True).state
    assert state == {"_adk:paused:i": paused}


# -- 5. provider metadata is strict JSON ------------------------------------------------------


def grounded(metadata):
    envelope = {"schema_version": 1, "provider": "gemini", "type": "grounding"}
    return text_event("answer", author="agent", provider_metadata={**envelope, **metadata})


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"metadata": {"tags": {"a", "b"}}}, "metadata_must_be_json"),
        ({"metadata": {1: "int key"}}, "metadata_must_be_json"),
        ({"metadata": {("a",): "tuple key"}}, "metadata_must_be_json"),
        ({"metadata": {"score": float("nan")}}, "metadata_must_be_json"),
        ({"metadata": {"raw": b"bytes"}}, "metadata_must_be_json"),
        ({"metadata": {"pid": object()}}, "invalid_metadata_json"),
    ],
    ids=["set", "int-key", "tuple-key", "nan", "bytes", "object"],
)
def test_provider_metadata_must_be_strict_json(sessions, metadata, expected):
    """Follows erlang_adk test/models/adk_provider_result_test.erl:
    reject_non_json_metadata_test (metadata that is JSON only after a change is
    ``metadata_must_be_json``; a value with none, ``invalid_metadata_json``)."""
    sessions.create_session("app", "u", "s")
    bad = grounded(metadata)
    assert reason(lambda: sessions.add_event("app", "u", "s", bad)) == expected
    assert reason(lambda: events.checked(bad)) == expected
    assert sessions.get_session("app", "u", "s").events == ()


def test_provider_metadata_shape_size_and_round_trip(sessions):
    """Follows erlang_adk test/models/adk_provider_result_test.erl:
    reject_oversize_metadata_test and round_trip_provider_result_test (256 KiB cap:
    ``{metadata_too_large, Size, Limit}``; valid metadata is stored as given)."""
    sessions.create_session("app", "u", "s")
    oversize = grounded(
        {"metadata": {"renderedContent": "x" * (events.event.MAX_PROVIDER_METADATA_BYTES)}}
    )
    error = reason(lambda: sessions.add_event("app", "u", "s", oversize))
    assert error[0] == "metadata_too_large" and error[2] == events.event.MAX_PROVIDER_METADATA_BYTES
    not_a_map = text_event(provider_metadata=["a", "list"])
    assert reason(lambda: sessions.add_event("app", "u", "s", not_a_map)) == (
        "metadata_must_be_map"
    )
    good = grounded({"metadata": {"webSearchQueries": ["erlang otp"], "chunks": [{"n": 1.5}]}})
    sessions.add_event("app", "u", "s", good)
    (stored,) = sessions.get_session("app", "u", "s").events
    assert stored == good and events.decode(events.checked(good)) == good


# -- 6. the runtime's keys are never user state ------------------------------------------------


def test_internal_runtime_keys_never_reach_user_state(sessions, tmp_path):
    """Follows erlang_adk test/sessions/adk_session_query_test.erl:
    head_branch_copies_only_safe_local_state (the runtime's own ``__adk_`` keys are not
    session state a caller works with); the runtime still reads them
    (``include_internal=True``) and they stay stored."""
    created = sessions.create_session("app", "u", "s", {"topic": "OTP"})
    paused = {"kind": "tool_confirmation", "history": ["..."]}
    runtime = {"_adk:open:inv": "token", "_adk:paused:inv-0": paused}
    sessions.add_event("app", "u", "s", text_event(), runtime_delta=runtime)
    updated = sessions.update_state("app", "u", "s", {"step": 1})
    user_views = [
        created.state,
        updated.state,
        sessions.get_session("app", "u", "s").state,
        sessions.list_sessions("app", "u")[0].state,
        sessions.query_sessions("app", "u").sessions[0].state,
        sessions.create_session("app", "u", "s").state,  # idempotent create returns it
    ]
    for state in user_views:
        assert not any(key.startswith("_adk:") for key in state)
    assert user_views[2] == {"topic": "OTP", "step": 1}
    runtime_view = sessions.get_session("app", "u", "s", include_internal=True).state
    assert runtime_view == {"topic": "OTP", "step": 1, **runtime}
    listed = sessions.list_sessions("app", "u", include_internal=True)[0].state
    assert listed == runtime_view
    # still stored, still what add_event_if_state compares against
    sessions.add_event_if_state(
        "app",
        "u",
        "s",
        text_event("claim"),
        {"_adk:paused:inv-0": paused},
        runtime_delta={"_adk:paused:inv-0": None},
    )
    assert sessions.get_session("app", "u", "s", include_internal=True).state == {
        "topic": "OTP",
        "step": 1,
        "_adk:open:inv": "token",
    }


# -- 7. an event's text says what a tool event holds --------------------------------------------


def test_text_of_tool_call_and_response_events():
    """Follows erlang_adk test/core/adk_event_test.erl: multiple_gemini_tool_calls_json_roundtrip_test
    and tool_response_json_roundtrip_test (tool events carry names, arguments and
    results); no reference test covers the text helper itself, so its form is ours."""
    call = Event.new(
        "Agent",
        "inv",
        content.new(
            [
                content.function_call("get_weather", {"city": "Tokyo", "api_key": "k"}),
                content.function_call("get_time", {}),
            ],
            role="model",
        ),
    )
    assert call.text() == "call get_weather(city='Tokyo'); call get_time()"
    answer = Event.new(
        "Agent",
        "inv",
        content.new(
            [content.function_response("get_weather", {"forecast": "sunny", "temp": 21})],
            role="tool",
        ),
    )
    assert answer.text() == "get_weather -> {'forecast': 'sunny', 'temp': 21}"
    huge = {f"k{n}": "x" * 1000 for n in range(900)}
    big = Event.new("A", "inv", content.new([content.function_response("dump", huge)], role="tool"))
    assert big.text().startswith("dump -> {'k0': 'xxx") and len(big.text()) <= 200
    assert big.text().endswith("...")
    mixed = Event.new(
        "A", "inv", content.new(["Let me check.", content.function_call("f")], role="model")
    )
    assert mixed.text() == "Let me check."  # visible text wins
    assert Event.new("A", "inv").text() == ""
    thought_only = Event.new("A", "inv", content.new([content.text("hmm", thought=True)]))
    assert thought_only.text() == ""


@pytest.mark.parametrize("backend", ["memory", "lmdb"])
def test_nobody_but_the_runtime_touches_its_own_keys(backend, tmp_path):
    """Review finding: `take_state` once returned (and consumed) a pause's continuation,
    and `update_state` could forge an open-invocation marker."""
    sessions = (
        adk.sessions.InMemorySessionService()
        if backend == "memory"
        else adk.sessions.LmdbSessionService(str(tmp_path / "db"))
    )
    sessions.create_session("app", "u", session_id="s")
    for attempt in (
        lambda: sessions.take_state("app", "u", "s", "_adk:paused:inv-1"),
        lambda: sessions.update_state("app", "u", "s", {"_adk:open:inv-1": "forged"}),
        lambda: sessions.create_session("app", "u", session_id="t", state={"_adk:x": 1}),
        lambda: sessions.add_event(
            "app",
            "u",
            "s",
            adk.Event.new("user", "inv", actions=adk.EventActions(state_delta={"_adk:x": 1})),
        ),
    ):
        with pytest.raises(adk.AdkError) as info:
            attempt()
        assert info.value.reason == "invalid_state_key"
    assert sessions.get_session("app", "u", "s", include_internal=True).state == {}
    sessions.close()
