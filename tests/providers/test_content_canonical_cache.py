"""Issue 20 §2: a stored history entry is made canonical once, not on every model call.

`canonical` remembers its answer for frozen contents (`providers.frozen`) only; these
tests check that the answer is the one it would compute, that nobody can change it or
the content behind it, that a content whose payload is still mutable is never
trusted, and that the memory stays bounded and goes with the content.
"""

from __future__ import annotations

import copy
import gc
import json
import pickle

import msgspec
import pytest

from providers import content, content_canonical
from providers.content import Content, canonical
from providers.frozen import FrozenDict, FrozenList, freeze


def secret_call() -> Content:
    call = content.function_call("login", {"user": "ada", "api_key": "k-123", "n": [1, {}]})
    texts = [content.text("Hello, "), content.text("world")]
    return Content("model", (*texts, call))


def test_a_frozen_content_gets_the_answer_an_unfrozen_one_gets():
    plain = secret_call()
    frozen = freeze(plain)
    assert frozen == plain and frozen is not plain
    first = canonical(frozen)
    assert first == canonical(plain)
    assert first.parts[-1].args == {"user": "ada", "n": [1, {}]}
    assert canonical(frozen) is first  # remembered
    with pytest.raises(TypeError):
        first.parts[-1].args["api_key"] = "again"  # shared answers are read-only too
    clean = freeze(content.from_text("hi"))
    assert canonical(clean) is clean


def test_a_mutable_payload_is_never_trusted():
    call = content.function_call("now")  # no arguments: an empty, mutable dict
    message = Content("model", (call,))
    assert canonical(message) is message
    call.args["password"] = "hunter2"  # made mutable payload non-empty afterwards
    assert "password" not in canonical(message).parts[0].args
    mutable = Content("model", (content.function_call("f", {"a": 1}),))
    canonical(mutable)
    mutable.parts[0].args["token"] = "t"
    assert canonical(mutable).parts[0].args == {"a": 1}


def test_the_cache_is_bounded_and_goes_with_its_contents(monkeypatch):
    monkeypatch.setattr(content_canonical, "CANONICAL_CACHE_SIZE", 8)
    kept = [freeze(content.from_text(f"m{n}")) for n in range(20)]
    for item in kept:
        assert canonical(item) is item
    assert len(content_canonical._canonical_cache) <= 8
    before = len(content_canonical._canonical_cache)
    last = kept.pop()
    del last, item
    gc.collect()
    assert len(content_canonical._canonical_cache) == before - 1


def test_frozen_values_refuse_changes_and_copy_to_plain_ones():
    value = freeze({"a": [1, {"b": (2, [3])}], "c": {}})
    assert type(value) is FrozenDict and type(value["a"]) is FrozenList
    assert type(value["a"][1]["b"][1]) is FrozenList
    for change in (
        lambda: value.update(x=1),
        lambda: value.setdefault("x", 1),
        lambda: value.pop("a"),
        lambda: value["a"].append(4),
        lambda: value["a"].sort(),
        lambda: value["c"].__setitem__("x", 1),
    ):
        with pytest.raises(TypeError):
            change()
    with pytest.raises(TypeError):
        value |= {"x": 1}
    plain = {"a": [1, {"b": [2, [3]]}], "c": {}}
    assert json.loads(json.dumps(value)) == plain
    assert msgspec.json.decode(msgspec.json.encode(value)) == plain
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(value)) == plain
    for thawed in (copy.copy(value), copy.deepcopy(value), pickle.loads(pickle.dumps(value))):
        thawed["x"] = 1
        assert type(thawed) is dict
    assert type(copy.deepcopy(value)["a"]) is list
    assert freeze(value) is value and freeze("text") == "text"
