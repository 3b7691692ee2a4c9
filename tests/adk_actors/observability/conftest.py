"""The real OpenTelemetry SDK with an in-memory exporter, on the global provider.

A provider can be set globally once per process (and another test module may have
set one at import): the exporter is added to whatever SDK provider is global, or an
SDK provider is installed when there is none yet.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.helpers import global_sdk_provider

_exporter: InMemorySpanExporter | None = None


def _global_exporter() -> InMemorySpanExporter:
    global _exporter
    if _exporter is None:
        provider = global_sdk_provider()
        _exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
    return _exporter


@pytest.fixture
def spans() -> InMemorySpanExporter:
    exporter = _global_exporter()
    exporter.clear()
    return exporter
