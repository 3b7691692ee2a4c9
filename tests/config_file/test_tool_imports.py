"""Tool paths checked without importing them (`without_tool_imports`): nothing runs,
the syntax is still checked, and such a file cannot be spawned."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import adk_actors as adk
from adk_actors.config_file import load_agent_file, spawn_from_file
from adk_actors.config_file.tool_paths import UnimportedTool, without_tool_imports
from tests.config_file.conftest import write_probe_tools

MODULE = "adk_config_import_probe"


@pytest.fixture
def probe_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A tool module whose import leaves a marker file next to it."""
    marker = write_probe_tools(tmp_path, MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    yield marker
    sys.modules.pop(MODULE, None)


def scripted(write_config, tools):
    return write_config({"provider": "scripted", "script": [{"text": "hi"}], "tools": tools})


def test_without_tool_imports_nothing_is_imported_and_nothing_runs(write_config, probe_module):
    path = scripted(write_config, [f"{MODULE}:probe", "no_such_module:anything"])
    with without_tool_imports():
        agent = load_agent_file(path)
    assert not probe_module.exists() and MODULE not in sys.modules
    assert agent.tool_objects == (
        UnimportedTool(f"{MODULE}:probe"),
        UnimportedTool("no_such_module:anything"),
    )
    assert (agent.tools_imported, agent.tool_names) == (False, None)


def test_the_syntax_is_still_checked_without_imports(write_config):
    with without_tool_imports(), pytest.raises(adk.AdkError) as caught:
        load_agent_file(scripted(write_config, ["not a path"]))
    assert caught.value.reason == ("invalid_tool_path", "not a path")


def test_imports_are_the_default_again_after_the_block(write_config, probe_module):
    path = scripted(write_config, [f"{MODULE}:probe"])
    with without_tool_imports():
        load_agent_file(path)
    agent = load_agent_file(path)
    assert probe_module.read_text() == "ran"
    assert (agent.tools_imported, agent.tool_names) == (True, ["probe"])


def test_a_file_loaded_without_imports_cannot_be_spawned(write_config):
    with without_tool_imports():
        agent = load_agent_file(scripted(write_config, ["examples.agent_tools:get_weather"]))
    with pytest.raises(adk.AdkError) as caught:
        spawn_from_file(agent)
    assert caught.value.reason == "tools_not_imported"
