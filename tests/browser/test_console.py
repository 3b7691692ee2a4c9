"""The console page in a real browser against a real daemon with a scripted agent.

Each test drives the page as a person would (type the token, send a message, press
the buttons) and checks what the page shows and what it sent.
"""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import expect

from tests.browser.conftest import (
    AGENT_NAME,
    APPROVAL_TOOL,
    EXPORT_TOOL,
    REPO_ROOT,
    TOKEN,
    Console,
    save_screenshot,
)
from tests.helpers import wait_until

ANSWER_CHUNKS = ["Supervisors ", "restart what fails ", "<b>safely</b>."]
ANSWER = "".join(ANSWER_CHUNKS)


def _agent_texts(console: Console):
    return console.page.locator("[data-testid=message][data-role=agent] [data-testid=message-text]")


def _send(console: Console, message: str) -> None:
    console.page.fill("#message", message)
    console.page.click("#send")


def _assert_numbered_once(console: Console) -> dict[str, list[int]]:
    """Every (run, seq) of the trace appears once, and each run's items are 1..n."""
    items = console.trace_items()
    pairs = [(run, seq) for run, seq, _ in items]
    assert len(pairs) == len(set(pairs)), pairs
    by_run: dict[str, list[int]] = {}
    for run, seq, _ in items:
        by_run.setdefault(run, []).append(int(seq))
    for run, seqs in by_run.items():
        assert seqs == list(range(1, len(seqs) + 1)), (run, seqs)
    return by_run


def test_token_agents_and_a_streamed_answer(open_console):
    """Enter the token, see the agent list, send a message, see the streamed answer and
    its trace; the stream closes at its bound of 2 items, and the page reconnects with
    Last-Event-ID until the terminal, showing every item once."""
    console = open_console(
        [{"stream": ANSWER_CHUNKS}],
        runner_options={"streaming_mode": "text"},
        env={"ADK_DEV_SSE_MAX_EVENTS": "2"},
    )
    page = console.page
    expect(page.locator("#token-state")).to_have_attribute("data-set", "false")
    console.use_token()
    expect(page.locator("#token-state")).to_have_attribute("data-set", "true")
    expect(page.locator("#token")).to_have_value("")
    agent = page.locator("[data-testid=agent-item]")
    expect(agent).to_have_count(1)
    expect(agent).to_have_text(AGENT_NAME)
    expect(page.locator("#agent")).to_have_value(AGENT_NAME)

    _send(console, "What do supervisors do?")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "completed")
    agent_messages = page.locator("[data-testid=message][data-role=agent]")
    expect(agent_messages.last.locator("[data-testid=message-text]")).to_have_text(ANSWER)
    expect(page.locator("[data-testid=message][data-role=user]")).to_have_text(
        ["userWhat do supervisors do?"]
    )
    # Server text is text: the answer's markup was not parsed into elements.
    assert page.locator("#transcript b").count() == 0

    by_run = _assert_numbered_once(console)
    assert len(by_run) == 1
    run_id, seqs = next(iter(by_run.items()))
    assert len(seqs) >= 3  # the user's message, the answer, the terminal
    assert page.locator("#run-id").input_value() == run_id
    kinds = [kind for _, _, kind in console.trace_items()]
    assert kinds[-1] == "terminal"
    assert any("partial" in kind for kind in kinds)
    final = page.locator("[data-testid=trace-row][data-author=ConsoleAgent]").last
    expect(final.locator("td.col-time")).to_have_text(re.compile(r"^\d\d:\d\d:\d\d\.\d{3}$"))

    events = console.events_requests()
    assert len(events) >= 2, "the 2-item bound should have closed the first stream"
    cursors = [request.headers.get("last-event-id") for request in events]
    assert cursors[0] is None
    assert cursors[1:] == [str(n) for n in range(2, 2 * len(events) - 1, 2)], cursors

    page.locator("[data-testid=trace-row]").nth(1).click()
    expect(page.locator("#trace-detail")).to_contain_text('"author": "user"')
    console.assert_clean()


def test_approve_a_paused_tool_call(open_console):
    """A tool call that needs approval pauses the run; the pause survives a reload, and
    approving it resumes a new run that executes the tool and completes."""
    console = open_console(
        [
            {"tool_calls": [{"name": "publish_release", "args": {"version": "1.0"}}]},
            {"text": "Released 1.0."},
        ],
        tools=(APPROVAL_TOOL,),
    )
    page = console.page
    console.use_token()
    _send(console, "Release 1.0, please.")

    approval = page.locator("#approval")
    expect(approval).to_be_visible()
    expect(page.locator("#run-state")).to_have_attribute("data-state", "paused")
    expect(page.locator("#approval-summary")).to_contain_text("publish_release")
    expect(page.locator("#approval-details")).to_contain_text('"version": "1.0"')
    paused_run = page.locator("#run-id").input_value()

    # A reload keeps the pause (not the token): the decision can still be made.
    page.reload()
    page.wait_for_selector("body[data-ready='true']")
    expect(approval).to_be_visible()
    expect(page.locator("#run-state")).to_have_attribute("data-state", "paused")
    console.use_token()
    expect(page.locator("#status")).to_have_text("Ready.")

    page.click("#approve")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "completed")
    expect(approval).to_be_hidden()
    expect(
        page.locator("[data-testid=message][data-role=agent] [data-testid=message-text]").last
    ).to_have_text("Released 1.0.")
    resumed_run = page.locator("#run-id").input_value()
    assert resumed_run != paused_run

    by_run = _assert_numbered_once(console)
    assert set(by_run) == {paused_run, resumed_run}
    trace_text = page.locator("#trace-body").inner_text()
    assert "pause: tool_confirmation (publish_release)" in trace_text
    assert 'publish_release → {"published":"1.0"}' in trace_text

    resume = [r for r in console.requests if r.url.endswith(f"/runs/{paused_run}/resume")]
    assert len(resume) == 1 and resume[0].method == "POST"
    assert resume[0].post_data_json == {"tool_response": {"confirmed": True}}
    console.assert_clean()


def test_reload_reconnects_with_last_event_id(open_console):
    """Reloading the page forgets the token but not the run: after the token is typed
    again, the page reconnects with Last-Event-ID and shows each item once."""
    console = open_console([{"text": "Finally.", "delay": 2.0}])
    page = console.page
    console.use_token()
    _send(console, "Say it slowly.")
    first = page.locator("[data-testid=trace-row][data-seq='1']")
    expect(first).to_have_count(1)
    run_id = page.locator("#run-id").input_value()

    page.reload()
    page.wait_for_selector("body[data-ready='true']")
    expect(page.locator("#token-state")).to_have_attribute("data-set", "false")
    expect(page.locator("#run-id")).to_have_value(run_id)
    expect(page.locator("[data-testid=trace-row][data-seq='1']")).to_have_count(1)
    before = len(console.events_requests())

    console.use_token()
    expect(page.locator("#run-state")).to_have_attribute("data-state", "completed")
    expect(
        page.locator("[data-testid=message][data-role=agent] [data-testid=message-text]")
    ).to_have_text(["Finally."])
    reconnect = console.events_requests()[before]
    assert reconnect.headers.get("last-event-id") == "1"
    by_run = _assert_numbered_once(console)
    assert by_run == {run_id: [1, 2, 3]}
    expect(page.locator("[data-testid=message][data-role=user]")).to_have_count(1)

    # The manual button: the run is over, so it says so and sends nothing.
    count = len(console.events_requests())
    page.click("#reconnect")
    expect(page.locator("#status")).to_contain_text("already finished")
    assert len(console.events_requests()) == count
    console.assert_clean()


def test_cancel_a_slow_run(open_console):
    """Cancel stops a run whose model is slow: the stream ends with its terminal."""
    console = open_console([{"text": "Too late.", "delay": 60.0}])
    page = console.page
    console.use_token()
    _send(console, "Take your time.")
    expect(page.locator("[data-testid=trace-row][data-seq='1']")).to_have_count(1)
    expect(page.locator("#cancel")).to_be_enabled()

    # The manual button reconnects to the running run from the last item seen.
    with page.expect_request(lambda request: request.url.endswith("/events")) as reconnected:
        page.click("#reconnect")
    assert reconnected.value.headers.get("last-event-id") == "1"
    expect(page.locator("#run-state")).to_have_attribute("data-state", "streaming")

    page.click("#cancel")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "cancelled")
    expect(page.locator("#cancel")).to_be_disabled()
    terminal = page.locator("[data-testid=trace-row][data-kind=terminal]")
    expect(terminal).to_contain_text("cancelled: developer_cancelled")
    assert "Too late." not in page.locator("#transcript").inner_text()
    cancels = [r for r in console.requests if r.method == "DELETE"]
    assert len(cancels) == 1
    _assert_numbered_once(console)
    console.assert_clean()


def test_session_browser_and_state_editor(open_console):
    """After a run, the session list shows its session; opening it shows its state and
    events; a state delta is applied, and a credential-named key is refused."""
    console = open_console([{"text": "Noted."}])
    page = console.page
    console.use_token()
    page.fill("#session", "notes-1")
    _send(console, "Remember this.")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "completed")

    page.click("#list-sessions")
    item = page.locator("[data-testid=session-item][data-session='notes-1']")
    expect(item).to_have_count(1)
    item.click()
    expect(page.locator("#session-view")).to_be_visible()
    expect(page.locator("#session-title")).to_have_text("console / developer / notes-1")
    expect(page.locator("[data-testid=session-event]")).to_have_count(2)
    expect(page.locator("[data-testid=session-event]").last).to_have_text("ConsoleAgent: Noted.")

    page.fill("#state-delta", '{"theme": "dark", "count": 2}')
    page.click("#apply-state")
    expect(page.locator("#sessions-note")).to_have_text("State updated: theme, count.")
    expect(page.locator("#session-state")).to_contain_text('"theme": "dark"')
    expect(page.locator("#session-state")).to_contain_text('"count": 2')

    page.fill("#state-delta", '{"api_key": "not-a-real-key"}')
    page.click("#apply-state")
    expect(page.locator("#sessions-note")).to_contain_text("forbidden_state_key")
    assert "not-a-real-key" not in page.locator("#session-state").inner_text()

    states = [r for r in console.requests if r.url.endswith("/notes-1/state")]
    assert [r.post_data_json for r in states] == [
        {"state_delta": {"theme": "dark", "count": 2}},
        {"state_delta": {"api_key": "not-a-real-key"}},
    ]
    console.assert_clean()


def test_a_wrong_token_is_refused_and_forgotten_on_request(open_console):
    """A wrong token is refused (403) on the page; Forget clears the page's copy."""
    console = open_console([{"text": "unused"}])
    page = console.page
    console.use_token("wrong-token-0123456789abcdef")
    expect(page.locator("#status")).to_contain_text("forbidden (403)")
    expect(page.locator("[data-testid=agent-item]")).to_have_count(0)
    page.click("#token-clear")
    expect(page.locator("#token-state")).to_have_attribute("data-set", "false")
    _send(console, "hello")
    expect(page.locator("#status")).to_contain_text("Enter the token first")
    assert TOKEN not in page.content()


def test_reject_a_paused_tool_call(open_console):
    """Rejecting sends ``confirmed: false``; the resumed run goes on without the tool."""
    console = open_console(
        [
            {"tool_calls": [{"name": "publish_release", "args": {"version": "2.0"}}]},
            {"text": "Not released."},
        ],
        tools=(APPROVAL_TOOL,),
    )
    page = console.page
    console.use_token()
    _send(console, "Release 2.0.")
    expect(page.locator("#approval")).to_be_visible()
    paused_run = page.locator("#run-id").input_value()
    page.click("#reject")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "completed")
    expect(
        page.locator("[data-testid=message][data-role=agent] [data-testid=message-text]").last
    ).to_have_text("Not released.")
    assert '{"published":"2.0"}' not in page.locator("#trace-body").inner_text()
    resume = [r for r in console.requests if r.url.endswith(f"/runs/{paused_run}/resume")]
    assert [r.post_data_json for r in resume] == [{"tool_response": {"confirmed": False}}]
    _assert_numbered_once(console)
    console.assert_clean()


def test_a_pause_that_is_not_a_tool_confirmation_cannot_be_answered(open_console):
    """A long-running pause shows in the approval panel, but its buttons stay disabled:
    the console sends only the typed ``{"confirmed": ...}`` decision, and only for a
    ``tool_confirmation`` pause."""
    console = open_console(
        [{"tool_calls": [{"name": "start_export", "args": {}}]}, {"text": "unused"}],
        tools=(EXPORT_TOOL,),
    )
    page = console.page
    console.use_token()
    _send(console, "Export everything.")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "paused")
    expect(page.locator("#approval")).to_be_visible()
    expect(page.locator("#approval-summary")).to_contain_text("long_running")
    expect(page.locator("#approval-summary")).to_contain_text("cannot answer")
    expect(page.locator("#approve")).to_be_disabled()
    expect(page.locator("#reject")).to_be_disabled()
    assert not [r for r in console.requests if r.url.endswith("/resume")]
    console.assert_clean()


def test_attach_to_a_run_past_its_replay_window(open_console):
    """Attaching by run id from the start of a run whose first items were evicted gets
    the API's 409 replay gap: the page says which items are gone, and Reconnect goes on
    from the oldest retained one."""
    console = open_console(
        [{"stream": ["one ", "two ", "three"]}],
        runner_options={"streaming_mode": "text"},
        env={"ADK_DEV_RUN_OPTIONS": '{"max_buffered_events": 1}'},
    )
    page = console.page
    with httpx.Client(
        base_url=console.daemon.url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=10.0
    ) as api:
        started = api.post(
            "/dev/v1/runs",
            json={
                "agent_name": AGENT_NAME,
                "app_name": "elsewhere",
                "user_id": "someone",
                "session_id": "s-1",
                "message": "Count.",
            },
        ).json()
        run_id = started["run_id"]
        status = wait_until(lambda: _finished(api, run_id))
    latest = status["latest_sequence"]
    assert status["oldest_available_sequence"] == latest > 1

    console.use_token()
    expect(page.locator("#status")).to_have_text("Ready.")
    page.fill("#run-id", run_id)
    page.click("#reconnect")
    gap = page.locator("[data-testid=trace-row][data-kind=gap]")
    expect(gap).to_have_count(1)
    expect(gap).to_contain_text(f"events 1 to {latest - 1} are gone")
    expect(page.locator("#status")).to_contain_text("Replay gap")

    with page.expect_request(lambda request: request.url.endswith("/events")) as resumed:
        page.click("#reconnect")
    assert resumed.value.headers.get("last-event-id") == str(latest - 1)
    expect(page.locator("#run-state")).to_have_attribute("data-state", "completed")
    seqs = [int(seq) for run, seq, _ in console.trace_items() if run == run_id]
    assert seqs == [latest, latest + 1]
    expect(
        page.locator("[data-testid=message][data-role=agent] [data-testid=message-text]")
    ).to_have_text(["one two three"])
    console.assert_clean()


def _finished(api: httpx.Client, run_id: str) -> dict | None:
    status = api.get(f"/dev/v1/runs/{run_id}").json()
    return status if status["state"] != "running" else None


def test_the_example_config_as_docs_daemon_md_describes_it(open_console):
    """The offline example (``examples/agent.scripted.json``): a streamed greeting, then
    a release that needs approval. Saves the suite's screenshot, ``.artifacts/console.png``."""
    console = open_console(config_file=REPO_ROOT / "examples" / "agent.scripted.json")
    page = console.page
    console.use_token()
    expect(page.locator("[data-testid=agent-item]")).to_have_text(["ScriptedAgent"])
    _send(console, "Hello!")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "completed")
    expect(_agent_texts(console)).to_have_text(["Hello! I am the offline scripted agent."])

    _send(console, "Publish the release.")
    expect(page.locator("#approval")).to_be_visible()
    expect(page.locator("#approval-summary")).to_contain_text("publish_release")
    page.click("#approve")
    expect(page.locator("#run-state")).to_have_attribute("data-state", "completed")
    expect(_agent_texts(console).last).to_have_text("Release 1.0.0 is published.")
    page.click("#list-sessions")
    expect(page.locator("[data-testid=session-item]")).to_have_count(1)
    page.locator("[data-testid=session-item]").click()
    expect(page.locator("#session-view")).to_be_visible()
    _assert_numbered_once(console)
    save_screenshot(page)
    console.assert_clean()
