"""google-adk's agent for the evaluation benchmark (loaded by `AgentEvaluator`)."""

from . import agent as agent
