"""google-adk evaluation sets, read as our schema-2 eval sets.

`from_google_adk(data)` converts the JSON of a google-adk ``.evalset.json`` file (its
``EvalSet`` model: ``eval_set_id``, ``name``, ``description``, ``eval_cases``, with
field names in snake_case or their camelCase aliases) into the schema-2 JSON
`load_eval_set` reads: one case per eval case (``eval_id``), one turn per invocation
of its ``conversation`` (``invocation_id``, else ``turn-N``), the user content's text
parts as the input, the final response's text as ``expected_response``, the tool
calls (``intermediate_data.tool_uses``, or the function calls among its
``invocation_events``) as the turn's ``expected_trajectory``, and
``session_input.state`` as the case's ``session_state``. The older ``.test.json``
form (a list of ``{"query", "expected_tool_use", "reference"}`` rows, one
conversation) becomes one case. Nothing of google-adk is imported: this reads JSON.

Cases driven by a user simulator (``conversation_scenario``) have no fixed turns and
are refused (``google_adk_conversation_scenario_unsupported``); rubrics, expected
final session state and timing fields are not converted. The converted set is checked
by `load_eval_set`, which also prunes secret-named keys from state and arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adk_actors.evaluation.evalset import load_eval_set
from adk_actors.evaluation.limits import check_data
from providers.errors import AdkError

SOURCE = "google-adk"
DEFAULT_VERSION = "1"
DEFAULT_TEST_FILE_ID = "google-adk-test"
_REASON = "invalid_google_adk_evalset"


def is_google_adk_evalset(data: object) -> bool:
    """True when `data` looks like a google-adk eval set (``eval_set_id`` and
    ``eval_cases``, either spelling) or a ``.test.json`` row list (every row has a
    ``query``)."""
    if isinstance(data, Mapping):
        return _has(data, "eval_set_id") and _has(data, "eval_cases")
    if isinstance(data, list) and data:
        return all(isinstance(row, Mapping) and "query" in row for row in data)
    return False


def from_google_adk(
    data: object, *, version: str = DEFAULT_VERSION, set_id: str | None = None
) -> dict[str, Any]:
    """The schema-2 eval set JSON for google-adk eval set JSON `data`.

    `version` is the dataset revision the converted set records (google-adk sets have
    none); `set_id` names a ``.test.json`` conversion (default
    ``google-adk-test``) and overrides an eval set's own id when given. Raises
    `AdkError` ``invalid_google_adk_evalset`` (with the part that is wrong) for data
    that is not a google-adk eval set, and `load_eval_set`'s reasons for a converted
    set it refuses.
    """
    check_data(data, _REASON)
    if isinstance(data, list) and is_google_adk_evalset(data):
        converted = _from_test_rows(data, set_id or DEFAULT_TEST_FILE_ID, version)
    elif isinstance(data, Mapping) and is_google_adk_evalset(data):
        converted = _from_eval_set(data, set_id, version)
    else:
        raise AdkError(_REASON, "expected a google-adk EvalSet object or .test.json rows")
    load_eval_set(converted)  # refuse here what the engine would refuse later
    return converted


# -- EvalSet (.evalset.json) -------------------------------------------------------------------


def _from_eval_set(data: Mapping[str, Any], set_id: str | None, version: str) -> dict[str, Any]:
    eval_set_id = _get(data, "eval_set_id")
    if not isinstance(eval_set_id, str) or not eval_set_id:
        raise AdkError((_REASON, "eval_set_id"), "eval_set_id is a non-empty string")
    cases = _get(data, "eval_cases")
    if not isinstance(cases, list):
        raise AdkError((_REASON, "eval_cases"), "eval_cases is a list")
    converted: dict[str, Any] = {
        "schema_version": 2,
        "id": set_id or eval_set_id,
        "version": version,
        "metadata": {"source": SOURCE, "eval_set_id": eval_set_id},
        "cases": [_case(case, index) for index, case in enumerate(cases)],
    }
    for key in ("name", "description"):
        value = _get(data, key)
        if isinstance(value, str):
            converted[key] = value
    return converted


def _case(case: object, index: int) -> dict[str, Any]:
    if not isinstance(case, Mapping):
        raise AdkError((_REASON, "eval_case", index), "an eval case is an object")
    eval_id = _get(case, "eval_id")
    if not isinstance(eval_id, str) or not eval_id:
        raise AdkError((_REASON, "eval_id", index), "eval_id is a non-empty string")
    conversation = _get(case, "conversation")
    if conversation is None and _get(case, "conversation_scenario") is not None:
        raise AdkError(
            ("google_adk_conversation_scenario_unsupported", eval_id),
            "a conversation scenario needs a user simulator; give a fixed conversation",
        )
    if not isinstance(conversation, list) or not conversation:
        raise AdkError((_REASON, "conversation", eval_id), "conversation is a non-empty list")
    turns: list[dict[str, Any]] = []
    seen: set[str] = set()
    for turn_index, invocation in enumerate(conversation):
        turn = _turn(invocation, eval_id, turn_index)
        if turn["id"] in seen:  # an id reused (or empty) in the source: number it instead
            turn["id"] = f"turn-{turn_index + 1}"
        seen.add(turn["id"])
        turns.append(turn)
    converted: dict[str, Any] = {"id": eval_id, "turns": turns}
    session_input = _get(case, "session_input")
    if isinstance(session_input, Mapping):
        state = _get(session_input, "state")
        if isinstance(state, Mapping) and state:
            converted["session_state"] = dict(state)
        origin = {
            key: value
            for key in ("app_name", "user_id")
            if isinstance(value := _get(session_input, key), str) and value
        }
        if origin:
            converted["metadata"] = {"google_adk_session": origin}
    return converted


def _turn(invocation: object, eval_id: str, index: int) -> dict[str, Any]:
    if not isinstance(invocation, Mapping):
        raise AdkError((_REASON, "invocation", eval_id, index), "an invocation is an object")
    text = _content_text(_get(invocation, "user_content"))
    if text is None:
        raise AdkError(
            (_REASON, "user_content", eval_id, index), "the user content has no text part"
        )
    invocation_id = _get(invocation, "invocation_id")
    turn: dict[str, Any] = {
        "id": invocation_id if isinstance(invocation_id, str) and invocation_id else "",
        "input": text,
    }
    if not turn["id"]:
        turn["id"] = f"turn-{index + 1}"
    expected = _content_text(_get(invocation, "final_response"))
    if expected is not None:
        turn["expected_response"] = expected
    intermediate = _get(invocation, "intermediate_data")
    if isinstance(intermediate, Mapping):
        turn["expected_trajectory"] = _tool_calls(intermediate, eval_id, index)
    return turn


def _tool_calls(intermediate: Mapping[str, Any], eval_id: str, index: int) -> list[Any]:
    """The expected calls: ``tool_uses``, or the function calls of ``invocation_events``."""
    calls: list[object] = []
    tool_uses = _get(intermediate, "tool_uses")
    events = _get(intermediate, "invocation_events")
    if isinstance(tool_uses, list):
        calls = list(tool_uses)
    elif isinstance(events, list):
        for event in events:
            content = _get(event, "content") if isinstance(event, Mapping) else None
            for part in _parts(content):
                call = _get(part, "function_call")
                if call is not None:
                    calls.append(call)
    steps: list[Any] = []
    for call in calls:
        if not isinstance(call, Mapping) or not isinstance(_get(call, "name"), str):
            raise AdkError((_REASON, "tool_uses", eval_id, index), "a tool use has a name")
        args = _get(call, "args")
        if args is not None and not isinstance(args, Mapping):
            raise AdkError((_REASON, "tool_uses", eval_id, index), "a tool use's args is an object")
        steps.append({"name": _get(call, "name"), "args": dict(args or {})})
    return steps


# -- the older .test.json rows -----------------------------------------------------------------


def _from_test_rows(rows: list[Any], set_id: str, version: str) -> dict[str, Any]:
    turns: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        query = row.get("query")
        if not isinstance(query, str):
            raise AdkError((_REASON, "query", index), "query is a string")
        turn: dict[str, Any] = {"id": f"turn-{index + 1}", "input": query}
        reference = row.get("reference")
        if isinstance(reference, str):
            turn["expected_response"] = reference
        uses = row.get("expected_tool_use")
        if isinstance(uses, list):
            steps = []
            for use in uses:
                name = use.get("tool_name") if isinstance(use, Mapping) else None
                args = use.get("tool_input", {}) if isinstance(use, Mapping) else None
                if not isinstance(name, str) or not isinstance(args, Mapping):
                    raise AdkError(
                        (_REASON, "expected_tool_use", index),
                        "a tool use has a tool_name and a tool_input object",
                    )
                steps.append({"name": name, "args": dict(args)})
            turn["expected_trajectory"] = steps
        turns.append(turn)
    return {
        "schema_version": 2,
        "id": set_id,
        "version": version,
        "metadata": {"source": SOURCE, "format": "test.json"},
        "cases": [{"id": "case-1", "turns": turns}],
    }


# -- JSON helpers ------------------------------------------------------------------------------


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _has(data: Mapping[str, Any], name: str) -> bool:
    return name in data or _camel(name) in data


def _get(data: Mapping[str, Any], name: str) -> Any:
    """A field by its snake_case name or its camelCase alias (pydantic's two spellings)."""
    if name in data:
        return data[name]
    return data.get(_camel(name))


def _parts(content: object) -> list[Mapping[str, Any]]:
    parts = _get(content, "parts") if isinstance(content, Mapping) else None
    return [part for part in parts if isinstance(part, Mapping)] if isinstance(parts, list) else []


def _content_text(content: object) -> str | None:
    """The text parts of a genai ``Content`` joined by newlines (google-adk's own
    reading), or None when it has none."""
    texts = [
        text
        for part in _parts(content)
        if isinstance(text := _get(part, "text"), str) and not _get(part, "thought")
    ]
    return "\n".join(texts) if texts else None
