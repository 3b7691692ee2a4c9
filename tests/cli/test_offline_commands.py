"""`adk doctor`, `adk config validate`, `adk run` and `adk console` as real subprocesses,
offline (the scripted model).

Follows adk_cli_test: doctor_redacts_environment_case, checked_config_validation_case,
checked_repository_examples_case, config_rejects_embedded_secret_case,
deterministic_run_case, deterministic_console_case.
"""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import base_env, json_lines, run_adk
from tests.config_file.conftest import write_probe_tools

SCRIPTED = "examples/agent.scripted.json"
PAUSING_SCRIPT = [
    {"tool_calls": [{"name": "publish_release", "args": {"version": "2.0.0"}}]},
    {"text": "Published 2.0.0."},
]


def pausing_config(write_config, name="PausingAgent"):
    return write_config(
        {
            "name": name,
            "provider": "scripted",
            "tools": ["examples.agent_tools:publish_release"],
            "script": PAUSING_SCRIPT,
        }
    )


# -- doctor ---------------------------------------------------------------------------


def test_doctor_reports_the_environment_without_its_secrets():
    """Follows adk_cli_test: doctor_redacts_environment_case."""
    api_secret = "cli-doctor-api-secret-61d9"
    dev_secret = "cli-doctor-dev-secret-43c7-long-enough"
    env = base_env(GEMINI_API_KEY=api_secret, ADK_DEV_TOKEN=dev_secret)
    done = run_adk("doctor", "--json", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "ok"
    assert report["gemini_api_key_configured"] is True
    assert report["developer_token_configured"] is True
    assert report["developer_token_length_ok"] is True
    assert report["dependencies"]["starlette"]["available"] is True
    assert set(report["data_dir"]) == {"path", "exists", "writable"}
    assert "found" in report["chromium"]
    human = run_adk("doctor", env=env)
    assert human.returncode == 0
    assert "adk doctor" in human.stdout
    for output in (done.stdout, done.stderr, human.stdout, human.stderr):
        assert api_secret not in output and dev_secret not in output


def test_doctor_warns_about_what_is_missing():
    done = run_adk("doctor", "--json", env=base_env(ADK_DEV_TOKEN="short"))
    report = json.loads(done.stdout)
    assert report["gemini_api_key_configured"] is False
    assert report["developer_token_length_ok"] is False
    assert any("scripted" in warning for warning in report["warnings"])


# -- config validate ------------------------------------------------------------------


def test_config_validate_accepts_the_checked_in_examples():
    """Follows adk_cli_test: checked_repository_examples_case."""
    done = run_adk("config", "validate", "examples/agent.json", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["status"], result["name"], result["model"], result["tool_count"]) == (
        "valid",
        "CliAgent",
        "gemini-3.1-flash-lite",
        0,
    )
    done = run_adk("config", "validate", SCRIPTED)
    assert done.returncode == 0 and "valid" in done.stdout and "publish_release" in done.stdout


@pytest.mark.parametrize(
    ("document", "code", "named"),
    [
        ({"name": "A", "unexpected_key": 1}, "unknown_agent_config_keys", "unexpected_key"),
        ({"tools": ["examples.agent_tools:nothing_here"]}, "unknown_tool", "nothing_here"),
        ({"tools": ["not a path"]}, "invalid_tool_path", "not a path"),
        ({"provider": "scripted"}, "missing_script", None),
    ],
)
def test_config_validate_refuses_a_bad_file_naming_the_problem(write_config, document, code, named):
    path = write_config(document)
    done = run_adk("config", "validate", path, "--json")
    assert done.returncode == 2 and done.stdout == ""
    error = json.loads(done.stderr)
    assert (error["status"], error["reason"]) == ("error", code)
    if named:
        assert named in json.dumps(error["details"])
    human = run_adk("config", "validate", path)
    assert human.returncode == 2 and f"error {code}" in human.stderr


def test_config_validate_refuses_a_secret_without_printing_it(write_config):
    """Follows adk_cli_test: config_rejects_embedded_secret_case."""
    secret = "must-never-enter-cli-output"
    path = write_config({"provider": "gemini", "api_key": secret})
    for args in (("--json",), ()):
        done = run_adk("config", "validate", path, *args)
        assert done.returncode == 2
        assert "secret_in_config_file" in done.stderr
        assert secret not in done.stdout + done.stderr


def test_config_validate_refuses_a_file_too_large(write_config):
    path = write_config('{"name": "Big"}' + " " * (1 << 20))
    done = run_adk("config", "validate", path, "--json")
    assert done.returncode == 2 and json.loads(done.stderr)["reason"] == "file_too_large"


def test_config_validate_of_a_missing_file(tmp_path):
    done = run_adk("config", "validate", str(tmp_path / "absent.json"), "--json")
    error = json.loads(done.stderr)
    assert done.returncode == 2
    assert (error["reason"], error["details"]) == ("file_read_failed", ["enoent"])


# -- run ------------------------------------------------------------------------------


def test_run_streams_the_answer_as_text():
    """Follows adk_cli_test: deterministic_run_case."""
    done = run_adk("run", "--config", SCRIPTED, "--message", "hello", "--session", "cli-session")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello! I am the offline scripted agent.\n"
    assert "completed (session cli-session)" in done.stderr


def test_run_json_prints_every_event_then_the_outcome_with_the_run_id():
    done = run_adk(
        "run",
        "--config",
        SCRIPTED,
        "-m",
        "hello",
        "--user",
        "cli-user",
        "--session",
        "s1",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    lines = json_lines(done.stdout)
    events, outcome = lines[:-1], lines[-1]
    assert {line["type"] for line in events} == {"event"}
    assert [line["seq"] for line in events] == list(range(1, len(events) + 1))
    assert events[0]["event"]["author"] == "user"
    partial = [
        line["event"]["content"]["parts"][0]["text"]
        for line in events
        if line["event"].get("partial")
    ]
    assert "".join(partial) == "Hello! I am the offline scripted agent."
    assert outcome["type"] == "outcome" and outcome["outcome"] == "completed"
    assert outcome["run_id"].startswith("run-") and outcome["run_id"] == events[0]["run_id"]
    assert (outcome["user_id"], outcome["session_id"], outcome["app_name"]) == (
        "cli-user",
        "s1",
        "adk-cli",
    )
    assert outcome["text"] == "Hello! I am the offline scripted agent."


def test_run_reports_a_paused_tool_confirmation(write_config):
    path = pausing_config(write_config)
    done = run_adk("run", "--config", path, "-m", "publish", "--json")
    assert done.returncode == 0, done.stderr
    outcome = json_lines(done.stdout)[-1]
    assert outcome["outcome"] == "paused"
    assert outcome["pause"]["reason"] == "tool_confirmation"
    assert outcome["pause"]["tool_name"] == "publish_release"
    human = run_adk("run", "--config", path, "-m", "publish")
    assert human.returncode == 0
    assert "publish_release asks for confirmation" in human.stderr
    assert "adk console" in human.stderr


def test_a_failed_run_exits_1(write_config):
    path = write_config({"provider": "scripted", "script": [{"error": "model_down"}]})
    done = run_adk("run", "--config", path, "-m", "hi", "--json")
    assert done.returncode == 1
    outcome = json_lines(done.stdout)[-1]
    assert outcome["outcome"] == "failed"
    human = run_adk("run", "--config", path, "-m", "hi")
    assert human.returncode == 1 and "run_failed" in human.stderr


def test_run_without_a_gemini_key_says_how_to_run_offline():
    done = run_adk("run", "--config", "examples/agent.json", "-m", "hi")
    assert done.returncode == 2 and done.stdout == ""
    assert "missing_api_key" in done.stderr
    assert '"provider": "scripted"' in done.stderr and '"script"' in done.stderr
    done = run_adk("run", "--config", "examples/agent.json", "-m", "hi", "--json")
    assert json.loads(done.stderr)["reason"] == "missing_api_key"


def test_usage_errors_exit_2():
    assert run_adk("run", "--message", "no config").returncode == 2
    assert run_adk("no-such-command").returncode == 2


# -- console --------------------------------------------------------------------------


def test_console_keeps_one_agent_across_turns_and_commands(write_config):
    """Follows adk_cli_test: deterministic_console_case."""
    stdin = "\n".join(
        [
            "/help",
            "first turn",
            "/inspect",
            '/resume {"confirmed": true}',
            "/bogus",
            "/session second-session",
            "/inspect",
            "second turn",
            "/new",
            "/exit",
            "never read",
        ]
    )
    done = run_adk(
        "console", "--config", SCRIPTED, "--session", "first-session", stdin=stdin + "\n"
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "/resume JSON" in out  # the help
    assert out.count("Hello! I am the offline scripted agent.") == 2  # one per message, once each
    assert "id: first-session" in out and "events (5)" in out
    assert "session: second-session" in out and "second-session has no events yet" in out
    assert "error no_paused_run" in done.stderr and "error unknown_console_command" in done.stderr
    assert "closed" in done.stderr and "2 turns" in done.stderr


def test_console_approves_a_paused_tool_with_resume(write_config):
    path = pausing_config(write_config, "ConsoleApprover")
    stdin = 'publish it\n/resume {"confirmed": "yes"}\n/resume {"confirmed": true}\n'
    done = run_adk("console", "--config", path, "--json", stdin=stdin)
    assert done.returncode == 0, done.stderr
    lines = json_lines(done.stdout)
    outcomes = [line for line in lines if line["type"] == "outcome"]
    errors = [line for line in lines if line["type"] == "error"]
    assert [o["outcome"] for o in outcomes] == ["paused", "completed"]
    assert outcomes[0]["pause"]["tool_name"] == "publish_release"
    assert outcomes[1]["text"] == "Published 2.0.0."
    assert outcomes[1]["run_id"] != outcomes[0]["run_id"]
    # a refused response consumes nothing: the approval after it still works
    assert [e["reason"] for e in errors] == ["resume_failed"]
    assert errors[0]["details"] == ["invalid_tool_confirmation_response"]
    summary = lines[-1]
    assert summary == {
        "type": "summary",
        "command": "console",
        "outcome": "eof",
        "app_name": "adk-cli",
        "user_id": "local-user",
        "session_id": summary["session_id"],
        "turns": 1,
    }


def test_console_shows_a_pause_and_how_to_answer_it(write_config):
    path = pausing_config(write_config, "ConsolePause")
    done = run_adk("console", "--config", path, stdin="publish it\n")
    assert done.returncode == 0, done.stderr
    assert "paused: publish_release asks for confirmation" in done.stdout
    assert '/resume {"confirmed": true}' in done.stdout


def test_console_closes_cleanly_at_end_of_input():
    done = run_adk("console", "--config", SCRIPTED, "--json", stdin="")
    assert done.returncode == 0, done.stderr
    assert json_lines(done.stdout) == [
        {
            "type": "summary",
            "command": "console",
            "outcome": "eof",
            "app_name": "adk-cli",
            "user_id": "local-user",
            "session_id": json_lines(done.stdout)[0]["session_id"],
            "turns": 0,
        }
    ]


# -- config validate and tool imports -------------------------------------------------

PROBE_MODULE = "adk_cli_import_probe"


@pytest.fixture
def probe_tools(tmp_path):
    """A tool module (on PYTHONPATH) whose import leaves a marker file next to it."""
    write_probe_tools(tmp_path, PROBE_MODULE)
    return tmp_path


def test_config_validate_no_import_tools_runs_no_tool_code(write_config, probe_tools):
    path = write_config(
        {"provider": "scripted", "script": [{"text": "hi"}], "tools": [f"{PROBE_MODULE}:probe"]}
    )
    env = base_env(PYTHONPATH=str(probe_tools))
    done = run_adk("config", "validate", path, "--no-import-tools", "--json", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["tools_imported"], result["tools"], result["tool_paths"]) == (
        False,
        None,
        [f"{PROBE_MODULE}:probe"],
    )
    assert not (probe_tools / "imported.marker").exists()
    human = run_adk("config", "validate", path, "--no-import-tools", env=env)
    assert human.returncode == 0 and "tools not imported" in human.stdout
    assert not (probe_tools / "imported.marker").exists()
    # the default imports the module (its code runs) and names the tools
    done = run_adk("config", "validate", path, "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tools"] == ["probe"]
    assert (probe_tools / "imported.marker").read_text() == "ran"


def test_config_validate_no_import_tools_still_checks_the_syntax(write_config):
    path = write_config({"provider": "scripted", "script": [{"text": "hi"}], "tools": ["a b"]})
    done = run_adk("config", "validate", path, "--no-import-tools", "--json")
    assert done.returncode == 2 and json.loads(done.stderr)["reason"] == "invalid_tool_path"


def test_config_validate_help_says_that_tool_modules_are_imported():
    done = run_adk("config", "validate", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.lower().split())
    assert "are imported" in text and "--no-import-tools" in text
