"""google-adk's agent for the daemon benchmark (loaded by `adk api_server`)."""

from . import agent as agent
