"""What the CLI prints is redacted and inert on a terminal, in both output modes.

Credential-named keys (a state delta written through ``output_key``, a daemon's
answer) show ``[redacted]``, and credential-shaped strings (a message, a server's
text) are redacted; model and server text loses its terminal control sequences, and
rich markup in it prints as written.
"""

from __future__ import annotations

import json
import re

from adk_actors.cli.sanitize import escape_json_controls, markup, terminal_text
from tests.cli.conftest import DEV_TOKEN, base_env, json_lines, run_adk

SECRET = "hunter2-value-99"
MESSAGE = f"my password: {SECRET}"
HOSTILE_TEXT = "Done \x1b]52;c;ZXZpbA==\x07 [red]x[/red] \x9b31m\r\x1b[2K ok"
SHOWN_TEXT = "Done  [red]x[/red]  ok"
# ESC, BEL, CR, DEL and the C1 controls: none of them may reach a terminal raw
RAW_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def keyed_config(write_config, text="plain answer"):
    """A scripted agent whose answer is stored under a credential-named state key."""
    return write_config(
        {
            "name": "Keyed",
            "provider": "scripted",
            "output_key": "session_token",
            "script": [{"text": text}],
            "script_repeat": True,
        }
    )


def _http_json(body: dict) -> bytes:
    data = json.dumps(body).encode()
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n%s" % (len(data), data)
    )


# -- redaction ------------------------------------------------------------------------


def test_run_json_redacts_credential_keys_and_secret_values(write_config):
    path = keyed_config(write_config)
    done = run_adk("run", "--config", path, "-m", MESSAGE, "--json")
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    lines = json_lines(done.stdout)
    user_text = lines[0]["event"]["content"]["parts"][0]["text"]
    assert user_text == "my password: [redacted]"
    deltas = [
        line["event"]["actions"]["state_delta"]
        for line in lines
        if line["type"] == "event" and line["event"].get("actions", {}).get("state_delta")
    ]
    assert deltas == [{"session_token": "[redacted]"}]
    assert lines[-1]["outcome"] == "completed" and lines[-1]["text"] == "plain answer"


def test_console_inspect_redacts_in_both_modes(write_config):
    path = keyed_config(write_config)
    done = run_adk("console", "--config", path, "--json", stdin=f"{MESSAGE}\n/inspect\n")
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout
    [session] = [line for line in json_lines(done.stdout) if line["type"] == "session"]
    assert session["state"] == {"session_token": "[redacted]"}
    human = run_adk("console", "--config", path, stdin=f"{MESSAGE}\n/inspect\n")
    assert human.returncode == 0, human.stderr
    assert SECRET not in human.stdout
    assert "session_token" in human.stdout and "[redacted]" in human.stdout


def test_inspect_redacts_the_daemons_answer_in_both_modes(raw_http):
    answer = {
        "id": "s",
        "state": {"api_token": "leaked-remote-value", "note": "Bearer abcdefgh12345678"},
        "events": [{"author": "model", "text": "password: leaked-event-value"}],
    }
    env = base_env(ADK_DEV_TOKEN=DEV_TOKEN)
    leaks = ("leaked-remote-value", "abcdefgh12345678", "leaked-event-value")
    for mode in (("--json",), ()):
        server = raw_http(_http_json(answer))
        done = run_adk("inspect", "session", "a", "u", "s", "--url", server.url, *mode, env=env)
        assert done.returncode == 0, done.stderr
        assert not any(leak in done.stdout for leak in leaks), done.stdout
        assert "api_token" in done.stdout and "[redacted]" in done.stdout


# -- terminal control sequences and markup --------------------------------------------


def test_run_prints_model_text_without_control_sequences_and_markup_as_written(write_config):
    path = write_config(
        {"name": "Hostile", "provider": "scripted", "script": [{"text": HOSTILE_TEXT}]}
    )
    done = run_adk("run", "--config", path, "-m", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout == SHOWN_TEXT + "\n"
    assert not RAW_CONTROLS.search(done.stderr)


def test_json_lines_keep_the_text_but_escape_every_control(write_config):
    path = write_config(
        {"name": "Hostile", "provider": "scripted", "script": [{"text": HOSTILE_TEXT}]}
    )
    done = run_adk("run", "--config", path, "-m", "hi", "--json")
    assert done.returncode == 0, done.stderr
    assert not RAW_CONTROLS.search(done.stdout)
    assert json_lines(done.stdout)[-1]["text"] == HOSTILE_TEXT


def test_console_inspect_shows_event_text_without_control_sequences(write_config):
    path = write_config(
        {"name": "Hostile", "provider": "scripted", "script": [{"text": HOSTILE_TEXT}]}
    )
    done = run_adk("console", "--config", path, stdin="hi\n/inspect\n")
    assert done.returncode == 0, done.stderr
    assert not RAW_CONTROLS.search(done.stdout)
    assert done.stdout.count(SHOWN_TEXT) == 2  # the answer, then its row in /inspect


def test_inspect_shows_server_text_without_control_sequences(raw_http):
    answer = {
        "id": "s\x1b[2J",
        "state": {
            "mode\x9b": "[bold red]boom[/] \x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\"
        },
        "events": [{"author": "model\x07", "text": "[red]x[/red]\x1b[1A\r"}],
    }
    server = raw_http(_http_json(answer))
    env = base_env(ADK_DEV_TOKEN=DEV_TOKEN)
    done = run_adk("inspect", "session", "a", "u", "s", "--url", server.url, env=env)
    assert done.returncode == 0, done.stderr
    assert not RAW_CONTROLS.search(done.stdout)
    assert "[bold red]boom[/] link" in done.stdout and "[red]x[/red]" in done.stdout


def test_a_server_error_message_is_shown_without_control_sequences(raw_http):
    body = json.dumps({"error": {"code": "run_not_found", "message": "no\x1b]52;c;eA==\x07 run"}})
    server = raw_http(
        b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n%s" % (len(body), body.encode())
    )
    env = base_env(ADK_DEV_TOKEN=DEV_TOKEN)
    done = run_adk("inspect", "run", "run-x", "--url", server.url, env=env)
    assert done.returncode == 1
    assert not RAW_CONTROLS.search(done.stderr)
    assert "no run" in done.stderr


# -- the helpers ----------------------------------------------------------------------


def test_terminal_text_removes_sequences_and_controls_but_keeps_text():
    cases = {
        "plain, café, 日本": "plain, café, 日本",
        "a\x1b[31mred\x1b[0m b": "ared b",
        "x\x1b]52;c;ZXZpbA==\x07y": "xy",
        "x\x1b]8;;http://e\x1b\\link\x1b]8;;\x1b\\y": "xlinky",
        "c1\x9b31mz": "c1z",
        "osc\x9d0;title\x9cq": "oscq",
        "dcs\x1bPq#0\x1b\\z": "dcsz",
        "bell\x07 cr\r\nline\ttab": "bell cr\nline\ttab",
        "unterminated \x1b]52;c;abc": "unterminated 52;c;abc",
        "del\x7f, esc at the end\x1b": "del, esc at the end",
        "[red]x[/red]": "[red]x[/red]",
    }
    for text, expected in cases.items():
        assert terminal_text(text) == expected, repr(text)


def test_markup_prints_rich_markup_literally():
    from io import StringIO

    from rich.console import Console

    buffer = StringIO()
    Console(file=buffer, highlight=False).print(
        markup("[red]x[/red] [link=http://e]y[/link]\x1b[1A")
    )
    assert buffer.getvalue() == "[red]x[/red] [link=http://e]y[/link]\n"


def test_escaped_json_decodes_to_the_same_value():
    value = {"text": "\x9b\x1b\x7f café"}
    line = escape_json_controls(json.dumps(value, ensure_ascii=False))
    assert not RAW_CONTROLS.search(line) and "café" in line
    assert json.loads(line) == value
