"""`load_agent_file`: strict keys, no secrets, bounded size, checked tools and providers.

Follows adk_cli_test: checked_config_validation_case, checked_repository_examples_case,
config_rejects_embedded_secret_case (secret_in_config_file).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import adk_actors as adk
from adk_actors.config_file import MAX_FILE_BYTES, load_agent_file
from examples.agent_tools import publish_release
from tests.config_file.conftest import REPO

SCRIPT = [{"text": "hi"}]


def refused(path: Path) -> adk.AdkError:
    with pytest.raises(adk.AdkError) as caught:
        load_agent_file(path)
    return caught.value


def test_the_spec_example_loads_and_maps_onto_an_agent_config():
    """Follows adk_cli_test: checked_repository_examples_case."""
    agent = load_agent_file(REPO / "examples" / "agent.json")
    assert (agent.name, agent.provider, agent.model) == (
        "CliAgent",
        "gemini",
        "gemini-3.1-flash-lite",
    )
    assert agent.runner_options == {"max_llm_calls": 8, "max_tool_rounds": 4}
    config = agent.config
    assert config["global_instruction"] == "Never expose credentials."
    assert config["instructions"] == "Answer concisely and follow exact-output requests."
    # the API's enum spelling is accepted and given to the provider in its own spelling
    assert config["generation_config"]["safety_settings"] == [
        {"category": "dangerous_content", "threshold": "block_medium_and_above"}
    ]
    assert config["generation_config"]["thinking_config"] == {"thinking_level": "low"}
    adk.providers.validate_config(
        {key: config[key] for key in ("provider", "model", "instructions", "generation_config")}
    )


def test_the_scripted_example_resolves_its_tools_by_import_path():
    agent = load_agent_file(REPO / "examples" / "agent.scripted.json")
    assert agent.provider == "scripted" and agent.model is None
    assert agent.tools == (
        "examples.agent_tools:get_weather",
        "examples.agent_tools:publish_release",
    )
    assert agent.tool_names == ["get_weather", "publish_release"]
    assert agent.tool_objects[1] is publish_release
    assert agent.runner_options["streaming_mode"] == "text"


def test_a_valid_file_with_every_kind_of_option(write_config):
    """Follows adk_cli_test: checked_config_validation_case."""
    path = write_config(
        {
            "name": "CliValidateAgent",
            "provider": "gemini",
            "model": "gemini-3.1-flash-lite",
            "instructions": "Be concise.",
            "global_instruction": "Never expose credentials.",
            "builtin_tools": ["google_search"],
            "history_policy": "exclude",
            "temperature": 0.2,
            "generation_config": {
                "thinking_config": {"thinking_level": "low", "include_thoughts": True},
                "safety_settings": [{"category": "dangerous_content", "threshold": "off"}],
            },
            "output_schema": {"type": "object"},
            "runner_options": {
                "max_llm_calls": 4,
                "run_timeout": 30,
                "tool_execution": {"mode": "parallel", "max_concurrency": 2, "tool_timeout": 1},
            },
        }
    )
    agent = load_agent_file(path)
    assert agent.config["generation_config"]["temperature"] == 0.2  # folded in
    assert agent.config["tool_execution"] == {
        "mode": "parallel",
        "max_concurrency": 2,
        "tool_timeout": 1.0,
    }
    assert agent.runner_options == {"max_llm_calls": 4, "run_timeout": 30}
    assert agent.tool_objects == ()


def test_the_agents_runtime_limits_reach_its_config(write_config):
    """An agent file may set how many sessions the agent serves at once and its turn
    deadline (the agent config's own keys), checked with the same bounds."""
    agent_file = load_agent_file(
        write_config(
            {
                "provider": "scripted",
                "script": SCRIPT,
                "max_concurrent_invocations": 64,
                "turn_timeout": 12.5,
            }
        )
    )
    config = agent_file.config
    assert (config["max_concurrent_invocations"], config["turn_timeout"]) == (64, 12.5)
    adk.stop_agent(adk.spawn_agent(agent_file.name, config))


def test_unknown_keys_are_named(write_config):
    error = refused(write_config({"name": "A", "temprature": 1, "zeta": 2}))
    assert error.reason == ("unknown_agent_config_keys", ["temprature", "zeta"])


def test_unknown_and_bad_runner_options_are_named(write_config):
    error = refused(write_config({"runner_options": {"max_llm_call": 3}}))
    assert error.reason == ("unknown_runner_options", ["max_llm_call"])
    error = refused(write_config({"runner_options": {"max_llm_calls": 0}}))
    assert error.reason == "invalid_max_llm_calls"
    error = refused(write_config({"runner_options": {"tool_execution": {"mode": "fast"}}}))
    assert error.reason == ("invalid_parallel_tool_policy", "mode")


@pytest.mark.parametrize(
    "document",
    [
        {"provider": "gemini", "api_key": "must-never-enter-cli-output"},
        {"generation_config": {"nested": {"access_token": "must-never-enter-cli-output"}}},
        {
            "provider": "scripted",
            "script": [
                {"tool_calls": [{"name": "t", "args": {"password": "must-never-enter-cli-output"}}]}
            ],
        },
        {"instructions": "use AIzaSyA1234567890abcdefghijklmnopqrstuv to call the API"},
        {"tools": ["Bearer must-never-enter-cli-output-0123456789"]},
    ],
)
def test_a_secret_anywhere_refuses_the_file_without_echoing_it(write_config, document):
    """Follows adk_cli_test: config_rejects_embedded_secret_case."""
    error = refused(write_config(document))
    assert error.reason == "secret_in_config_file"
    assert "must-never-enter" not in str(error) and "AIzaSy" not in str(error)


def test_a_secret_is_reported_before_the_unknown_key_it_also_is(write_config):
    assert refused(write_config({"apiKey": "x", "other": 1})).reason == "secret_in_config_file"


def test_the_file_size_is_bounded(write_config):
    body = '{"name": "Big"}'
    at_limit = write_config(body + " " * (MAX_FILE_BYTES - len(body)))
    assert os.path.getsize(at_limit) == MAX_FILE_BYTES
    assert load_agent_file(at_limit).name == "Big"
    over = write_config(body + " " * (MAX_FILE_BYTES - len(body) + 1))
    assert refused(over).reason == "file_too_large"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{", "invalid_json"),
        ('{"temperature": NaN}', "invalid_json"),
        ('{"name": "A", "name": "B"}', ("duplicate_agent_config_key", "name")),
        ("[1, 2]", "agent_config_must_be_object"),
        ("\xff", "invalid_json"),
        ("[" * 5000 + "]" * 5000, "invalid_json"),
    ],
)
def test_malformed_json_is_refused(write_config, text, reason):
    assert refused(write_config(text)).reason == reason


def test_a_missing_file_is_named_by_its_errno(tmp_path):
    assert refused(tmp_path / "absent.json").reason == ("file_read_failed", "enoent")


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ({"provider": "openai"}, ("unknown_provider", "openai")),
        ({"provider": "scripted"}, "missing_script"),
        ({"provider": "scripted", "script": []}, "missing_script"),
        ({"script": SCRIPT}, "script_requires_scripted_provider"),
        ({"provider": "scripted", "script": [{"txt": "x"}]}, "invalid_script_step"),
        ({"name": "user"}, "invalid_agent_name"),
        ({"name": "not a name"}, "invalid_agent_name"),
        ({"name": 7}, ("invalid_agent_config", "name")),
        ({"history_policy": "some"}, ("invalid_agent_config", "history_policy")),
        ({"max_concurrent_invocations": 0}, ("invalid_agent_config", "max_concurrent_invocations")),
        (
            {"max_concurrent_invocations": 5000},
            ("invalid_agent_config", "max_concurrent_invocations"),
        ),
        ({"turn_timeout": 0}, ("invalid_agent_config", "turn_timeout")),
        ({"turn_timeout": "long"}, ("invalid_agent_config", "turn_timeout")),
        ({"temperature": 5}, ("invalid_generation_config", "temperature")),
        (
            {"temperature": 0.1, "generation_config": {"temperature": 0.2}},
            ("duplicate_config_keys", ["temperature"]),
        ),
        ({"generation_config": {"tempo": 1}}, ("unknown_generation_config_keys", ("tempo",))),
        (
            {"provider": "scripted", "script": SCRIPT, "builtin_tools": ["google_search"]},
            ("unknown_config_keys", ("builtin_tools",)),
        ),
        ({"input_schema": {"type": "nonsense"}}, ("invalid_input_schema",)),
    ],
)
def test_bad_values_are_refused_with_their_reason(write_config, document, reason):
    assert refused(write_config(document)).reason == reason


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("no_colon", ("invalid_tool_path", "no_colon")),
        ("examples.agent_tools:", ("invalid_tool_path", "examples.agent_tools:")),
        ("examples.absent_module:x", ("unknown_tool_module", "examples.absent_module:x")),
        ("examples.agent_tools:absent", ("unknown_tool", "examples.agent_tools:absent")),
        (
            "examples.agent_tools:PublishRelease",
            ("invalid_tool", "examples.agent_tools:PublishRelease"),
        ),
        ("json:dumps", ("invalid_tool", "json:dumps")),
    ],
)
def test_bad_tool_paths_are_refused_clearly(write_config, path, reason):
    error = refused(write_config({"tools": [path]}))
    assert error.reason == reason
    if reason[1].endswith("PublishRelease"):
        assert "instance" in error.detail


def test_a_tool_module_that_fails_to_import_is_named_without_its_message(
    write_config, tmp_path, monkeypatch
):
    (tmp_path / "broken_tools_h3.py").write_text("raise RuntimeError('secret detail')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    error = refused(write_config({"tools": ["broken_tools_h3:tool"]}))
    assert error.reason == ("tool_module_import_failed", "broken_tools_h3:tool")
    assert "RuntimeError" in error.detail and "secret detail" not in str(error)


def test_duplicate_tool_names_are_refused(write_config):
    path = "examples.agent_tools:get_weather"
    assert refused(write_config({"tools": [path, path]})).reason[0] == "duplicate_tool_name"
