"""Issue 16 §2: ``GET /dev/v1/observability`` shows the token, admission and restart
instruments moving (totals only: never an agent's or a supervisor's name), and the
pool's saturation in its kernel counters."""

from __future__ import annotations

from typing import Any

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors import admission
from adk_actors.daemon import routes_observability
from adk_actors.daemon.listener import stop_listener
from providers.errors import AdkError
from providers.fake_gemini import FakeGemini
from tests.daemon.conftest import start_dev_server
from tests.helpers import wait_dead, wait_until


class _Crasher(sv.GenServer):
    def init(self, args: Any) -> None:
        return None

    def handle_cast(self, msg: Any, state: None) -> Any:
        raise RuntimeError("crash on purpose")


def _instruments(client: Any) -> dict[str, dict[str, Any]]:
    answer = client.get(routes_observability.PATH)
    assert answer.status_code == 200
    assert "SECRET" not in answer.text
    instruments: dict[str, dict[str, Any]] = answer.json()["metrics"]["instruments"]
    return instruments


def test_token_admission_and_restart_instruments_move_in_the_snapshot():
    server, listener = start_dev_server()
    try:
        before = _instruments(server.client)
        ctl = admission.start_link({"global_limit": 1, "default_agent_limit": 1})
        with admission.acquire("SECRET-AGENT", server=ctl):
            with pytest.raises(AdkError):
                admission.acquire("SECRET-AGENT", server=ctl, overflow="reject")
            with pytest.raises(AdkError):  # queued, then expired: in and out of the queue
                admission.acquire("SECRET-AGENT", server=ctl, overflow="queue", timeout=0.05)
        sup = sv.Supervisor.start_link(
            [sv.ChildSpec("SECRET-CHILD", lambda: _Crasher.start_link(None))],
            name="SECRET-SUPERVISOR",
        )
        (child,) = sv.Supervisor.which_children(sup)
        assert child.pid is not None
        sv.cast(child.pid, "crash")
        wait_dead(child.pid)
        wait_until(lambda: sv.Supervisor.which_children(sup)[0].pid not in (child.pid, None))
        sv.stop(sup)
        sv.stop(ctl)
        with FakeGemini() as fake:  # 3 prompt and 2 candidate tokens
            fake.reply_text("SECRET-ANSWER")
            agent = adk.spawn_agent(
                "SECRET_GEMINI",
                {"provider": "gemini", "model": "m", "api_key": "k", "base_url": fake.base_url},
            )
            assert adk.prompt(agent, "SECRET-PROMPT") == "SECRET-ANSWER"

        after = _instruments(server.client)
        rejected = after["adk.admission.rejected"]
        assert rejected["count"] == before["adk.admission.rejected"]["count"] + 2
        queue = after["adk.admission.queue"]
        assert queue["kind"] == "updown"
        assert queue["count"] == before["adk.admission.queue"]["count"] + 2  # +1, then -1
        assert queue["sum"] == before["adk.admission.queue"]["sum"]
        assert after["adk.restarts"]["count"] == before["adk.restarts"]["count"] + 1
        tokens = after["adk.tokens"]
        assert tokens["count"] == before["adk.tokens"]["count"] + 2  # input, output
        assert tokens["sum"] == before["adk.tokens"]["sum"] + 5
        kernel = server.client.get(routes_observability.PATH).json()["kernel"]
        assert {"task_threads", "task_threads_busy", "task_threads_abandoned", "task_queue"} <= set(
            kernel
        )
    finally:
        server.client.close()
        stop_listener(listener)
