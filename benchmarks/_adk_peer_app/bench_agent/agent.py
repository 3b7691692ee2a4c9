"""The peer's agent: an offline `BaseLlm` with a fixed delay, and quiet logs.

``BENCH_PEER_DELAY`` (seconds, default 0) is awaited before every answer;
``BENCH_PEER_CHUNKS`` (default 1) is how many partial responses a streaming request
gets before the final one, the same shape as our scripted ``{"stream": [...]}`` step.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

DELAY = float(os.environ.get("BENCH_PEER_DELAY", "0"))
CHUNKS = int(os.environ.get("BENCH_PEER_CHUNKS", "1"))

for _name in ("google_adk", "google.adk", "uvicorn.access"):
    logging.getLogger(_name).setLevel(logging.ERROR)


def _text(text: str) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text=text)])


class OfflineLlm(BaseLlm):
    """Answers "ok" after `DELAY`; streamed as `CHUNKS` partials then the whole text."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if DELAY:
            await asyncio.sleep(DELAY)
        if stream and CHUNKS > 1:
            for n in range(CHUNKS):
                yield LlmResponse(content=_text(f"c{n} "), partial=True)
        yield LlmResponse(content=_text("ok"))


root_agent = LlmAgent(name="bench_agent", model=OfflineLlm(model="offline"))
