"""The ADK domain layer and its public facade (DESIGN.md §5).

Available now: the content model (`content`, `Content`), `AdkError`, the provider
calls (`providers`), and `Event`s. Agents, the Runner, runs and sessions come with
the next issues.
"""

from adk_actors import events
from adk_actors.events import Event, EventActions
from providers import AdkError, Content, ScriptedProvider, content, redact
from providers import protocol as _protocol

providers = _protocol
"""`providers.generate/stream/stream_content/capabilities/validate_config`."""

__all__ = [
    "AdkError",
    "Content",
    "Event",
    "EventActions",
    "ScriptedProvider",
    "content",
    "events",
    "providers",
    "redact",
]
