"""Queries over a task store's state (pure work on the state its server hands in):
ListTasks, the principal's tasks newest first, filtered, a page at a time under
``max_list_bytes`` (page tokens signed with the store's secret, `tasks_model`), and
the store's live counts."""

from __future__ import annotations

from a2a.types import a2a_pb2 as pb

from adk_actors.a2a import errors
from adk_actors.a2a import tasks_model as model
from adk_actors.a2a.server_options import MAX_PAGE_SIZE
from adk_actors.a2a.tasks_protocol import State


def list_page(scope: str, request: pb.ListTasksRequest, state: State) -> pb.ListTasksResponse:
    """The page of `scope`'s tasks `request` asks for (-32602 for a bad size or token)."""
    page_size = request.page_size if request.HasField("page_size") else state.options.list_page_size
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise errors.invalid_params(f"pageSize is 1..{MAX_PAGE_SIZE}")
    before = None
    if request.page_token:
        before = model.page_order(request.page_token, state.secret)
        if before is None:
            raise errors.invalid_params("invalid pageToken")
    history_length = request.history_length if request.HasField("history_length") else None
    include_artifacts = request.HasField("include_artifacts") and request.include_artifacts
    after_time = (
        request.status_timestamp_after if request.HasField("status_timestamp_after") else None
    )
    matching = [
        entry
        for entry in reversed(state.tasks.values())  # newest first: creation order
        if entry.scope == scope
        and (not request.context_id or entry.task.context_id == request.context_id)
        and (not request.status or entry.task.status.state == request.status)
        and (
            after_time is None
            or entry.task.status.timestamp.ToNanoseconds() >= after_time.ToNanoseconds()
        )
    ]
    remaining = [
        (entry.task, entry.sizes, entry.order)
        for entry in matching
        if before is None or entry.order < before
    ]
    response = pb.ListTasksResponse(page_size=page_size, total_size=len(matching))
    bounds = (state.options.max_list_bytes, state.secret)
    model.fill_page(response, remaining, history_length, include_artifacts, *bounds)
    return response


def store_stats(state: State) -> dict[str, int]:
    """The live counts `TaskStore.stats` answers: ``tasks``, ``active``, ``subscribers``,
    ``runs`` (the ledger's)."""
    return {
        "tasks": len(state.tasks),
        "active": len(state.tasks) - len(state.settled),
        "subscribers": sum(len(entry.subscribers) for entry in state.tasks.values()),
        "runs": len(state.ledger),
    }
