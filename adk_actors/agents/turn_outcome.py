"""How a turn ends, as typed values: completed, failed, or paused with a continuation.

A turn never raises: its task returns exactly one of `TurnCompleted`, `TurnFailed`
or `TurnPaused`. A pause carries a `Continuation`, the versioned record a Runner
stores beside its session so the turn can go on later (after a human's answer or a
long-running operation), in this process or after a restart; it is validated when
read back (`Continuation.load`).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from providers.content import Content, FunctionCallPart, FunctionResponsePart
from providers.errors import AdkError

CONTINUATION_VERSION = 1
PauseKind = Literal["tool_confirmation", "long_running", "human_in_the_loop"]
AnswerKind = Literal["approved", "rejected", "completed"]


class Continuation(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where a paused turn stopped: the call it waits on, the responses of the calls
    before it in the same batch, and the budgets it had used."""

    version: int = CONTINUATION_VERSION
    type: PauseKind
    agent: str
    call_index: int
    call_id: str | None
    tool_name: str
    responses: list[dict[str, Any]]
    """The batch's responses so far, encoded with `encode_response`."""
    llm_calls: int
    rounds: int
    action_id: str | None = None
    hint: str | None = None
    operation_id: str | None = None
    token: str | None = None
    """Whose pause it is: the opening token of the invocation that paused."""
    run_id: str | None = None
    """The stable run that paused, if any: how a daemon finds it again after a restart."""
    calls: list[dict[str, Any]] | None = None
    """The paused batch's calls as the model made them (`encode_call`): stored events
    hold them redacted, and an approved call must run with its real arguments."""

    def dump(self) -> dict[str, Any]:
        """JSON-normalised builtins (a NaN becomes null), so what is stored compares
        equal to what any backend reads back."""
        return msgspec.json.decode(msgspec.json.encode(self))  # type: ignore[no-any-return]

    @staticmethod
    def load(value: Any) -> Continuation:
        """Validate a stored continuation; ``invalid_continuation`` if it is not one."""
        try:
            continuation = msgspec.convert(value, Continuation)
        except msgspec.ValidationError as error:
            raise AdkError("invalid_continuation", f"a stored continuation: {error}") from None
        if continuation.version != CONTINUATION_VERSION:
            raise AdkError(
                ("unsupported_continuation_version", continuation.version),
                "this runtime resumes version 1 continuations",
            )
        return continuation

    def details(self) -> dict[str, Any]:
        """What a pause event shows: the kind, and the action or operation it names."""
        shown: dict[str, Any] = {"type": self.type}
        if self.action_id is not None:
            shown["action_id"] = self.action_id
        if self.operation_id is not None:
            shown["operation_id"] = self.operation_id
        return shown


class Answer(msgspec.Struct, frozen=True):
    """A checked resume response: approved (run the call), rejected (the payload is
    what the model sees) or completed (the payload is the call's result)."""

    how: AnswerKind
    payload: dict[str, Any] | None = None


class TurnCompleted(msgspec.Struct, frozen=True):
    """The model answered; `contents` is what this turn added to the conversation."""

    output: str | Content
    contents: list[Content]


class TurnFailed(msgspec.Struct, frozen=True):
    """The turn ended with an error; `reason` is the spec's stable reason."""

    reason: Any


class TurnPaused(msgspec.Struct, frozen=True):
    """A call waits for a human or an operation; `message` explains it."""

    continuation: Continuation
    call: FunctionCallPart
    message: str


TurnOutcome = TurnCompleted | TurnFailed | TurnPaused


def encode_response(part: FunctionResponsePart) -> dict[str, Any]:
    return {"name": part.name, "response": part.response, "id": part.id}


def decode_response(item: dict[str, Any]) -> FunctionResponsePart:
    return FunctionResponsePart(item["name"], dict(item["response"]), item.get("id"))


def encode_call(part: FunctionCallPart) -> dict[str, Any]:
    return {"name": part.name, "args": part.args, "id": part.id}


def decode_call(item: dict[str, Any]) -> FunctionCallPart:
    return FunctionCallPart(item["name"], dict(item["args"]), item.get("id"))


def as_answer(value: Any) -> str | Content:
    """A final answer as the caller and the session get it: text or `Content` as is;
    any other JSON value (a dict a callback or a provider returned, say) formatted as
    its canonical JSON text (keys sorted, compact separators). A value with no JSON
    form is ``("invalid_answer", type)``."""
    if isinstance(value, str | Content):
        return value
    try:
        return msgspec.json.encode(value, order="sorted").decode()
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        raise AdkError(
            ("invalid_answer", type(value).__name__), "a final answer is text, Content or JSON"
        ) from None
