"""Events: the frozen, versioned, JSON-safe entries of a session's history."""

from adk_actors.events.event import (
    EVENT_SCHEMA_VERSION,
    Event,
    EventActions,
    EventError,
    Pause,
    PolicyDecision,
    checked,
    decode,
    encode,
    from_dict,
    to_dict,
    without_secrets,
)

__all__ = [
    "EVENT_SCHEMA_VERSION",
    "Event",
    "EventActions",
    "EventError",
    "Pause",
    "PolicyDecision",
    "checked",
    "decode",
    "encode",
    "from_dict",
    "to_dict",
    "without_secrets",
]
