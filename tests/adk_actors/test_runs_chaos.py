"""Chaos: 2,000 stable runs under admission limits while their invocation workers, run
actors and agents are killed and runs are cancelled at random. Every run still ends
in exactly one terminal outcome, every permit returns, and the supervisors, kernel
processes and threads come back to their baseline."""

from __future__ import annotations

import random
import threading
import time

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors import admission
from adk_actors.app import RUN_SUPERVISOR
from adk_actors.runner.request import run_name
from supervision import DynamicSupervisor
from tests.helpers import wait_until

RUNS = 2_000
AGENTS = 8
BATCH = 50  # at most 100 ended runs are retained: wait before they are evicted
ADMISSION = {
    "global_limit": 12,
    "default_agent_limit": 3,
    "overflow": "queue",
    "max_queue": 4_096,
    "default_queue_timeout": 60.0,
}


class _Chaos:
    """Kills and cancels at random until told to stop; counts what it did."""

    def __init__(self, agents: list[adk.AgentRef], seed: int) -> None:
        self.agents = agents
        self.random = random.Random(seed)
        self.turns: list[sv.Pid] = []  # invocation workers, as their models saw them
        self.runs: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.done = {"turn": 0, "actor": 0, "agent": 0, "cancel": 0}
        self.last_agent_kill = 0.0

    def model(self, history, tools):
        with self.lock:
            self.turns.append(sv.self_pid())
        # one call in ten outlasts a cancel's 250 ms grace, so cancels can win
        slow = self.random.random() < 0.1
        delay = self.random.uniform(0.3, 0.5) if slow else self.random.uniform(0.001, 0.02)
        return {"text": history[-1].text_value(), "delay": delay}

    def loop(self) -> None:
        while not self.stop.wait(self.random.uniform(0.0005, 0.003)):
            with self.lock:
                turns, runs = list(self.turns[-50:]), list(self.runs[-50:])
            roll = self.random.random()
            if roll < 0.4 and turns:
                sv.exit(self.random.choice(turns), "kill")
                self.done["turn"] += 1
            elif roll < 0.6 and runs:
                actor = sv.whereis(run_name(self.random.choice(runs)))
                if actor is not None:
                    sv.exit(actor, "kill")
                    self.done["actor"] += 1
            elif roll < 0.8 and runs:
                try:
                    adk.runs.cancel(self.random.choice(runs), "chaos")
                    self.done["cancel"] += 1
                except adk.AdkError:
                    pass  # already over, or gone
            elif time.monotonic() - self.last_agent_kill > 0.25:  # within restart intensity
                pid = self.random.choice(self.agents).pid
                if pid is not None:
                    sv.exit(pid, "kill")
                    self.done["agent"] += 1
                    self.last_agent_kill = time.monotonic()


def _expected(outcome, message: str) -> bool:
    if isinstance(outcome, adk.Completed):
        return outcome.output == message
    if isinstance(outcome, adk.Cancelled):
        return outcome.reason == "chaos"
    if isinstance(outcome, adk.Failed):
        reason = outcome.reason
        kind = reason[0] if isinstance(reason, tuple) else reason
        return kind in ("invocation_worker_exit", "run_actor_exit", "noproc", "admission_failed")
    return False


@pytest.mark.timeout(600)
def test_two_thousand_runs_survive_random_kills():
    adk.stop()
    adk.start(admission_control=ADMISSION)
    sessions = adk.sessions.InMemorySessionService()
    chaos = _Chaos([], seed=7)
    agents = [
        adk.spawn_agent(
            f"Chaos{n}",
            {
                "provider": adk.ScriptedProvider(fn=chaos.model),
                # the kills stay within each agent's own restart budget
                "restart_intensity": {"intensity": 100, "period": 5.0},
            },
        )
        for n in range(AGENTS)
    ]
    chaos.agents = agents
    runners = [
        adk.Runner(
            agent,
            "chaos",
            sessions,
            run_timeout=60.0,
            admission_control={"overflow": "queue", "queue_timeout": 60.0},
        )
        for agent in agents
    ]
    # one quiet run per agent first, so every pool has its threads before the baseline
    for n, runner in enumerate(runners):
        adk.runs.wait(adk.runs.start(runner, "u", f"warm{n}", "warm", retention=0.5), 30)
    wait_until(lambda: DynamicSupervisor.count_children(RUN_SUPERVISOR)["active"] == 0, 30)
    baseline_processes = sv.kernel_stats()["processes"]
    baseline_threads = threading.active_count()

    outcomes: dict[str, tuple[object, str]] = {}
    chaos_thread = threading.Thread(target=chaos.loop, name="chaos")
    chaos_thread.start()
    try:
        for first in range(0, RUNS, BATCH):
            batch = []
            for n in range(first, first + BATCH):
                message = f"message {n}"
                run_id = adk.runs.start(runners[n % AGENTS], "u", f"s{n}", message, retention=5.0)
                batch.append((run_id, message))
                with chaos.lock:
                    chaos.runs.append(run_id)
            for run_id, message in batch:
                outcome = adk.runs.wait(run_id, timeout=120)
                assert adk.runs.wait(run_id, timeout=5) == outcome  # one terminal, always
                outcomes[run_id] = (outcome, message)
    finally:
        chaos.stop.set()
        chaos_thread.join(10)

    assert len(outcomes) == RUNS  # every run ended, with a unique id
    unexpected = [o for o, message in outcomes.values() if not _expected(o, message)]
    assert unexpected == []
    kinds = {type(o).__name__ for o, _ in outcomes.values()}
    assert {"Completed", "Failed", "Cancelled"} <= kinds  # the chaos really happened
    assert min(chaos.done.values()) > 0, chaos.done

    def settled() -> bool:
        status = admission.status()
        return status["active"] == 0 and status["queued"] == 0

    wait_until(settled, timeout=60)  # every permit came back
    wait_until(lambda: DynamicSupervisor.count_children(RUN_SUPERVISOR)["active"] == 0, 60)
    wait_until(lambda: adk.runs.stats()["retained"] == 0, 60)
    assert adk.runs.stats()["pending_handoffs"] == 0
    wait_until(lambda: sv.kernel_stats()["processes"] <= baseline_processes, 60)
    # killed sync work finishes its sleep and returns its thread; pools keep theirs
    wait_until(lambda: threading.active_count() <= baseline_threads + 8, 60)
    completed = [(o, m) for o, m in outcomes.values() if isinstance(o, adk.Completed)]
    sample = random.Random(3).sample(completed, min(50, len(completed)))
    for _outcome, message in sample:
        session_id = "s" + message.split()[1]
        finals = [e for e in sessions.get_session("chaos", "u", session_id).events if e.is_final]
        assert [e.text() for e in finals] == [message]
    sessions.close()
