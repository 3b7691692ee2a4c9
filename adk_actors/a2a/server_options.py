"""The A2A server's options: one msgspec struct, decoded by `server_options`.

`A2AServerOptions` holds every bound of the A2A endpoint and its task store
(`adk_actors.a2a.tasks`). The defaults are the spec's; every number has a floor and a
hard ceiling, a bool is never a number, and a bad value fails as
``AdkError(("invalid_a2a_server_option", key))`` naming the key (unknown keys:
``("invalid_a2a_server_option", ("unknown_keys", [names...]))``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from providers.errors import decode_options

REASON = "invalid_a2a_server_option"
MAX_PAGE_SIZE = 100
"""The largest ListTasks page, whatever the request asks."""
MAX_PARTS_PER_MESSAGE = 64
"""What the wire accepts in one message (`wire.MAX_PARTS`): the option can only lower it."""

Seconds = Annotated[float, msgspec.Meta(ge=0.01, le=3600.0)]
PayloadBytes = Annotated[int, msgspec.Meta(ge=256, le=64 << 20)]
Count = Annotated[int, msgspec.Meta(ge=1, le=10_000)]


class A2AServerOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An A2A server's checked bounds (times in seconds); build one with `server_options`.

    Tasks: `task_timeout` (one task's run, then FAILED), `retention` (a terminal task
    is kept this long), `max_tasks` (retained, oldest terminal evicted first),
    `max_active` (non-terminal tasks), `max_events` (per task replay window for
    ``Last-Event-ID``), `run_max_buffered_events` (the backing run's buffer).
    Streams: `max_subscribers_per_task`, `max_subscriber_queue` (unacknowledged events
    before a slow subscriber is detached). Payloads: `max_input_bytes` (HTTP body),
    `max_message_bytes` (one message), `max_task_bytes` (a task's rendering),
    `max_event_bytes` (one stream event), `max_artifact_bytes`, `max_history_bytes`,
    `max_history_messages`, `max_artifacts`, `max_parts_per_artifact`,
    `max_parts_per_message` (at most 64: the content model's own per-message limit).
    Lists: `list_page_size` (the default page; at most 100), `max_list_bytes` (a
    ListTasks page ends early, with a ``nextPageToken``, before its tasks pass this;
    a page always holds at least one task).
    """

    task_timeout: Seconds = 60.0
    retention: Annotated[float, msgspec.Meta(ge=0.0, le=86_400.0)] = 300.0
    max_tasks: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1000
    max_active: Count = 100
    max_events: Annotated[int, msgspec.Meta(ge=2, le=10_000)] = 256
    max_subscribers_per_task: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 64
    max_subscriber_queue: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 8
    max_input_bytes: Annotated[int, msgspec.Meta(ge=1024, le=64 << 20)] = 1_048_576
    max_message_bytes: PayloadBytes = 524_288
    max_task_bytes: Annotated[int, msgspec.Meta(ge=4096, le=256 << 20)] = 4_194_304
    max_event_bytes: Annotated[int, msgspec.Meta(ge=1024, le=64 << 20)] = 2_097_152
    max_artifact_bytes: Annotated[int, msgspec.Meta(ge=512, le=64 << 20)] = 2_097_152
    max_history_bytes: Annotated[int, msgspec.Meta(ge=512, le=64 << 20)] = 2_097_152
    max_history_messages: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 128
    max_artifacts: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 128
    max_parts_per_artifact: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 256
    max_parts_per_message: Annotated[int, msgspec.Meta(ge=1, le=MAX_PARTS_PER_MESSAGE)] = 64
    list_page_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_PAGE_SIZE)] = 50
    max_list_bytes: Annotated[int, msgspec.Meta(ge=4096, le=64 << 20)] = 4 << 20
    run_max_buffered_events: Annotated[int, msgspec.Meta(ge=16, le=100_000)] = 256


def server_options(
    options: Mapping[str, Any] | A2AServerOptions | None = None,
) -> A2AServerOptions:
    """The checked `A2AServerOptions` of `options` (omitted keys take their defaults)."""
    return decode_options(A2AServerOptions, options, REASON, what="A2A server option")
