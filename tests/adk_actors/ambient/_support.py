"""Ambient test helpers: an agent whose scripted model counts its calls."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import adk_actors as adk
from adk_actors import providers

_names = itertools.count()


class Model:
    """A scripted model: `delay` seconds per call, the first `failures` calls fail;
    counts its calls."""

    def __init__(self, delay: float = 0.0, failures: int = 0) -> None:
        self.delay = delay
        self.failures = failures
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, history: Any, tools: Any) -> dict[str, Any]:
        with self.lock:
            self.calls += 1
            n = self.calls
        if n <= self.failures:
            return {"error": "scripted_failure"}
        return (
            {"text": f"answer {n}", "delay": self.delay} if self.delay else {"text": f"answer {n}"}
        )


class Setup:
    def __init__(self, model: Model) -> None:
        self.model = model
        self.sessions = adk.sessions.InMemorySessionService()
        agent = adk.spawn_agent(
            f"Ambient{next(_names)}", {"provider": providers.ScriptedProvider(fn=model)}
        )
        self.runner = adk.Runner(agent, "ambient_app", self.sessions)


def make(delay: float = 0.0, failures: int = 0) -> Setup:
    return Setup(Model(delay, failures))


def per_event(user: str = "worker", **extra: Any) -> dict[str, Any]:
    return {"mode": "per_event", "user_id": user, **extra}


def trigger(setup: Setup, **options: Any) -> str:
    name = f"trigger-{next(_names)}"
    options.setdefault("session_policy", per_event())
    adk.ambient.register_trigger(name, setup.runner, **options)
    return name


def event(key: str, **extra: Any) -> dict[str, Any]:
    return {"payload": f"work on {key}", "idempotency_key": key, **extra}


def wait_until(check: Callable[[], bool], timeout: float = 3.0) -> None:
    until = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < until, "condition not reached in time"
        time.sleep(0.005)


def idle(name: str) -> bool:
    view = adk.ambient.trigger_status(name)
    return view["active"] == 0 and view["queued"] == 0
