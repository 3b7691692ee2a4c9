"""`normalize`: every action result becomes one checked `Control`; and the failure
shaping of errors.py (nothing user-supplied leaves as it is unless it is a stable tag)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest

from adk_actors.workflows import errors
from adk_actors.workflows.results import (
    EMPTY,
    Control,
    Error,
    Goto,
    Output,
    Pause,
    Stop,
    Transfer,
    normalize,
)
from adk_actors.workflows.spec import MAX_STATE_BYTES
from providers.errors import AdkError

SECRET = "seeded-secret-7f3a"


# -- ok deltas -----------------------------------------------------------------------------------


def test_a_dict_is_a_delta_copied_as_json() -> None:
    raw = {"count": 1, "items": (1, 2), "nested": {"a": [1]}}
    control = normalize(raw)
    assert control == Control("ok", delta={"count": 1, "items": [1, 2], "nested": {"a": [1]}})
    raw["nested"]["a"].append(2)  # the action's own dict may change later
    assert control.delta["nested"] == {"a": [1]}
    assert not control.has_output


def test_none_and_read_only_mappings_are_deltas() -> None:
    assert normalize(None) == Control("ok", delta={})
    assert normalize(MappingProxyType({"a": 1})) == Control("ok", delta={"a": 1})


@pytest.mark.parametrize(
    "raw",
    [
        {"pid": object()},
        {1: "int key"},
        {"x": math.nan},
        {"x": b"bytes"},
        {"big": "x" * (MAX_STATE_BYTES + 1)},
        Output("fine", delta=[1]),  # type: ignore[arg-type]
        Output("fine", delta={"x": {1, 2}}),
        Stop("fine", delta="state"),  # type: ignore[arg-type]
        Goto("b", delta={"x": object()}),
        Transfer("b", "in", delta=None),  # type: ignore[arg-type]
        Pause("r", None, delta={"x": object()}),
    ],
)
def test_a_delta_that_is_not_a_json_object_is_invalid_state_delta(raw: Any) -> None:
    assert normalize(raw) == Control("invalid", reason="invalid_state_delta")


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"x": value}
    return value


def test_a_delta_nested_too_deep_is_refused() -> None:
    assert normalize(deep(100)).reason == "invalid_state_delta"
    assert normalize(deep(20)).kind == "ok"


class Broken(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError(SECRET)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError(SECRET)

    def __len__(self) -> int:
        return 1


def test_a_mapping_that_raises_is_refused_not_raised() -> None:
    control = normalize(Broken())
    assert control == Control("invalid", reason="invalid_state_delta")
    assert SECRET not in repr(control)


# -- outputs, stop, goto, transfer ---------------------------------------------------------------


def test_output_and_stop_carry_a_json_copy_of_the_value() -> None:
    value = {"answer": (1, 2)}
    output = normalize(Output(value, {"a": 1}))
    assert output == Control("output", {"answer": [1, 2]}, {"a": 1})
    assert output.has_output
    assert normalize(Stop("final")) == Control("stop", "final", {})
    assert normalize(Stop()).has_output and normalize(Stop()).value is None
    assert normalize(Output()) == Control("output", None, {})


@pytest.mark.parametrize("value", [object(), {"x": math.inf}, {1: 2}, {"s": {1}}])
def test_an_output_that_is_not_json_is_invalid_output(value: Any) -> None:
    assert normalize(Output(value)) == Control("invalid", reason="invalid_output")
    assert normalize(Stop(value)) == Control("invalid", reason="invalid_output")


def test_goto_and_transfer_name_their_target() -> None:
    assert normalize(Goto("next", {"a": 1})) == Control("goto", delta={"a": 1}, target="next")
    assert normalize(Goto("end")).target == "end"
    transfer = normalize(Transfer("b", "handoff-input", {"a": 1}))
    assert transfer == Control("transfer", "handoff-input", {"a": 1}, target="b")
    assert normalize(Transfer("b")).value is None


@pytest.mark.parametrize("target", [None, 5, "", "x" * 257, ("b",)])
def test_a_bad_target_is_invalid_target(target: Any) -> None:
    assert normalize(Goto(target)) == Control("invalid", reason="invalid_target")
    assert normalize(Transfer(target)) == Control("invalid", reason="invalid_target")


def test_a_transfer_input_that_is_not_json_is_refused() -> None:
    control = normalize(Transfer("b", object()))
    assert control == Control("invalid", reason=("invalid_transfer_input",))


# -- pause sanitising ------------------------------------------------------------------------------


def test_pause_reason_and_details_are_kept_when_small() -> None:
    control = normalize(Pause("approval", {"summary": "please", "items": [1, 2]}, {"asked": True}))
    assert control == Control(
        "pause", {"summary": "please", "items": [1, 2]}, {"asked": True}, reason="approval"
    )
    assert not control.has_output


def test_pause_values_are_cut_at_depth_six() -> None:
    control = normalize(Pause(deep(10), deep(10)))
    for value in (control.reason, control.value):
        for _ in range(6):
            value = value["x"]
        assert value == "truncated"


def test_pause_strings_are_cut_at_4096_utf8_bytes_without_splitting_a_character() -> None:
    control = normalize(Pause("é" * 3000, {"text": "a" * 5000}))
    assert control.reason == "é" * 2048
    assert len(control.reason.encode()) == 4096
    assert control.value == {"text": "a" * 4096}
    odd = normalize(Pause("a" + "é" * 3000)).reason
    assert odd == "a" + "é" * 2047 and len(odd.encode()) == 4095


def test_pause_lists_and_maps_keep_32_items() -> None:
    control = normalize(Pause(list(range(40)), {f"k{i}": i for i in range(40)}))
    assert control.reason == [*range(32), "truncated"]
    assert control.value == {f"k{i}": i for i in range(32)}
    assert normalize(Pause(list(range(32)))).reason == list(range(32))


def test_pause_values_drop_secrets_and_non_json() -> None:
    details = {
        "api_key": SECRET,
        "token": SECRET,
        "pid": object(),
        "x": math.nan,
        7: "int key",
        "ok": (1,),
    }
    control = normalize(Pause("r", details))
    assert control.value == {"pid": "redacted", "x": "redacted", "ok": [1]}
    assert SECRET not in repr(control)


# -- errors --------------------------------------------------------------------------------------


def test_a_stable_error_reason_is_kept() -> None:
    assert normalize(Error("transient_failure")) == Control("error", reason="transient_failure")


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (
            ("http_error", 503, {"body": SECRET}),
            {
                "component": "adk_workflow_action",
                "operation": "action",
                "reason": "http_error",
                "status": 503,
            },
        ),
        (
            ["quota", 42],
            {"component": "adk_workflow_action", "operation": "action", "reason": "quota"},
        ),
        (
            {"body": SECRET},
            {"component": "adk_workflow_action", "operation": "action", "reason": "failed"},
        ),
        (
            f"Failed: {SECRET}",
            {"component": "adk_workflow_action", "operation": "action", "reason": "failed"},
        ),
        (AdkError("rate_limited", SECRET), "rate_limited"),
        (
            AdkError(("upstream", 502, SECRET)),
            {
                "component": "adk_workflow_action",
                "operation": "action",
                "reason": "upstream",
                "status": 502,
            },
        ),
        (
            RuntimeError(SECRET),
            {"component": "adk_workflow_action", "operation": "action", "reason": "failed"},
        ),
    ],
)
def test_other_error_reasons_become_bounded_failures(reason: Any, expected: Any) -> None:
    """Follows adk_workflow_failure_security_test: {http_error, 503, #{body => Seed}}."""
    control = normalize(Error(reason))
    assert control == Control("error", reason=expected)
    assert SECRET not in repr(control)


@pytest.mark.parametrize("raw", ["text", 42, [1], ("ok", {}), 1.5, object()])
def test_anything_else_is_an_invalid_control(raw: Any) -> None:
    control = normalize(raw)
    assert control == Control("invalid", reason=("invalid_control", type(raw).__name__))


def test_the_default_delta_is_read_only_and_empty() -> None:
    assert dict(EMPTY) == {}
    with pytest.raises(TypeError):
        EMPTY["x"] = 1  # type: ignore[index]
    assert Output().delta is EMPTY


# -- failure shaping (errors.py) ---------------------------------------------------------------------


def test_exceptions_are_reported_by_class_and_stable_tag_only() -> None:
    """Follows adk_workflow_test: public_failures_are_sanitized_case."""
    failure = errors.exception_reason("adk_workflow_action", "crash", RuntimeError(SECRET))
    assert failure == {
        "component": "adk_workflow_action",
        "operation": "crash",
        "reason": "exception",
        "class": "RuntimeError",
    }
    tagged = errors.exception_reason(
        "adk_workflow_action", "crash", AdkError("seeded_secret", SECRET)
    )
    assert tagged["reason"] == "seeded_secret" and tagged["class"] == "AdkError"
    assert SECRET not in repr(tagged)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("step", "step"),
        (7, 7),
        ("x" * 256, "x" * 256),
        ("x" * 257, "redacted_identifier"),
        ("", "redacted_identifier"),
        (None, "redacted_identifier"),
        (True, "redacted_identifier"),
        (object(), "redacted_identifier"),
        ("api_key", "redacted_identifier"),
    ],
)
def test_safe_ids(value: Any, expected: Any) -> None:
    assert errors.safe_id(value) == expected


def test_tagged_failures_state_conflicts_and_cancel_reasons() -> None:
    detail = {"component": "adk_workflow_action", "operation": "x", "reason": "failed"}
    assert errors.tagged("step_failed", "fetch", detail) == ("step_failed", "fetch", detail)
    assert errors.tagged("node_failed", object(), "boom")[1] == "redacted_identifier"
    conflict = errors.state_conflict(["left", "right"])
    assert conflict == (
        "state_conflict",
        {"component": "adk_workflow", "operation": "state_conflict", "reason": "state_conflict"},
        ["left", "right"],
    )
    assert len(errors.state_conflict([f"b{i}" for i in range(40)])[2]) == 16
    assert errors.cancel_reason("revise_later") == "revise_later"
    assert errors.cancel_reason({"secret": SECRET}) == {
        "component": "adk_workflow",
        "operation": "cancel",
        "reason": "cancelled",
    }


@pytest.mark.parametrize(
    "reason",
    [
        "timed_out",
        ("budget_exhausted", "steps"),
        ("retry_exhausted", 2, ("action_timed_out", 0.025)),
        (
            "step_failed",
            "crash",
            {
                "component": "adk_workflow_action",
                "operation": "crash",
                "reason": "exception",
                "class": "RuntimeError",
            },
        ),
        (
            "state_conflict",
            {
                "component": "adk_workflow",
                "operation": "state_conflict",
                "reason": "state_conflict",
            },
            ["l", "r"],
        ),
        (
            "output_schema_validation_failed",
            ("schema_validation_failed", ("a", 0), ("expected_type", "string")),
        ),
    ],
)
def test_failure_reason_keeps_structural_reasons(reason: Any) -> None:
    assert errors.failure_reason(reason) == reason
    assert errors.failure_reason(errors.failure_reason(reason)) == reason


@pytest.mark.parametrize(
    "reason",
    [
        ("step_failed", "s", {"body": SECRET, "reason": SECRET}),
        ("step_failed", "s", object()),
        {"component": SECRET, "operation": "x", "reason": "ok", "extra": SECRET},
        ("node_failed", "n", [SECRET * 30, object()]),
        object(),
        ("Not A Tag", SECRET),
    ],
)
def test_failure_reason_drops_what_is_not_structural(reason: Any) -> None:
    shaped = errors.failure_reason(reason)
    assert SECRET not in repr(shaped)
    assert errors.failure_reason(shaped) == shaped


def test_a_spec_error_carries_its_path() -> None:
    error = errors.WorkflowSpecError(("steps", 1, "id"), ("duplicate_id", "same"))
    assert isinstance(error, AdkError)
    assert error.path == ("steps", 1, "id")
    assert error.reason == ("invalid_workflow", ("steps", 1, "id"), ("duplicate_id", "same"))
    assert "steps/1/id" in str(error)
