"""``GET /dev/v1/observability``: a bounded, content-free snapshot of the runtime.

The metric catalog's totals (records, sums, label series in use and overflowed per
instrument: never a label value), the kernel's counters (processes, timers, pool
threads) and which tracer provider is installed. Fixed keys only: the answer's size
does not grow with what the daemon served.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from adk_actors.daemon.views import json_response
from adk_actors.observability import default_metrics
from adk_actors.observability.semconv import MAPPING_VERSION
from supervision import kernel_stats

PATH = "/dev/v1/observability"


def snapshot() -> dict[str, Any]:
    """The body of the route (blocking: it walks the kernel's process table)."""
    provider = trace.get_tracer_provider()
    return {
        "schema_version": 1,
        "mapping_version": MAPPING_VERSION,
        "tracing": {"provider": type(provider).__name__[:64]},
        "metrics": default_metrics().snapshot(),
        "kernel": {key: int(value) for key, value in kernel_stats().items()},
        "content_captured": False,
    }


async def _observability(request: Request) -> Response:
    return json_response(await run_in_threadpool(snapshot))


ROUTES: list[BaseRoute] = [Route(PATH, _observability, methods=["GET"])]
