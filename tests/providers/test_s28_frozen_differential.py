"""Review of 7f05ca6, finding L1: `share` walks a value once (`_frozen_with_plan`), a
second copy of the rules `freeze` and `empty_fields` follow. These tests pin the two
together on generated values (the reviewer's fuzz_frozen.py `build()`, a few hundred
seeds): for each, `share(x)` must equal freezing `x` and then planning its empties
(exact types, values, plan, msgspec bytes), stay read-only, give readers empties of
their own, and encode as `x` itself (review note B: a struct nesting an all-default
struct with an empty list subclass lost that field)."""

from __future__ import annotations

import collections
import datetime
import decimal
import enum
import math
import random
import types
import uuid
from typing import Any, NamedTuple

import msgspec
import pytest

from adk_actors.events import Event, EventActions, EventError
from providers import content, frozen
from providers.frozen import (
    EMPTY_DICT,
    EMPTY_LIST,
    FrozenDict,
    FrozenList,
    empty_fields,
    freeze,
    register_shared_form,
    share,
)
from tests.providers.test_s28_frozen_one_walk import _shape


class _Str(str):
    pass


class _Int(int):
    pass


class _Color(enum.IntEnum):
    RED = 1


class _DictSub(dict[Any, Any]):
    pass


class _ListSub(list[Any]):
    pass


class _Pair(NamedTuple):
    left: Any
    right: Any


class _Note(msgspec.Struct, omit_defaults=True):
    tags: list[Any] = []
    extra: dict[Any, Any] = {}
    title: Any = ""


class _Titled(msgspec.Struct, omit_defaults=True):  # a default a value can equal, not be
    tags: list[Any] = []
    title: str = "abc"


class _Kept(msgspec.Struct):  # does not omit defaults
    tags: list[Any] = []
    other: Any = None


class _Row(msgspec.Struct, array_like=True, omit_defaults=True):
    items: list[Any] = []
    other: Any = None


class _Fixed(msgspec.Struct, frozen=True, omit_defaults=True):
    items: list[Any] = []
    entries: dict[Any, Any] = {}


class _Required(msgspec.Struct, omit_defaults=True):
    needed: Any
    items: list[Any] = []


class _Tagged(msgspec.Struct, tag=True, omit_defaults=True):
    items: list[Any] = []
    other: Any = 0


class _SubNote(_Note, omit_defaults=True):
    more: dict[Any, Any] = {}


class _Shared(msgspec.Struct, omit_defaults=True):
    tags: list[Any] = EMPTY_LIST
    extra: dict[Any, Any] = EMPTY_DICT


class _Formed(msgspec.Struct, omit_defaults=True):
    entries: dict[Any, Any] = {}
    other: Any = None


class _FormedShared(msgspec.Struct, omit_defaults=True):
    entries: dict[Any, Any] = EMPTY_DICT
    other: Any = None


register_shared_form(
    _Formed, lambda value: _FormedShared(entries=value.entries or EMPTY_DICT, other=value.other)
)

_LEAVES = (
    "s", "", _Str("sub"), 0, -7, 2**70, True, False, _Int(3), _Color.RED, math.nan, math.inf,
    -0.0, 1.5, None, b"by", b"", msgspec.UNSET, datetime.date(2020, 1, 2),
    decimal.Decimal("1.5"), uuid.UUID(int=5), frozenset({1}), EMPTY_DICT, EMPTY_LIST,
)  # fmt: skip
_KEYS = ("s", 1, (1, 2), None, 2.5, True, b"k", _Color.RED)


def _event(parts: list[Any]) -> Event:
    event = Event.new("P", "inv", content.new(parts, role="model"))
    return msgspec.structs.replace(event, id="e" * 32, timestamp=1.0)


def _build(rng: random.Random, depth: int) -> Any:
    """One nested value of every container, struct and leaf kind `freeze` meets."""
    if depth <= 0 or rng.random() < 0.3:
        leaf = rng.choice(_LEAVES)
        return bytearray(b"ba") if leaf is None and rng.random() < 0.1 else leaf
    size = rng.randrange(4)

    def sub() -> Any:
        return _build(rng, depth - 1)

    match rng.randrange(25):
        case 0:
            return {f"k{i}": sub() for i in range(size)}
        case 1:
            return {rng.choice(_KEYS): sub() for _ in range(size)}
        case 2:
            return [sub() for _ in range(size)]
        case 3:
            return tuple(sub() for _ in range(size))
        case 4:
            return _Pair(sub(), sub())
        case 5:
            return _DictSub({f"k{i}": sub() for i in range(size)})
        case 6:
            return _ListSub(sub() for _ in range(size))
        case 7:
            return collections.OrderedDict((f"k{i}", sub()) for i in range(size))
        case 8:
            return types.MappingProxyType({f"k{i}": sub() for i in range(size)})
        case 9:  # built directly, as a shared form does: its content is frozen
            return FrozenDict({f"k{i}": freeze(sub()) for i in range(size)})
        case 10:
            return FrozenList(freeze(sub()) for _ in range(size))
        case 11:
            return _Note(
                tags=rng.choice([[], [sub()], _ListSub(), FrozenList()]),
                extra=rng.choice([{}, {"a": sub()}, _DictSub(), EMPTY_DICT, FrozenDict()]),
                title=sub() if rng.random() < 0.5 else "",
            )
        case 12:
            return _Note() if rng.random() < 0.5 else _Titled(title="".join(["ab", "c"]))
        case 13:
            return _Kept(tags=rng.choice([[], [sub()]]), other=sub())
        case 14:
            return _Row(items=rng.choice([[], [sub()]]), other=sub())
        case 15:
            return _Fixed(items=rng.choice([[], [sub()]]), entries=rng.choice([{}, {"z": sub()}]))
        case 16:
            return _Required(needed=sub(), items=rng.choice([[], [1]]))
        case 17:
            return _Tagged(items=rng.choice([[], [sub()]]), other=sub())
        case 18:
            return _SubNote(tags=rng.choice([[], [1]]), more=rng.choice([{}, {"m": sub()}]))
        case 19:
            return _Shared() if rng.random() < 0.5 else _Shared(tags=[sub()], extra={})
        case 20:
            return _Formed(entries=rng.choice([{}, {"q": sub()}]), other=sub())
        case 21:
            args = rng.choice([{}, {"city": "Tokyo", "n": 2}, {"e": [], "f": {}, "g": [{}]}])
            parts = [content.function_call("f", args), content.text("hi")]
            return _event(parts if rng.random() < 0.5 else [content.text("x")])
        case 22:
            event = Event.new(
                "P",
                "inv",
                actions=EventActions(state_delta=rng.choice([{}, {"k": 1}, {"k": [{}]}])),
                provider_metadata=rng.choice([{}, {"u": {"tokens": [1, 2]}}]),
                error=rng.choice([None, EventError(reason="x")]),
            )
            return msgspec.structs.replace(event, id="e" * 32, timestamp=1.0)
        case 23:
            return (tuple(sub() for _ in range(size)), (sub(),))
        case _:
            return {f"k{i}": rng.choice(_LEAVES[:16]) for i in range(size * 3)}


def _encoded(value: Any) -> Any:
    try:
        return msgspec.json.encode(value)
    except (TypeError, msgspec.EncodeError) as error:
        return type(error)


def _plain_containers(value: Any) -> list[Any]:
    """Every dict and list in `value` that is not read-only."""
    found: list[Any] = []
    if isinstance(value, dict):
        found += [] if type(value) is FrozenDict else [value]
        for item in value.values():
            found += _plain_containers(item)
    elif isinstance(value, list | tuple):
        found += [value] if isinstance(value, list) and type(value) is not FrozenList else []
        for item in value:
            found += _plain_containers(item)
    elif isinstance(value, msgspec.Struct):
        for item in msgspec.structs.astuple(value):
            found += _plain_containers(item)
    return found


SEEDS = range(2000)  # ~0.3 s in all


@pytest.mark.parametrize("chunk", range(4))
def test_share_equals_freeze_then_plan_on_generated_values(chunk):
    for seed in SEEDS[chunk::4]:
        value = _build(random.Random(seed), 1 + seed % 5)
        twin = _build(random.Random(seed), 1 + seed % 5)  # share gets an input of its own
        reference = freeze(value)
        plan = empty_fields(reference)
        expected = reference if plan is None else frozen._refiller(plan)(reference)
        walked, walked_plan = frozen._frozen_with_plan(twin)
        assert _shape(walked) == _shape(reference), seed
        assert walked_plan == plan, seed
        kept, refill = share(twin)
        assert _shape(kept) == _shape(expected), seed
        assert (refill is None) == (plan is None), seed
        assert _encoded(kept) == _encoded(reference) == _encoded(value), seed
        stored_plain = _plain_containers(kept)
        assert all(not item for item in stored_plain), seed  # only empty struct defaults
        first, second = frozen.reader_copy(kept, refill), frozen.reader_copy(kept, refill)
        assert _shape(first) == _shape(second) == _shape(kept), seed
        assert _encoded(first) == _encoded(kept), seed
        first_ids = {id(item) for item in _plain_containers(first)}
        assert not first_ids & {id(item) for item in _plain_containers(second)}, seed
        assert not first_ids & {id(item) for item in stored_plain}, seed


class _Outer(msgspec.Struct, omit_defaults=True):
    items: list[Any] = []
    inner: Any = None


@pytest.mark.parametrize(
    "inner",
    [
        _Note(tags=FrozenList()),
        _Note(extra=FrozenDict()),
        _Note(tags=_ListSub()),
        _Titled(title="".join(["ab", "c"])),  # equal to the default, not the same object
    ],
    ids=["FrozenList", "FrozenDict", "list-subclass", "equal-string"],
)
def test_share_keeps_an_empty_subclass_field_of_an_all_default_looking_struct(inner):
    """Review of 7f05ca6, note B: the refill made a new, all-default inner struct
    because its fields compared equal to the defaults, and the stored value encoded
    ``{"inner":{}}`` instead of ``{"inner":{"tags":[]}}``."""
    value = _Outer(inner=inner)
    kept, refill = share(value)
    assert msgspec.json.encode(kept) == msgspec.json.encode(value)
    assert msgspec.json.encode(frozen.reader_copy(kept, refill)) == msgspec.json.encode(value)


def test_a_dict_of_scalars_is_frozen_in_one_step_with_its_keys_as_they_are():
    """Review of 7f05ca6, L3: the scalar-only fast path gives what the walk gave."""
    value = {"a": 1, 2: "b", None: None, (1, 2): 1.5, "e": b"x", "f": True}
    frozen_value = freeze(value)
    assert type(frozen_value) is FrozenDict and frozen_value == value
    assert frozen_value is not value and list(frozen_value) == list(value)
    assert frozen._frozen_with_plan(value) == (value, None)
    with pytest.raises(TypeError):
        frozen_value["a"] = 2
    empty = {}
    assert freeze(empty) is not empty and type(freeze(empty)) is FrozenDict
