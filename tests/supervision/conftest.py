"""Kernel test fixtures."""

from __future__ import annotations

import pytest

import supervision as sv


@pytest.fixture(params=["pooled", "thread"])
def each_dispatcher(request, monkeypatch):
    """Run a test once with pooled servers and once with a pykka thread per server."""
    monkeypatch.setattr(sv.GenServer, "dispatcher", request.param)
    return request.param
