"""Spawn-time validation of an agent tree, under one 2-second deadline.

Walks the declared sub-agents (and theirs, asking each running agent) and refuses:
a child named like the root (``self_reference``), a name reached twice
(``duplicate_name``), a loop back into the path (``cycle``), more than 256 agents or
a depth above 64 (``("tree_limit_exceeded", "max_nodes" | "max_depth")``), a child
that is not running (``("sub_agent_not_found", name)``) and a tree that does not
answer in time (``agent_tree_validation_timeout``).
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Iterable

from adk_actors.agents.calls import agent_info
from providers.errors import AdkError

MAX_NODES = 256
MAX_DEPTH = 64
DEADLINE_SECONDS = 2.0


def _normal(name: str) -> str:
    return unicodedata.normalize("NFC", name)


def validate_tree(
    root: str, children: Iterable[str], deadline_seconds: float = DEADLINE_SECONDS
) -> None:
    deadline = time.monotonic() + deadline_seconds
    root_key = _normal(root)
    seen = {root_key}
    # depth-first with the path, so a cycle and a duplicate are told apart
    stack: list[tuple[str, int, tuple[str, ...]]] = [
        (child, 1, (root_key,)) for child in reversed(list(children))
    ]
    while stack:
        name, depth, path = stack.pop()
        key = _normal(name)
        if key == root_key and depth == 1:
            raise AdkError("self_reference", f"{root} cannot be its own sub-agent")
        if key in path:
            raise AdkError("cycle", f"{name} delegates back into its own ancestry")
        if key in seen:
            raise AdkError("duplicate_name", f"{name} appears twice in the agent tree")
        seen.add(key)
        if len(seen) > MAX_NODES:
            raise AdkError(
                ("tree_limit_exceeded", "max_nodes"), f"at most {MAX_NODES} agents in a tree"
            )
        if depth > MAX_DEPTH:
            raise AdkError(
                ("tree_limit_exceeded", "max_depth"), f"a tree is at most {MAX_DEPTH} deep"
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AdkError(
                "agent_tree_validation_timeout", "the agent tree did not answer within 2 s"
            )
        try:
            info = agent_info(name, timeout=remaining)
        except AdkError:
            raise AdkError(
                ("sub_agent_not_found", name), "spawn sub-agents before the agents that use them"
            ) from None
        except Exception:
            raise AdkError(
                "agent_tree_validation_timeout", "the agent tree did not answer within 2 s"
            ) from None
        for grandchild in reversed(info.get("sub_agents", [])):
            stack.append((grandchild, depth + 1, (*path, key)))
