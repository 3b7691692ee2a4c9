"""The real OpenTelemetry SDK with an in-memory exporter, on the global provider.

A provider can be set globally once per process (and another test module may have
set one at import): the exporter is added to whatever SDK provider is global, or an
SDK provider is installed when there is none yet.
"""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_exporter: InMemorySpanExporter | None = None


def _global_exporter() -> InMemorySpanExporter:
    global _exporter
    if _exporter is None:
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            trace.set_tracer_provider(TracerProvider())
            provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider), "the global provider is not the SDK's"
        _exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
    return _exporter


@pytest.fixture
def spans() -> InMemorySpanExporter:
    exporter = _global_exporter()
    exporter.clear()
    return exporter
