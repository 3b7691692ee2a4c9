"""What an A2A task holds and how it changes: pure functions on `pb.Task` and its bounds.

The task store (`tasks_server`) keeps one `pb.Task` per task and changes it only
through these functions, so every rule of the task's content is here: history is the
user messages and the agent's final message, the oldest dropped past
``max_history_messages`` / ``max_history_bytes`` (and ``max_task_bytes``); a completed
task holds one text artifact, and an answer past ``max_artifact_bytes`` /
``max_parts_per_artifact`` / ``max_artifacts`` makes it FAILED instead (nothing of it
kept); a pause becomes an INPUT_REQUIRED status message whose data part says what the
run waits for, never its arguments; a failure's status message names its reason only.
Page tokens are opaque: the creation order of the last task of a page, signed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from a2a.types import a2a_pb2 as pb

from adk_actors.a2a import wire
from adk_actors.a2a.server_options import A2AServerOptions
from adk_actors.events import Event
from providers.content import Content

MAX_REASON_CHARS = 200
"""A failure's status message is its reason, cut to this."""


def principal_scope(principal: str) -> str:
    """``"p-"`` + the first 32 hex digits of the principal's SHA-256: the only principal
    data a task store keeps."""
    return "p-" + hashlib.sha256(principal.encode("utf-8")).hexdigest()[:32]


def new_task(task_id: str, context_id: str, message: pb.Message) -> pb.Task:
    """A SUBMITTED task whose history is the user's first message."""
    task = pb.Task(id=task_id, context_id=context_id)
    task.history.append(message)
    set_status(task, pb.TASK_STATE_SUBMITTED)
    return task


def set_status(task: pb.Task, state: int, message: pb.Message | None = None) -> None:
    """Put `task` in `state` now, with `message` as its status message (or none)."""
    status = pb.TaskStatus(state=state)  # type: ignore[arg-type]
    if message is not None:
        status.message.CopyFrom(message)
    status.timestamp.GetCurrentTime()
    task.status.CopyFrom(status)


def status_event(task: pb.Task) -> pb.StreamResponse:
    """The stream event that says `task` is in its current status."""
    update = pb.TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id)
    update.status.CopyFrom(task.status)
    return pb.StreamResponse(status_update=update)


def artifact_event(task: pb.Task, artifact: pb.Artifact) -> pb.StreamResponse:
    """The stream event that adds `artifact` to `task` (whole: not an append)."""
    update = pb.TaskArtifactUpdateEvent(
        task_id=task.id, context_id=task.context_id, last_chunk=True
    )
    update.artifact.CopyFrom(artifact)
    return pb.StreamResponse(artifact_update=update)


def snapshot_event(task: pb.Task) -> pb.StreamResponse:
    return pb.StreamResponse(task=task)


def add_history(task: pb.Task, message: pb.Message, options: A2AServerOptions) -> None:
    """Append `message` to the history, then drop the oldest messages past the bounds."""
    task.history.append(message)
    trim_history(task, options)


def trim_history(task: pb.Task, options: A2AServerOptions) -> None:
    """Drop the oldest history messages until the count, the history's bytes and the
    task's bytes are within their bounds (the newest message is always kept)."""
    while len(task.history) > options.max_history_messages:
        del task.history[0]
    sizes = [wire.json_bytes(message) for message in task.history]
    while len(sizes) > 1 and sum(sizes) > options.max_history_bytes:
        del task.history[0]
        sizes.pop(0)
    while len(task.history) > 1 and not fits_task(task, options):
        del task.history[0]


def output_text(output: str | Content) -> str:
    """The text of a completed run's output."""
    if isinstance(output, str):
        return output
    return output.text_value()


def completion_artifact(text: str, task: pb.Task, options: A2AServerOptions) -> pb.Artifact | None:
    """The artifact holding the final answer, or None when it breaks a bound."""
    artifact = wire.text_artifact(text)
    if (
        len(task.artifacts) >= options.max_artifacts
        or len(artifact.parts) > options.max_parts_per_artifact
        or wire.json_bytes(artifact) > options.max_artifact_bytes
        or wire.json_bytes(artifact_event(task, artifact)) > options.max_event_bytes
    ):
        return None
    return artifact


def fits_task(task: pb.Task, options: A2AServerOptions) -> bool:
    """Whether `task` is within ``max_task_bytes`` (and fits one snapshot event)."""
    return wire.json_bytes(task) <= min(options.max_task_bytes, options.max_event_bytes - 16)


def failure_message(task: pb.Task, reason: Any) -> pb.Message:
    """A FAILED status message: the reason only (its stable name, no detail)."""
    return wire.agent_message(reason_text(reason), context_id=task.context_id, task_id=task.id)


def reason_text(reason: Any) -> str:
    """A reason as short text: a string as is, a tuple by its first member."""
    while isinstance(reason, tuple | list) and reason:
        reason = reason[0]
    return str(reason)[:MAX_REASON_CHARS]


def pause_message(task: pb.Task, event: Event) -> pb.Message:
    """The INPUT_REQUIRED status message: what the run waits for, as text and as a data
    part ``{"pause": {"kind", "message", "tool", "details"}}`` (the pause's value-free
    facts; never the tool's arguments)."""
    pause = event.actions.pause if event.actions is not None else None
    text = event.text() or (pause.hint if pause is not None and pause.hint else "")
    if not text:
        text = "input required"
    data: dict[str, Any] = {
        "pause": {
            "kind": pause.reason if pause is not None else "input_required",
            "message": text,
            "tool": pause.tool_name if pause is not None else None,
            "details": dict(pause.details or {}) if pause is not None else {},
        }
    }
    return wire.agent_message(text, context_id=task.context_id, task_id=task.id, data=data)


def public_task(task: pb.Task, history_length: int | None, include_artifacts: bool) -> pb.Task:
    """A copy of `task` for a reader: the last `history_length` messages (0: none; None:
    all), artifacts only when asked."""
    copy = pb.Task()
    copy.CopyFrom(task)
    if history_length is not None:
        keep = list(copy.history)[-history_length:] if history_length > 0 else []
        del copy.history[:]
        copy.history.extend(keep)
    if not include_artifacts:
        del copy.artifacts[:]
    return copy


# -- page tokens ---------------------------------------------------------------------------


def page_token(order: int, secret: bytes) -> str:
    """An opaque token for the page after the task created `order`-th."""
    payload = str(order).encode("ascii")
    mac = hmac.new(secret, payload, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(mac + payload).decode("ascii").rstrip("=")


def page_order(token: str, secret: bytes) -> int | None:
    """The creation order a token of `page_token` carries; None when it is not one."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (ValueError, TypeError):
        return None
    mac, payload = raw[:16], raw[16:]
    expected = hmac.new(secret, payload, hashlib.sha256).digest()[:16]
    if len(mac) != 16 or not hmac.compare_digest(mac, expected) or not payload.isdigit():
        return None
    return int(payload)
