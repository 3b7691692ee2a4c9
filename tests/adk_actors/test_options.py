"""Option structs decoded by `decode_options`: the Runner's, its admission settings, a run's."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
import pytest

import supervision as sv
from adk_actors.admission import NAME as ADMISSION_NAME
from adk_actors.runner.options import (
    DEFAULT_MAX_STREAM_OUTPUT_BYTES,
    MAX_RUN_TIMEOUT,
    MAX_STREAM_OUTPUT_BYTES,
    RunnerAdmission,
    RunnerOptions,
    runner_admission,
    runner_options,
)
from adk_actors.runs.options import RunOptions, run_options
from providers.errors import AdkError, decode_options

SECRET = "sk-live-do-not-echo"


def _reason(fn: Any, *args: Any, **kwargs: Any) -> Any:
    with pytest.raises(AdkError) as info:
        fn(*args, **kwargs)
    return info.value.reason


# -- decode_options itself -----------------------------------------------------------------


class Sample(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    count: Annotated[int, msgspec.Meta(ge=1, le=10)] = 5
    mode: Literal["fast", "slow"] = "fast"
    names: list[Annotated[str, msgspec.Meta(min_length=1)]] = msgspec.field(default_factory=list)


def test_decode_options_defaults_and_values() -> None:
    assert decode_options(Sample, None, "bad") == Sample()
    assert decode_options(Sample, {}, "bad") == Sample()
    assert decode_options(Sample, {"count": 10, "names": ("a",)}, "bad") == Sample(
        count=10, names=["a"]
    )


def test_decode_options_names_the_key_never_the_value() -> None:
    with pytest.raises(AdkError) as info:
        decode_options(Sample, {"mode": SECRET}, "bad", what="sample")
    assert info.value.reason == ("bad", "mode")
    assert "'mode'" in info.value.detail and "'fast', 'slow'" in info.value.detail
    assert SECRET not in str(info.value)
    with pytest.raises(AdkError) as info:
        decode_options(Sample, {"names": ["a", ""]}, "bad")
    assert info.value.reason == ("bad", "names") and "'names[1]'" in info.value.detail


def test_decode_options_unknown_keys_and_shapes() -> None:
    assert _reason(decode_options, Sample, {"zeta": 1, "alpha": 2, 3: 4}, "bad") == (
        "bad",
        ("unknown_keys", ["<int>", "alpha", "zeta"]),
    )
    assert _reason(decode_options, Sample, {"count": 0}, "bad", keyed=False) == "bad"
    assert _reason(decode_options, Sample, {"zeta": 1}, "bad", keyed=False) == "bad"
    assert _reason(decode_options, Sample, ["count"], "bad") == "bad"
    assert _reason(decode_options, Sample, {"count": 0}, "bad", field_reasons={"count": "c"}) == (
        "c"
    )


def test_decode_options_checks_a_struct_instance_again() -> None:
    assert _reason(decode_options, Sample, Sample(count=0), "bad") == ("bad", "count")
    good = Sample(count=3)
    assert decode_options(Sample, good, "bad") == good


# -- RunnerOptions -------------------------------------------------------------------------


def test_runner_option_defaults() -> None:
    assert runner_options() == RunnerOptions(
        run_timeout=120.0,
        max_llm_calls=32,
        max_tool_rounds=16,
        streaming_mode="none",
        max_stream_output_bytes=16 << 20,
    )
    assert DEFAULT_MAX_STREAM_OUTPUT_BYTES == 16 << 20


@pytest.mark.parametrize(
    ("key", "good", "bad"),
    [
        ("run_timeout", [0.001, 1, MAX_RUN_TIMEOUT], [0, -1, MAX_RUN_TIMEOUT + 0.5, True]),
        ("run_timeout", [], [float("nan"), float("inf"), "10", None]),
        ("max_llm_calls", [1, 10_000], [0, 10_001, True, False, 2.0, "3", None]),
        ("max_tool_rounds", [1, 10_000], [0, -1, 10_001, True, 1.5]),
        ("streaming_mode", ["none", "text", "content"], ["video", "", None, 1, True]),
        (
            "max_stream_output_bytes",
            [1, MAX_STREAM_OUTPUT_BYTES],
            [0, MAX_STREAM_OUTPUT_BYTES + 1, True, 1024.0],
        ),
    ],
)
def test_runner_option_bounds_and_types(key: str, good: list[Any], bad: list[Any]) -> None:
    for value in good:
        assert getattr(runner_options(**{key: value}), key) == value
    for value in bad:
        assert _reason(runner_options, **{key: value}) == f"invalid_{key}", value


def test_run_timeout_is_a_float() -> None:
    options = runner_options(run_timeout=5)
    assert options.run_timeout == 5.0 and isinstance(options.run_timeout, float)


def test_unknown_runner_options_are_named() -> None:
    with pytest.raises(AdkError) as info:
        runner_options(run_timout=5, streaming="text")
    assert info.value.reason == (
        "invalid_runner_options",
        ("unknown_keys", ["run_timout", "streaming"]),
    )


def test_runner_option_errors_do_not_echo_values() -> None:
    with pytest.raises(AdkError) as info:
        runner_options(streaming_mode=SECRET)
    assert info.value.reason == "invalid_streaming_mode"
    assert SECRET not in str(info.value) and "'streaming_mode'" in info.value.detail


# -- RunnerAdmission -----------------------------------------------------------------------


def test_runner_admission_defaults() -> None:
    assert runner_admission(None) is None
    defaults = runner_admission({})
    assert defaults == RunnerAdmission(overflow="reject", queue_timeout=30.0, server=None)
    assert defaults is not None and defaults.controller == ADMISSION_NAME


def test_runner_admission_values() -> None:
    pid = sv.self_pid()
    checked = runner_admission({"overflow": "queue", "queue_timeout": 86_400, "server": pid})
    assert checked == RunnerAdmission(overflow="queue", queue_timeout=86_400.0, server=pid)
    assert checked is not None and checked.controller == pid
    named = runner_admission({"server": "adk.admission.mine"})
    assert named is not None and named.controller == "adk.admission.mine"
    again = RunnerAdmission(overflow="queue")
    assert runner_admission(again) == again


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"overflow": "drop"}, "overflow"),
        ({"overflow": None}, "overflow"),
        ({"queue_timeout": 0}, "queue_timeout"),
        ({"queue_timeout": -1.0}, "queue_timeout"),
        ({"queue_timeout": MAX_RUN_TIMEOUT + 1}, "queue_timeout"),
        ({"queue_timeout": True}, "queue_timeout"),
        ({"queue_timeout": float("nan")}, "queue_timeout"),
        ({"server": 42}, "server"),
        ({"server": ""}, "server"),
        ({"server": "x" * 257}, "server"),
    ],
)
def test_invalid_runner_admission(options: dict[str, Any], key: str) -> None:
    assert _reason(runner_admission, options) == ("invalid_admission_control", key)


def test_runner_admission_unknown_keys_and_shape() -> None:
    assert _reason(runner_admission, {"limit": 1, "burst": 2}) == (
        "invalid_admission_control",
        ("unknown_keys", ["burst", "limit"]),
    )
    assert _reason(runner_admission, "queue") == "invalid_admission_control"


# -- RunOptions ----------------------------------------------------------------------------


def test_run_option_defaults() -> None:
    assert run_options() == RunOptions(retention=60.0, max_buffered_events=256)


@pytest.mark.parametrize(
    ("key", "good", "bad"),
    [
        ("retention", [0.001, 1, 86_400.0], [0, -0.5, 86_400.5, float("inf"), float("nan"), True]),
        ("max_buffered_events", [1, 65_536], [0, 65_537, 70_000, True, 8.0, "8", None]),
    ],
)
def test_run_option_bounds_and_types(key: str, good: list[Any], bad: list[Any]) -> None:
    for value in good:
        assert getattr(run_options(**{key: value}), key) == value
    for value in bad:
        assert _reason(run_options, **{key: value}) == f"invalid_{key}", value


def test_unknown_run_options_are_named() -> None:
    assert _reason(run_options, retension=5) == (
        "invalid_run_options",
        ("unknown_keys", ["retension"]),
    )
