"""The plugin pipeline: descriptors, outcomes, order, failure policy, limits."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors import plugins as pl
from adk_actors.plugins import PhaseKind


class Tagger(pl.Plugin):
    """Appends its config's tag to a list value."""

    mode = "intervene"

    def before_run(self, ctx, value, config):
        return pl.Amend([*value, config["tag"]])


class Returner(pl.Plugin):
    mode = "intervene"

    def before_run(self, ctx, value, config):
        return pl.Return(["returned"])


class Raiser(pl.Plugin):
    def before_run(self, ctx, value, config):
        raise RuntimeError("hook bug with api_key=AIzaSECRET")

    def after_run(self, ctx, value, config):
        raise RuntimeError("notification bug")


def tagger(tag, **options):
    return {"plugin": Tagger(), "id": tag, "config": {"tag": tag}, **options}


def outcomes(result):
    return [(entry.plugin, entry.outcome) for entry in result.trace]


def test_ordered_amendment_continues():
    """Ported: adk_plugin_pipeline_test ordered_amendment_continues_test."""
    pipeline = pl.Pipeline.compile([tagger("a"), tagger("b"), tagger("c")])
    result = pipeline.run("before_run", {}, [])
    assert result.kind is PhaseKind.AMEND
    assert result.value == ["a", "b", "c"]
    assert outcomes(result) == [("a", "amended"), ("b", "amended"), ("c", "amended")]


def test_return_stops_remaining_plugins():
    """Ported: adk_plugin_pipeline_test return_stops_remaining_plugins_test."""
    pipeline = pl.Pipeline.compile([tagger("a"), {"plugin": Returner(), "id": "r"}, tagger("c")])
    result = pipeline.run("before_run", {}, [])
    assert result.kind is PhaseKind.RETURN and result.returned
    assert result.value == ["returned"]
    assert outcomes(result) == [("a", "amended"), ("r", "returned")]


def test_legacy_replace_is_early_return():
    """Ported: adk_plugin_pipeline_test legacy_replace_is_early_return_test."""

    class Legacy(pl.Plugin):
        mode = "intervene"

        def before_run(self, ctx, value, config):
            return {"replace": ["legacy"]}

    class Typed(pl.Plugin):
        mode = "intervene"

        def before_run(self, ctx, value, config):
            return pl.Replace(["typed"])

    for plugin, expected in ((Legacy(), ["legacy"]), (Typed(), ["typed"])):
        result = pl.Pipeline.compile([plugin, tagger("later")]).run("before_run", {}, [])
        assert result.kind is PhaseKind.RETURN and result.value == expected
        assert [entry.plugin for entry in result.trace] == [type(plugin).__name__]


def test_continue_spellings_keep_the_value():
    class Spelled(pl.Plugin):
        def before_run(self, ctx, value, config):
            return config["answer"]

    descriptors = [
        {"plugin": Spelled(), "id": f"p{index}", "config": {"answer": answer}}
        for index, answer in enumerate([None, "continue", "observe", "ok"])
    ]
    result = pl.Pipeline.compile(descriptors).run("before_run", {}, ["x"])
    assert result.kind is PhaseKind.CONTINUE and result.value == ["x"]
    assert {entry.outcome for entry in result.trace} == {"observed"}


def test_fail_open_and_fail_closed():
    """Ported: adk_plugin_pipeline_test fail_open_and_fail_closed_test."""
    opened = pl.Pipeline.compile([tagger("a"), Raiser(), tagger("c")])
    result = opened.run("before_run", {}, [])
    assert result.kind is PhaseKind.AMEND and result.value == ["a", "c"]
    assert outcomes(result)[1] == ("Raiser", "exception")

    closed = pl.Pipeline.compile(
        [tagger("a"), {"plugin": Raiser(), "id": "boom", "failure_policy": "closed"}, tagger("c")]
    )
    result = closed.run("before_run", {}, [])
    assert result.kind is PhaseKind.ERROR
    assert result.value == ("plugin_failed", "boom", "before_run", "exception")
    assert [entry.plugin for entry in result.trace] == ["a", "boom"]  # "c" never ran
    with pytest.raises(adk.AdkError) as info:
        result.settle()
    assert info.value.reason == ("plugin_failed", "boom", "before_run", "exception")
    assert "AIza" not in str(info.value)


def test_timeout_limits_sync_and_async_hooks():
    """Ported: adk_plugin_pipeline_test timeout_and_heap_limit_test (the timeout half)."""
    cancelled = threading.Event()

    class SlowAsync(pl.Plugin):
        async def before_run(self, ctx, value, config):
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.set()
                raise

    class SlowSync(pl.Plugin):
        def before_run(self, ctx, value, config):
            time.sleep(0.5)

    pipeline = pl.Pipeline.compile(
        [
            {"plugin": SlowAsync(), "id": "async", "timeout": 0.1},
            {"plugin": SlowSync(), "id": "sync", "timeout": 0.1},
            tagger("after"),
        ]
    )
    started = time.monotonic()
    result = pipeline.run("before_run", {}, [])
    assert time.monotonic() - started < 1.0
    assert outcomes(result) == [("async", "timeout"), ("sync", "timeout"), ("after", "amended")]
    assert cancelled.wait(2.0)
    closed = pl.Pipeline.compile(
        [{"plugin": SlowAsync(), "id": "async", "timeout": 0.05, "failure_policy": "closed"}]
    )
    assert closed.run("before_run", {}, []).value == (
        "plugin_failed",
        "async",
        "before_run",
        "timeout",
    )


def test_observer_cannot_intervene():
    """Ported: adk_plugin_pipeline_test observer_cannot_intervene_test."""

    class Intervening(pl.Plugin):  # mode stays "observe"
        def before_run(self, ctx, value, config):
            return config["result"]

    for result_value, failure in (
        ({"amend": 1}, "observer_cannot_amend"),
        ({"return": 1}, "observer_cannot_return"),
        ({"halt": "no"}, "observer_cannot_halt"),
    ):
        opened = pl.Pipeline.compile(
            [{"plugin": Intervening(), "id": "o", "config": {"result": result_value}}]
        )
        result = opened.run("before_run", {}, "value")
        assert result.kind is PhaseKind.CONTINUE and result.value == "value"
        assert outcomes(result) == [("o", failure)]
        closed = pl.Pipeline.compile(
            [
                {
                    "plugin": Intervening(),
                    "id": "o",
                    "failure_policy": "closed",
                    "config": {"result": result_value},
                }
            ]
        )
        assert closed.run("before_run", {}, "value").value == (
            "plugin_failed",
            "o",
            "before_run",
            failure,
        )


def test_halt_is_typed_bounded_and_redacted():
    class Halter(pl.Plugin):
        mode = "intervene"

        def before_run(self, ctx, value, config):
            return pl.Halt("policy api_key=AIzaSyDUMMYDUMMYDUMMYDUMMYDUMMYDUMMY12 " + "x" * 500)

    result = pl.Pipeline.compile([Halter(), tagger("later")]).run("before_run", {}, [])
    assert result.kind is PhaseKind.HALT
    tag, plugin_id, hook, reason = result.value
    assert (tag, plugin_id, hook) == ("plugin_halted", "Halter", "before_run")
    assert len(reason) <= 128 and "AIzaSy" not in reason
    assert [entry.plugin for entry in result.trace] == ["Halter"]


def test_notifications_are_best_effort_and_immutable():
    """Ported: adk_plugin_pipeline_test notifications_are_best_effort_and_immutable_test."""

    class Intervening(pl.Plugin):
        mode = "intervene"

        def after_run(self, ctx, value, config):
            return pl.Halt("ignored")

        def on_run_error(self, ctx, value, config):
            return pl.Amend("ignored")

    pipeline = pl.Pipeline.compile(
        [{"plugin": Raiser(), "id": "raiser", "failure_policy": "closed"}, Intervening()]
    )
    result = pipeline.run("after_run", {}, "answer")
    assert result.kind is PhaseKind.CONTINUE and result.value == "answer"
    assert outcomes(result) == [
        ("raiser", "exception"),
        ("Intervening", "notification_result_ignored"),
    ]
    result = pipeline.run("on_run_error", {}, {"reason": "boom"})
    assert result.kind is PhaseKind.CONTINUE and result.value == {"reason": "boom"}


def test_legacy_on_error_is_the_fallback_for_error_hooks():
    seen = []

    class Legacy(pl.Plugin):
        def on_error(self, ctx, value, config):
            seen.append(value)

    pipeline = pl.Pipeline.compile([Legacy()])
    pipeline.run("on_agent_error", {}, {"reason": "x"})
    pipeline.run("on_tool_error", {}, {"success": False})
    pipeline.run("before_run", {}, "not an error")
    assert seen == [{"reason": "x"}, {"success": False}]


def test_result_size_and_type_are_bounded():
    """Ported: adk_plugin_pipeline_test result_size_and_type_are_bounded_test."""

    class Big(pl.Plugin):
        mode = "intervene"

        def before_run(self, ctx, value, config):
            return pl.Amend("x" * 2000)

    class NotJson(pl.Plugin):
        mode = "intervene"

        def before_run(self, ctx, value, config):
            return pl.Amend(object())

    class Shapeless(pl.Plugin):
        mode = "intervene"

        def before_run(self, ctx, value, config):
            return ("amend", 1)

    pipeline = pl.Pipeline.compile(
        [{"plugin": Big(), "id": "big", "max_result_bytes": 1000}, NotJson(), Shapeless()]
    )
    result = pipeline.run("before_run", {}, "small")
    assert result.value == "small"
    assert outcomes(result) == [
        ("big", "result_too_large"),
        ("NotJson", "invalid_result"),
        ("Shapeless", "invalid_result"),
    ]


def test_an_amendment_the_phase_refuses_is_a_failure():
    def check(tag, value):
        if not isinstance(value, list):
            raise adk.AdkError("invalid_amendment", "a list")
        return value

    class Wrong(pl.Plugin):
        mode = "intervene"

        def before_run(self, ctx, value, config):
            return pl.Amend("not a list")

    result = pl.Pipeline.compile([Wrong(), tagger("b")]).run("before_run", {}, [], check)
    assert result.value == ["b"]
    assert outcomes(result) == [("Wrong", "invalid_amendment"), ("b", "amended")]


def test_contexts_lose_secret_keys_and_are_read_only():
    seen = {}

    class Peek(pl.Plugin):
        def before_run(self, ctx, value, config):
            seen["ctx"] = dict(ctx)
            seen["nested"] = dict(ctx["nested"])
            try:
                ctx["x"] = 1
            except TypeError:
                seen["read_only"] = True

    pl.Pipeline.compile([Peek()]).run(
        "before_run",
        {"run_id": "r1", "api_key": "AIzaSECRET", "nested": {"authorization": "Bearer x", "k": 1}},
        None,
    )
    assert "api_key" not in seen["ctx"] and seen["ctx"]["run_id"] == "r1"
    assert seen["nested"] == {"k": 1}
    assert seen["read_only"]


def test_owner_death_cancels_callback_worker():
    """Ported: adk_plugin_pipeline_test owner_death_cancels_callback_worker_test."""
    started, cancelled = threading.Event(), threading.Event()

    class Slow(pl.Plugin):
        async def before_run(self, ctx, value, config):
            started.set()
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.set()
                raise

    pipeline = pl.Pipeline.compile([{"plugin": Slow(), "id": "slow", "timeout": 30.0}])
    owner = sv.Task.start(pipeline.run, "before_run", {}, None)
    assert started.wait(2.0)
    owner.kill()
    assert cancelled.wait(2.0)


def test_unknown_hook_is_refused():
    with pytest.raises(adk.AdkError) as info:
        pl.Pipeline.compile([tagger("a")]).run("before_everything", {}, None)
    assert info.value.reason == ("unknown_plugin_hook", "before_everything")


def test_plugin_collection_identity_and_resource_bounds():
    """Ported: adk_plugin_pipeline_test plugin_collection_identity_and_resource_bounds_test
    and invalid_module_does_not_create_atom_test."""

    def reason(descriptors):
        with pytest.raises(adk.AdkError) as info:
            pl.Pipeline.compile(descriptors)
        return info.value.reason

    assert len(pl.Pipeline.compile([tagger(f"p{n}") for n in range(128)]).plugins) == 128
    assert reason([tagger(f"p{n}") for n in range(129)]) == (
        "invalid_plugin_pipeline",
        "too_many_plugins",
    )
    assert reason("plugins") == "invalid_plugin_pipeline"
    assert reason({"plugin": Tagger()}) == "invalid_plugin_pipeline"
    assert reason([tagger("a"), tagger("a")]) == ("duplicate_plugin_id", "a")
    assert reason([tagger("a"), tagger("i" * 257)]) == (
        "invalid_plugin_descriptor",
        1,
        "invalid_id",
    )
    assert reason([tagger("")]) == ("invalid_plugin_descriptor", 0, "invalid_id")
    assert reason([tagger("a", mode="maybe")]) == ("invalid_plugin_descriptor", 0, "invalid_mode")
    assert reason([tagger("a", failure_policy="x")]) == (
        "invalid_plugin_descriptor",
        0,
        "invalid_failure_policy",
    )
    assert reason([tagger("a", timeout=120.5)]) == (
        "invalid_plugin_descriptor",
        0,
        "invalid_timeout",
    )
    assert reason([tagger("a", timeout=0)]) == ("invalid_plugin_descriptor", 0, "invalid_timeout")
    assert reason([tagger("a", max_result_bytes=(1 << 20) + 1)]) == (
        "invalid_plugin_descriptor",
        0,
        "invalid_max_result_bytes",
    )
    assert reason([{"plugin": Tagger(), "id": "a", "config": {"blob": "x" * (1 << 20)}}]) == (
        "invalid_plugin_descriptor",
        0,
        "config_too_large",
    )
    assert reason([{"plugin": Tagger(), "id": "a", "config": {"f": object()}}])[2] in (
        "invalid_config",
        "invalid_options",
    )
    assert reason([{"plugin": Tagger(), "id": "a", "colour": "red"}]) == (
        "invalid_plugin_descriptor",
        0,
        ("unknown_keys", ["colour"]),
    )
    assert reason([{"plugin": "my_module:Plugin", "id": "a"}]) == (
        "invalid_plugin_descriptor",
        0,
        "invalid_plugin",
    )
    assert reason([pl.Plugin()]) == ("invalid_plugin_descriptor", 0, "no_plugin_callbacks")
    described = pl.Pipeline.compile([tagger("a", timeout=2)]).describe()
    assert described["plugins"][0] == {
        "id": "a",
        "mode": "intervene",
        "failure_policy": "open",
        "timeout": 2.0,
        "max_result_bytes": pl.DEFAULT_MAX_RESULT_BYTES,
        "hooks": ["before_run"],
    }


class Mutator(pl.Plugin):
    """Changes the value and the context it was given in place, then continues."""

    def before_run(self, ctx, value, config):
        value["items"].append("injected")
        value["nested"]["args"]["path"] = "/etc/passwd"
        ctx["nested"]["k"] = "changed"
        return None


class Reader(pl.Plugin):
    seen: list = []

    def before_run(self, ctx, value, config):
        Reader.seen.append((value, dict(ctx["nested"])))
        return None


def test_a_hook_changing_its_value_in_place_changes_nothing():
    """Review M5: each hook gets its own copy; only Amend/Return changes the value."""
    Reader.seen = []
    value = {"items": ["a"], "nested": {"args": {"path": "/tmp/x"}}}
    pipeline = pl.Pipeline.compile(
        [
            {"plugin": Mutator(), "id": "m", "mode": "observe"},
            {"plugin": Reader(), "id": "r", "mode": "observe"},
        ]
    )
    result = pipeline.run("before_run", {"nested": {"k": "v"}}, value)
    assert result.kind is PhaseKind.CONTINUE
    assert value == {"items": ["a"], "nested": {"args": {"path": "/tmp/x"}}}
    assert result.value == value
    assert Reader.seen == [(value, {"k": "v"})]  # the next hook saw the original


def test_a_value_that_cannot_be_copied_fails_the_hook():
    lock = threading.Lock()  # not copyable
    pipeline = pl.Pipeline.compile([{"plugin": Reader(), "id": "r", "failure_policy": "closed"}])
    result = pipeline.run("before_run", {"nested": {}}, {"lock": lock})
    assert result.kind is PhaseKind.ERROR
    assert result.value == ("plugin_failed", "r", "before_run", "uncopyable_value")
