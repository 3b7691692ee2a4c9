"""Orchestration helpers: `sequential`, `parallel` and `loop` over agents.

They use each agent's conversation (`prompt`), so turns sent to one agent stay FIFO;
concurrency comes from independent agents.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from adk_actors.agents import AgentRef, prompt
from adk_actors.agents.api import AgentLike
from providers.content import Content
from providers.errors import AdkError
from supervision import Task, TaskFailed, TaskTimeout, wait_all


def _text(value: str | Content) -> str:
    return value.text_value() if isinstance(value, Content) else value


def sequential(
    agents: Sequence[AgentLike], message: str | Content, timeout: float = 60.0
) -> str | Content:
    """Feed each agent's answer to the next; returns the last answer."""
    if not agents:
        raise AdkError("empty_pipeline", "sequential needs at least one agent")
    value: str | Content = message
    for agent in agents:
        value = prompt(agent, value, timeout=timeout)
    return value


def _attempt(agent: AgentLike, message: str | Content, timeout: float) -> tuple[str, Any]:
    # returned, not raised: a task crash would keep only the exception's class name
    try:
        return ("ok", prompt(agent, message, timeout=timeout))
    except AdkError as error:
        return ("error", error)


def parallel(
    agents: Sequence[AgentLike], message: str | Content, timeout: float = 60.0
) -> list[tuple[AgentRef, Any]]:
    """Ask every agent at once, in monitored tasks, under one overall timeout.

    Returns ``[(agent_ref, result)]`` in input order; a failed or timed-out item's
    result is an `AdkError` (``timeout`` when the overall deadline passed first).
    """
    deadline = time.monotonic() + timeout
    refs = [agent if isinstance(agent, AgentRef) else AgentRef(agent) for agent in agents]
    tasks = [Task.start(_attempt, ref, message, timeout, deadline=deadline) for ref in refs]
    results: list[tuple[AgentRef, Any]] = []
    for ref, outcome in zip(refs, wait_all(tasks, deadline), strict=True):
        if isinstance(outcome, TaskTimeout | TaskFailed):
            reason = "timeout" if isinstance(outcome, TaskTimeout) else "worker_failed"
            results.append((ref, AdkError(reason, f"{ref.name} did not answer in time")))
        else:
            results.append((ref, outcome[1]))  # the answer, or the AdkError the prompt raised
    return results


def loop(
    writer: AgentLike,
    reviewer: AgentLike,
    message: str | Content,
    max_iterations: int = 3,
    timeout: float = 60.0,
) -> str | Content:
    """Writer drafts, reviewer reviews, writer revises with the review, until the
    reviewer answers exactly ``APPROVED`` (after trimming, any case) or
    `max_iterations` drafts were written; returns the latest draft either way."""
    if (
        isinstance(max_iterations, bool)
        or not isinstance(max_iterations, int)
        or max_iterations < 1
    ):
        raise AdkError("invalid_max_iterations", "max_iterations is an int >= 1")
    draft = prompt(writer, message, timeout=timeout)
    for iteration in range(max_iterations):
        review = prompt(reviewer, draft, timeout=timeout)
        if _text(review).strip().casefold() == "approved":
            return draft
        if iteration + 1 == max_iterations:
            break
        draft = prompt(writer, review, timeout=timeout)
    return draft
