"""The facade (`import adk_actors as adk`) exposes what its documentation promises."""

from __future__ import annotations

import adk_actors as adk


def test_providers_expose_the_scripted_provider_next_to_generate_and_stream() -> None:
    """DESIGN §5's facade: `adk.providers` has `ScriptedProvider` beside `generate`."""
    for name in ("ScriptedProvider", "generate", "stream", "stream_content", "agenerate"):
        assert name in adk.providers.__all__
        assert getattr(adk.providers, name) is not None
    scripted = adk.providers.ScriptedProvider([{"text": "hello"}])
    answer = adk.providers.generate({"provider": scripted}, [adk.content.from_text("hi")])
    assert answer == "hello"
