"""What an A2A task holds and how it changes: pure functions on `pb.Task` and its bounds.

The task store (`tasks_server`) keeps one `pb.Task` per task and changes it only
through these functions, so every rule of the task's content is here: history is the
user messages and the agent's final message, the oldest dropped past
``max_history_messages`` / ``max_history_bytes`` (and ``max_task_bytes``); a completed
task holds one text artifact, and an answer past ``max_artifact_bytes`` /
``max_parts_per_artifact`` / ``max_artifacts`` makes it FAILED instead (nothing of it
kept); a pause becomes an INPUT_REQUIRED status message whose data part says what the
run waits for, never its arguments; a failure's status message names its reason only.
Sizes are tracked, not re-rendered: `TaskSizes` keeps each part's compact-JSON bytes
as the task changes (an upper bound of its rendering), so trimming and the bounds of
``max_task_bytes`` and ``max_list_bytes`` cost sums, whatever the payloads. Page tokens
are opaque: the creation order of the last task of a page, signed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections import deque
from collections.abc import Sequence
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


class TaskSizes:
    """The compact-JSON byte sizes of a task's parts, kept as the task changes so its
    bounds are checked by sums, never by re-rendering it: one size per history message
    (oldest first, as `pb.Task.history`), the artifacts' and the status's."""

    __slots__ = ("artifacts", "history", "history_total", "status")

    def __init__(self) -> None:
        self.history: deque[int] = deque()
        self.history_total = 0
        self.artifacts = 0
        self.status = 0

    def task_bytes(self, history_length: int | None = None, artifacts: bool = True) -> int:
        """An upper bound of the task's rendering (its last `history_length` messages;
        its artifacts when `artifacts`)."""
        if history_length is None or history_length >= len(self.history):
            history, count = self.history_total, len(self.history)
        else:
            count = max(history_length, 0)
            history = sum(list(self.history)[len(self.history) - count :]) if count else 0
        return TASK_OVERHEAD + self.status + history + count + (self.artifacts if artifacts else 0)


TASK_OVERHEAD = 512
"""What a task's rendering adds to its parts' sizes, at most: its ids (a contextId is
up to 128 characters), its status's state and timestamp, member names, punctuation."""
MESSAGE_IDS = 256
"""What the store's ids (taskId, contextId) add to a user message, at most."""
EVENT_OVERHEAD = 512
"""What an artifact event adds to its artifact, at most (taskId, contextId, lastChunk)."""


def new_task(
    task_id: str, context_id: str, message: pb.Message, message_bytes: int
) -> tuple[pb.Task, TaskSizes]:
    """A SUBMITTED task whose history is the user's first message (of `message_bytes`
    before the store's ids were set), and its sizes."""
    task = pb.Task(id=task_id, context_id=context_id)
    sizes = TaskSizes()
    task.history.append(message)
    sizes.history.append(message_bytes + MESSAGE_IDS)
    sizes.history_total = sizes.history[0]
    set_status(task, sizes, pb.TASK_STATE_SUBMITTED)
    return task, sizes


def set_status(
    task: pb.Task, sizes: TaskSizes, state: int, message: pb.Message | None = None
) -> None:
    """Put `task` in `state` now, with `message` as its status message (or none)."""
    status = pb.TaskStatus(state=state)  # type: ignore[arg-type]
    if message is not None:
        status.message.CopyFrom(message)
    status.timestamp.GetCurrentTime()
    task.status.CopyFrom(status)
    sizes.status = wire.json_bytes(status) if message is not None else 0


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


def add_history(
    task: pb.Task,
    sizes: TaskSizes,
    message: pb.Message,
    message_bytes: int,
    options: A2AServerOptions,
) -> None:
    """Append `message` (of `message_bytes`) to the history, then drop the oldest
    messages past the bounds."""
    task.history.append(message)
    sizes.history.append(message_bytes)
    sizes.history_total += message_bytes
    trim_history(task, sizes, options)


def trim_history(task: pb.Task, sizes: TaskSizes, options: A2AServerOptions) -> None:
    """Drop the oldest history messages until the count, the history's bytes and the
    task's bytes are within their bounds (the newest message is always kept)."""
    limit = task_limit(options)
    drop = 0
    total, count = sizes.history_total, len(sizes.history)
    while count - drop > 1 and (
        count - drop > options.max_history_messages
        or total > options.max_history_bytes
        or sizes.task_bytes() - (sizes.history_total - total) - drop > limit
    ):
        total -= sizes.history[drop]
        drop += 1
    if drop:
        del task.history[:drop]
        for _ in range(drop):
            sizes.history.popleft()
        sizes.history_total = total


def task_limit(options: A2AServerOptions) -> int:
    """A task's bytes at most: ``max_task_bytes``, and it fits one snapshot event."""
    return min(options.max_task_bytes, options.max_event_bytes - 16)


def output_text(output: str | Content) -> str:
    """The text of a completed run's output."""
    if isinstance(output, str):
        return output
    return output.text_value()


def completion_artifact(
    text: str, task: pb.Task, options: A2AServerOptions
) -> tuple[pb.Artifact, int] | None:
    """The artifact holding the final answer and its size (rendered once), or None
    when it breaks a bound."""
    artifact = wire.text_artifact(text)
    if len(task.artifacts) >= options.max_artifacts or len(artifact.parts) > (
        options.max_parts_per_artifact
    ):
        return None
    size = wire.json_bytes(artifact)
    if size > options.max_artifact_bytes or size + EVENT_OVERHEAD > options.max_event_bytes:
        return None
    return artifact, size


def fits_task(sizes: TaskSizes, options: A2AServerOptions) -> bool:
    """Whether the task is within ``max_task_bytes`` (and fits one snapshot event)."""
    return sizes.task_bytes() <= task_limit(options)


def human_answer(value: Any) -> Any:
    """A follow-up's value as the paused run's answer: a JSON object as is (e.g. a tool
    confirmation's ``{"confirmed": true}``), anything else as ``{"answer": value}``."""
    return value if isinstance(value, dict) else {"answer": value}


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


# -- pages ---------------------------------------------------------------------------------


def fill_page(
    response: pb.ListTasksResponse,
    candidates: Sequence[tuple[pb.Task, TaskSizes, int]],
    history_length: int | None,
    include_artifacts: bool,
    max_bytes: int,
    secret: bytes,
) -> None:
    """Fill a ListTasks page from `candidates` (task, sizes, creation order; newest
    first): at most ``response.page_size`` tasks and, by their tracked sizes,
    `max_bytes` (at least one task); a ``next_page_token`` when some are left."""
    budget, taken = max_bytes, 0
    for task, sizes, _ in candidates[: response.page_size]:
        size = sizes.task_bytes(history_length, include_artifacts) + 1
        if taken and size > budget:
            break
        budget -= size
        response.tasks.append(public_task(task, history_length, include_artifacts))
        taken += 1
    if taken < len(candidates):
        response.next_page_token = page_token(candidates[taken - 1][2], secret)


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
