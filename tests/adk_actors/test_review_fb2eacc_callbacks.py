"""Review of fb2eacc, finding 2: an agent-local ``before_model`` callback that scrubs
contents in place (``part.response.pop("ssn", None)``) met read-only stored history,
raised TypeError (logged and ignored), and the field reached the model from the
second turn on. The hook now gets a plain deep copy, as global plugins do, and what
it leaves is what the model sees; the stored history is unchanged."""

from __future__ import annotations

import pytest

import adk_actors as adk
from providers.content import FunctionResponsePart

SSN = "123-45-6789"


@adk.tool
def lookup_customer(name: str) -> dict:
    """Look up a customer."""
    return {"name": name, "ssn": SSN}


def scrub(ctx, contents):
    for c in contents:
        for p in c.parts:
            if isinstance(p, FunctionResponsePart):
                p.response.pop("ssn", None)
    return None


def call(who: str) -> dict:
    return {"tool_calls": [{"name": "lookup_customer", "args": {"name": who}}]}


@pytest.fixture(params=["memory", "lmdb"])
def sessions(request, tmp_path):
    if request.param == "memory":
        service = adk.sessions.InMemorySessionService()
    else:
        service = adk.sessions.LmdbSessionService(tmp_path / "sessions")
    yield service
    service.close()


def test_an_in_place_scrub_in_before_model_reaches_every_model_call(sessions):
    provider = adk.ScriptedProvider(
        [call("Ann"), "found Ann", call("Bob"), "found Bob"], record_histories=10
    )
    agent = adk.spawn_agent(
        "ScrubbedReview",
        {"provider": provider, "callbacks": {"before_model": scrub}},
        tools=[lookup_customer],
    )
    runner = adk.Runner(agent, "app", sessions)
    assert runner.run("u", "s", "find Ann") == "found Ann"
    assert runner.run("u", "s", "find Bob") == "found Bob"
    histories = provider.histories
    assert len(histories) == 4
    sent = [
        dict(p.response)
        for history in histories
        for c in history
        for p in c.parts
        if isinstance(p, FunctionResponsePart)
    ]
    assert sent and all("ssn" not in response for response in sent)
    assert {"name": "Bob"} in sent
    stored = [
        p.response
        for e in sessions.get_session("app", "u", "s").events
        if e.content is not None
        for p in e.content.parts
        if isinstance(p, FunctionResponsePart)
    ]
    assert [r["ssn"] for r in stored] == [SSN, SSN]  # the store keeps what the tool said
