"""Issue 20 section 4 (session 28): `share` freezes a value and finds its plain empty
fields in one walk, and skips what holds only scalars in one C-level pass. Its result
must stay exactly what freezing and then searching gave: the same frozen value (equal,
encoded the same, every container of the same type), the same plan, and readers' copies
that are equal and have empty fields of their own."""

from __future__ import annotations

import types
from collections import OrderedDict
from typing import Any, NamedTuple

import msgspec
import pytest

from adk_actors.events import Event, EventActions, EventError, Pause, PolicyDecision
from providers import content, frozen
from providers.frozen import EMPTY_DICT, EMPTY_LIST, FrozenDict, FrozenList, freeze, share


class _Note(msgspec.Struct, omit_defaults=True):
    tags: list[str] = []
    extra: dict[str, Any] = {}
    title: str = ""


class _Kept(msgspec.Struct):  # does not omit defaults: its empties are frozen too
    tags: list[str] = []


class _Pair(NamedTuple):
    left: Any
    right: Any


class _Shared(msgspec.Struct, omit_defaults=True):
    tags: list[str] = EMPTY_LIST
    extra: dict[str, Any] = EMPTY_DICT


def _call(args: dict[str, Any]) -> Any:
    return content.new([content.function_call("search", args)], role="model")


VALUES: list[Any] = [
    Event.new("user", "inv", content.new([content.text("weather?")], role="user")),
    Event.new("P", "inv", _call({"city": "Tokyo"})),
    Event.new("P", "inv", _call({})),
    Event.new("P", "inv", _call({"filters": [], "opts": {}, "deep": [{"a": []}, ()]})),
    Event.new("P", "inv", content.new([content.text("sunny")], role="model"), is_final=True),
    Event.new(
        "P",
        "inv",
        actions=EventActions(
            state_delta={"k": [1, {"n": _Note()}], "e": {}},
            pause=Pause(reason="r", continuation_id="c", details={"type": "x"}),
            policy_decisions=(
                PolicyDecision(
                    decision_id="d",
                    policy_id="p",
                    operation="o",
                    subject="s",
                    outcome="allow",
                    reason="ok",
                ),
            ),
        ),
        provider_metadata={"usage": {"tokens": [1, 2]}, "empty": {}},
        error=EventError(reason="boom"),
    ),
    _Note(),
    _Note(tags=["a"], extra={"n": _Note(), "m": [_Note(title="t")]}),
    _Kept(),
    _Shared(),
    {"a": _Note(), "b": [], "c": {}, "d": (_Note(), 1)},
    [_Note(), [_Note(tags=["x"])], (), ("s", 1.5, None)],
    (_Note(), "x"),
    ("x", 1, None, True, b"b"),
    _Pair(_Note(), [1]),
    _Pair("a", "b"),
    FrozenList([_Note()]),
    FrozenDict({"n": _Note()}),
    FrozenList(["a"]),
    OrderedDict(a=[], b=_Note()),
    EMPTY_DICT,
    [],
    {},
    "text",
    None,
]


def _shape(value: Any) -> Any:
    """Every node's exact type and identity-free content (equality alone treats a dict
    and a FrozenDict, or a struct and its shared form, as one)."""
    kind = type(value)
    if isinstance(value, dict):
        return (kind, tuple((key, _shape(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return (kind, tuple(_shape(item) for item in value))
    if isinstance(value, msgspec.Struct):
        return (kind, tuple(_shape(item) for item in msgspec.structs.astuple(value)))
    if isinstance(value, types.MappingProxyType):
        return (kind, tuple((key, _shape(item)) for key, item in value.items()))
    return (kind, value)


@pytest.mark.parametrize("value", VALUES, ids=lambda value: type(value).__name__)
def test_one_walk_gives_what_freeze_and_then_empty_fields_gave(value):
    reference = freeze(value)
    plan = frozen.empty_fields(reference)
    walked, walked_plan = frozen._frozen_with_plan(value)
    assert _shape(walked) == _shape(reference)
    assert walked_plan == plan
    kept, refill = share(value)
    expected = reference if plan is None else frozen._refiller(plan)(reference)
    assert _shape(kept) == _shape(expected)
    assert (refill is None) == (plan is None)
    if isinstance(value, msgspec.Struct | dict | list | tuple):
        assert msgspec.json.encode(kept) == msgspec.json.encode(value)


@pytest.mark.parametrize("value", VALUES, ids=lambda value: type(value).__name__)
def test_shared_values_stay_read_only_and_readers_get_their_own_empties(value):
    kept, refill = share(value)
    first, second = frozen.reader_copy(kept, refill), frozen.reader_copy(kept, refill)
    assert _shape(first) == _shape(second) == _shape(kept)
    if refill is not None:
        assert first is not second and first is not kept
    for container in _containers(kept):
        assert type(container) in (FrozenDict, FrozenList, tuple) or not container


def _containers(value: Any) -> list[Any]:
    """Every dict and list in `value` (the plain ones left are empty struct defaults)."""
    found: list[Any] = []
    if isinstance(value, dict):
        found.append(value)
        for item in value.values():
            found += _containers(item)
    elif isinstance(value, list | tuple):
        if isinstance(value, list):
            found.append(value)
        for item in value:
            found += _containers(item)
    elif isinstance(value, msgspec.Struct):
        for item in msgspec.structs.astuple(value):
            found += _containers(item)
    return found


def test_a_struct_of_scalars_and_a_tuple_of_scalars_are_kept_as_they_are():
    part = content.text("sunny")
    assert freeze(part) is part and share(part) == (part, None)
    items = ("a", 1, None)
    assert freeze(items) is items and share(items) == (items, None)
