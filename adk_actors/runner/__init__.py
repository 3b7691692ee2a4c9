"""The event Runner: one invocation per call, every step stored in a session."""

from adk_actors.runner.runner import Runner

__all__ = ["Runner"]
