"""What the span tests share: a span's gen-AI operation, by attribute or older name."""

from __future__ import annotations

from typing import Any

KIND_OF_LEGACY_NAME = {
    "adk.agent.turn": "invoke_agent",
    "adk.model.call": "chat",
    "adk.tool.call": "execute_tool",
}


def kind(span: Any) -> str | None:
    """The span's gen-AI operation (its attribute, or what its older name means)."""
    return span.attributes.get("gen_ai.operation.name") or KIND_OF_LEGACY_NAME.get(span.name)
