"""The in-process target: the real runtime in this process, scripted agents whose model
latency follows the scenario, and the kinds of work a scenario names.

``runs``: stable runs (`adk.runs`), one session each. ``sessions``: stable runs over a
bounded set of shared sessions (in memory or in LMDB). Their sessions are checked and
deleted as the load goes on (`inprocess_sessions.SessionBook`). Runners take admission
permits (``overflow: queue``), as the daemon's do, so leaked permits can show. Facade
calls that block (start, status, lookups) run off the engine's loop (`run_blocking`). ``workflows``, ``ambient``, ``approvals``: the `Workload`s of
`adk_actors.stress.workloads`. Chaos kills run workers (the processes the model is
called from), invocation servers and agents (their supervisor restarts them) with the
kernel's ``kill`` exit signal. `close` settles, then checks the invariants of
the stress suites against the baselines taken after a warm-up.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from adk_actors import app as adk_app
from adk_actors import runs
from adk_actors.admission import status as admission_status
from adk_actors.agents import AgentRef, spawn_agent, stop_agent
from adk_actors.app import AGENT_SUPERVISOR, RUN_SUPERVISOR
from adk_actors.outcomes import Completed
from adk_actors.runner import Runner
from adk_actors.runner.request import run_name
from adk_actors.sessions import InMemorySessionService, LmdbSessionService
from adk_actors.stress import daemon_lifetime, invariants
from adk_actors.stress.inprocess_sessions import MAX_CHECKED_SESSIONS, SessionBook
from adk_actors.stress.latency import draw_delay
from adk_actors.stress.records import (
    ChaosAction,
    ChaosEvent,
    ChaosOutcome,
    InvariantResult,
    Outcome,
    chaos_event,
    outcome_of,
)
from adk_actors.stress.scenario import MIX_KINDS, Scenario
from adk_actors.stress.workloads import WORKLOADS, Workload
from adk_actors.tools import Tool, tool
from providers import Content, ScriptedProvider
from providers.content import FunctionResponsePart
from providers.errors import AdkError
from supervision import (
    DynamicSupervisor,
    Pid,
    default_task_supervisor,
    kernel_stats,
    self_pid,
    thread_pool_of,
    thread_pools,
    whereis,
)
from supervision import exit as exit_process
from supervision.aio import run_blocking
from supervision.logs import get_logger

_log = get_logger("adk_actors.stress")

APP_NAME = "stress"
USER_ID = "stress"
RUN_RETENTION = 1.0
"""Seconds an ended run stays retained: its waiter (registered right after the start)
and the cross-check of its terminal read it meanwhile."""
CROSS_CHECK_TIMEOUT = 5.0
MAX_SHARED_SESSIONS = 1024
MAX_WARM_UP = 32
RUNS_PER_SHARED_SESSION = 64
MAX_RUNS_PER_SESSION = 4096
MAX_PROBLEMS = 100
PERMIT_SAMPLES_FIRST = 8
PERMIT_SAMPLE_EVERY = 64
MAX_WORKERS_TRACKED = 256
SETTLE_TIMEOUT = 15.0
MAX_SETTLE_TIMEOUT = 600.0
SETTLE_POLL = 0.05
RESTART_WAIT = 1.0
_NUMBERING = re.compile(r"[-_]?\d+(?:_\d+)?$")
"""A thread name's numbering, left out when threads are counted by name."""
_AGENT_BUDGET = {"intensity": 1000, "period": 1.0}
"""Each agent's restart budget: chaos may kill agents often; the budget must not be
what fails the runs."""


@tool
def stress_tool(round: int) -> str:
    """A stress tool round: answers at once with the round number."""
    return f"round {round}"


class InProcessTarget:
    """Drives the runtime in this process (starting it if it is not running).
    `settle_timeout`: how long `close` waits for everything to return to its baseline
    before it checks."""

    def __init__(
        self,
        *,
        settle_timeout: float = SETTLE_TIMEOUT,
        runs_per_session: int = RUNS_PER_SHARED_SESSION,
        checked_sessions: int = MAX_CHECKED_SESSIONS,
    ) -> None:
        if not 0 < settle_timeout <= MAX_SETTLE_TIMEOUT:
            raise AdkError(
                "invalid_settle_timeout", f"settle_timeout is in (0, {MAX_SETTLE_TIMEOUT}]"
            )
        if not 1 <= runs_per_session <= MAX_RUNS_PER_SESSION:
            raise AdkError(
                ("invalid_stress_target", "runs_per_session"),
                f"runs_per_session is 1..{MAX_RUNS_PER_SESSION}",
            )
        if not 1 <= checked_sessions <= MAX_CHECKED_SESSIONS:
            raise AdkError(
                ("invalid_stress_target", "checked_sessions"),
                f"checked_sessions is 1..{MAX_CHECKED_SESSIONS}",
            )
        self._settle_timeout = settle_timeout
        self._runs_per_session = runs_per_session
        self._checked_sessions = checked_sessions
        self._scenario: Scenario | None = None
        self._owns_app = False
        self._data_dir: Path | None = None
        self._sessions: InMemorySessionService | LmdbSessionService | None = None
        self._agents: list[AgentRef] = []
        self._runners: list[Runner] = []
        self._workloads: dict[str, Workload] = {}
        self._rng = random.Random(0)
        self._rng_lock = threading.Lock()
        self._workers: deque[Pid] = deque(maxlen=MAX_WORKERS_TRACKED)
        self._live_runs: dict[str, None] = {}
        self._restarts = 0
        self._baseline_processes = 0
        self._baseline_threads = 0
        self._baseline_thread_kinds: Counter[str] = Counter()
        self._baseline_supervisors: dict[str, int] = {}
        self._reply_problems: list[str] = []
        self._completed = 0
        self._book: SessionBook | None = None
        self._started_runs = 0
        self._answered = 0
        self._unanswered: Counter[str] = Counter()
        self._disagreed: list[str] = []
        self._permit_peak = 0
        self._permit_samples = 0
        """Active permits read from inside a model call of kind runs or sessions."""
        self._model_calls = itertools.count()

    # -- the Target protocol -----------------------------------------------------------------

    async def open(self, scenario: Scenario) -> None:
        """Start the runtime (unless running), the session store and the agents; warm
        every agent up, take the baselines, then open the workloads."""
        self._scenario = scenario
        self._rng = random.Random(scenario.seed)
        if not adk_app.running():
            adk_app.start()
            self._owns_app = True
        try:
            self._sessions = self._open_sessions(scenario)
            tools: Sequence[Tool] = (stress_tool,) if scenario.tool_calls else ()
            provider = ScriptedProvider(fn=self._model, inline=True)
            token = uuid.uuid4().hex[:8]
            for n in range(scenario.agents):
                config = {"provider": provider, "restart_intensity": _AGENT_BUDGET}
                self._agents.append(spawn_agent(f"Stress_{token}_{n}", config, tools))
            admission = {"overflow": "queue", "queue_timeout": scenario.run_timeout_s}
            self._runners = [
                Runner(
                    agent,
                    APP_NAME,
                    self._sessions,
                    run_timeout=scenario.run_timeout_s,
                    admission_control=admission,
                )
                for agent in self._agents
            ]
            self._book = SessionBook(
                self._sessions,
                APP_NAME,
                USER_ID,
                seed=scenario.seed + 1,
                shared_sessions=max(1, min(MAX_SHARED_SESSIONS, scenario.agents * 4)),
                runs_per_session=self._runs_per_session,
                checked_sessions=self._checked_sessions,
                expected_events=2 + 2 * scenario.tool_calls,
            )
            await self._warm_up()
            await self._settle("warm_up", self._runs_running)
            self._baseline_processes = kernel_stats()["processes"]
            self._baseline_thread_kinds = _threads()[0]
            self._baseline_threads = self._baseline_thread_kinds.total()
            self._baseline_supervisors = self._supervisor_counts()
            self._permit_peak = self._permit_samples = 0  # the warm-up's do not count
            for kind in _workload_kinds(scenario):
                workload = WORKLOADS[kind]()
                self._workloads[kind] = workload
                await workload.open(scenario, ScriptedProvider(fn=self._echo, inline=True))
        except BaseException:
            await self._teardown()
            raise

    async def run_one(self, kind: str, index: int, deadline: float) -> Outcome:
        """One unit of `kind`; exactly one outcome whatever happens to it."""
        if kind in ("runs", "sessions"):
            return await self._run(kind, index, deadline)
        workload = self._workloads.get(kind)
        if workload is None:
            raise AdkError("invalid_stress_kind", f"no workload for kind {kind!r}")
        return await workload.run_one(index, deadline)

    async def chaos(self, action: ChaosAction, rng: random.Random) -> ChaosEvent:
        """Kill one run worker, invocation server or agent, chosen with `rng`."""
        killed, skipped = ChaosOutcome.KILLED, ChaosOutcome.SKIPPED
        match action:
            case ChaosAction.KILL_RUN_WORKERS:
                workers = [pid for pid in list(self._workers) if pid.is_alive()]
                if not workers:
                    return chaos_event(action, skipped, reason="no live run worker")
                victim = rng.choice(workers)
                await run_blocking(exit_process, victim, "kill")
                return chaos_event(action, killed, repr(victim))
            case ChaosAction.KILL_INVOCATION_SERVERS:
                servers = await run_blocking(self._invocation_servers)
                if not servers:
                    return chaos_event(action, skipped, reason="no live invocation server")
                name, pid = rng.choice(servers)
                await run_blocking(exit_process, pid, "kill")
                return chaos_event(action, killed, name)
            case ChaosAction.KILL_AGENTS:
                return await self._kill_agent(action, rng)
            case _:
                return chaos_event(action, skipped, reason="needs a daemon target")

    def _invocation_servers(self) -> list[tuple[str, Pid]]:
        """The servers of this target's runs in flight, or (none in flight: kinds run
        by workloads) every invocation server under the run supervisor."""
        servers = [
            (run_id, pid)
            for run_id in list(self._live_runs)
            if (pid := whereis(run_name(run_id))) is not None
        ]
        if servers:
            return servers
        children = DynamicSupervisor.which_children(RUN_SUPERVISOR)
        return [(repr(child.pid), child.pid) for child in children if child.pid is not None]

    def restarts(self) -> int:
        """Agents restarted by their supervisor after a chaos kill."""
        return self._restarts

    async def close(self) -> list[InvariantResult]:
        """Close the workloads, settle, check every invariant, tear down."""
        results: list[InvariantResult] = []
        try:
            for kind, workload in list(self._workloads.items()):
                try:
                    results.extend(await workload.close())
                except Exception as error:
                    results.append(
                        InvariantResult(
                            name=f"{kind}_closed",
                            held=False,
                            detail=f"the {kind} workload failed to close: {type(error).__name__}",
                        )
                    )
            self._workloads.clear()
            await self._settle("close", self._unsettled)
            results.extend(await self._invariants())
        finally:
            await self._teardown()
        return results

    # -- runs and sessions -------------------------------------------------------------------

    async def _run(self, kind: str, index: int, deadline: float) -> Outcome:
        assert self._book is not None
        runner = self._runners[index % len(self._runners)]
        shared = kind == "sessions"
        session_id = self._book.begin_shared(index) if shared else f"r{index}"
        outcome = Outcome.REJECTED
        try:
            outcome = await self._start_and_wait(runner, session_id, index, deadline)
        finally:
            if shared:
                await self._book.end_shared(session_id, index, outcome)
            else:
                await self._book.end_own(index, outcome)
        return outcome

    async def _start_and_wait(
        self, runner: Runner, session_id: str, index: int, deadline: float
    ) -> Outcome:
        message = f"message {index}"
        try:
            run_id: str = await run_blocking(
                runs.start, runner, USER_ID, session_id, message, retention=RUN_RETENTION
            )
        except AdkError as error:
            _log.debug("adk.stress.run_refused", reason=str(error.reason)[:200])
            return Outcome.REJECTED
        self._started_runs += 1
        self._live_runs[run_id] = None
        try:
            result, why = await self._wait(run_id, deadline)
            if why is None:
                self._answered += 1
                await self._cross_check(run_id, result)
            else:
                self._unanswered[why] += 1
        finally:
            self._live_runs.pop(run_id, None)
        outcome = outcome_of(result)
        if outcome is Outcome.COMPLETED:
            self._completed += 1
            if isinstance(result, Completed) and result.output != message:
                self._problem(f"run {index} answered something else than its message")
        return outcome

    async def _wait(self, run_id: str, deadline: float) -> tuple[Any, str | None]:
        """The run's outcome (and None), or None and why no terminal was given; past
        `deadline` the run is cancelled and its cancel awaited."""
        try:
            timeout = max(0.0, deadline - time.monotonic())
            return await runs.wait_async(run_id, timeout=timeout), None
        except runs.RunTimeout:
            pass
        except runs.RunError as error:
            return None, str(error.reason)[:64]
        try:
            await run_blocking(runs.cancel, run_id, "stress_deadline")
            return await runs.wait_async(run_id, timeout=CROSS_CHECK_TIMEOUT), None
        except runs.RunTimeout:
            return None, "timeout"
        except runs.RunError as error:
            return None, str(error.reason)[:64]

    async def _cross_check(self, run_id: str, first: Any) -> None:
        """Ask the runtime again (a second waiter, then the run's status): it must give
        the terminal the first waiter had, or the run reached two terminals."""
        try:
            again = await runs.wait_async(run_id, timeout=CROSS_CHECK_TIMEOUT)
            view: dict[str, Any] = await run_blocking(runs.status, run_id)
        except runs.RunError:
            return  # its retention is over already: nothing left to disagree
        except runs.RunTimeout:
            self._disagree(f"{run_id}: answered, then running again")
            return
        if type(again) is not type(first) or again != first:
            self._disagree(f"{run_id}: {type(first).__name__}, then {type(again).__name__}")
        elif view.get("state") != type(first).__name__.lower():
            self._disagree(f"{run_id}: {type(first).__name__}, status {view.get('state')}")

    def _disagree(self, text: str) -> None:
        if len(self._disagreed) < MAX_PROBLEMS:
            self._disagreed.append(text)

    def _sample_permits(self) -> None:
        """Called from a model call, so while its invocation holds an admission permit:
        the first `PERMIT_SAMPLES_FIRST` calls, then every `PERMIT_SAMPLE_EVERY`th, read
        the controller's active permits (their peak shows the check was exercised)."""
        calls = next(self._model_calls)
        if calls >= PERMIT_SAMPLES_FIRST and calls % PERMIT_SAMPLE_EVERY:
            return
        try:
            active = int(admission_status()["active"])
        except AdkError:
            return  # the controller restarting: a later sample tells
        with self._rng_lock:
            self._permit_samples += 1
            self._permit_peak = max(self._permit_peak, active)

    # -- the scripted model ------------------------------------------------------------------

    def _delay(self) -> float:
        assert self._scenario is not None
        with self._rng_lock:
            return draw_delay(self._scenario.model.latency, self._rng)

    def _model(
        self, history: Sequence[Content], tools: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Echo the user's message after `tool_calls` tool rounds, with a drawn delay;
        the calling process is remembered for chaos."""
        assert self._scenario is not None
        self._workers.append(self_pid())
        self._sample_permits()
        rounds, message = _turn(history)
        delay = self._delay()
        if rounds < self._scenario.tool_calls:
            call = {"name": "stress_tool", "args": {"round": rounds + 1}}
            return {"tool_calls": [call], "delay": delay}
        return {"text": message, "delay": delay}

    def _echo(
        self, history: Sequence[Content], tools: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """The workloads' model: echo the last message with a drawn delay."""
        self._workers.append(self_pid())
        text = history[-1].text_value() if history else ""
        return {"text": text or "ok", "delay": self._delay()}

    # -- chaos -------------------------------------------------------------------------------

    async def _kill_agent(self, action: ChaosAction, rng: random.Random) -> ChaosEvent:
        if not self._agents:
            return chaos_event(action, ChaosOutcome.SKIPPED, reason="no agent")
        agent = rng.choice(self._agents)
        pid = agent.pid
        if pid is None:
            return chaos_event(action, ChaosOutcome.SKIPPED, agent.name, "agent restarting")
        await run_blocking(exit_process, pid, "kill")
        give_up = time.monotonic() + RESTART_WAIT
        while time.monotonic() < give_up:
            now = agent.pid
            if now is not None and now != pid:
                self._restarts += 1
                return chaos_event(action, ChaosOutcome.RESTARTED, agent.name)
            await asyncio.sleep(0.005)
        return chaos_event(action, ChaosOutcome.KILLED, agent.name)

    # -- setup, settling, invariants ---------------------------------------------------------

    def _open_sessions(self, scenario: Scenario) -> InMemorySessionService | LmdbSessionService:
        if scenario.session_store == "lmdb":
            self._data_dir = Path(tempfile.mkdtemp(prefix="adk-stress-"))
            daemon_lifetime.register_workdir(self._data_dir)  # removed on a second signal too
            return LmdbSessionService(self._data_dir / "sessions")
        return InMemorySessionService()

    async def _warm_up(self) -> None:
        """One quiet run on each of the first `MAX_WARM_UP` agents, so pools have their
        threads before the baselines (their sessions are deleted after)."""
        assert self._sessions is not None
        started = [
            await run_blocking(runs.start, runner, USER_ID, f"warm{n}", "warm", retention=0.05)
            for n, runner in enumerate(self._runners[:MAX_WARM_UP])
        ]
        for n, run_id in enumerate(started):
            try:
                await runs.wait_async(run_id, timeout=30.0)
            except (runs.RunError, runs.RunTimeout):
                _log.warning("adk.stress.warm_up_failed", run_id=run_id)
            try:
                await run_blocking(self._sessions.delete_session, APP_NAME, USER_ID, f"warm{n}")
            except AdkError:
                pass  # never created: the warm-up run failed before its first write

    async def _settle(self, what: str, unsettled: Callable[[], list[str]]) -> None:
        """Poll `unsettled` until it is empty or the settle timeout passes (the checks then
        tell); a timeout is logged with what had not settled."""
        give_up = time.monotonic() + self._settle_timeout
        while left := unsettled():
            if time.monotonic() >= give_up:
                _log.warning("adk.stress.not_settled", stage=what, unsettled=left)
                return
            await asyncio.sleep(SETTLE_POLL)

    def _unsettled(self) -> list[str]:
        """The names of the measures not back to their baselines yet."""
        permits = admission_status()
        checks = {
            "runs": not any(runs.stats().values()),
            "permits": permits.get("active") == 0 and permits.get("queued") == 0,
            "supervisors": self._supervisor_counts() == self._baseline_supervisors,
            "processes": kernel_stats()["processes"] <= self._baseline_processes,
            "threads": self._threads_back(),
        }
        return [name for name, held in checks.items() if not held]

    def _runs_running(self) -> list[str]:
        return ["runs"] if self._supervised(RUN_SUPERVISOR) else []

    def _threads_back(self) -> bool:
        others, pools = _threads()
        within = all(pool["threads"] <= pool["max_threads"] for pool in pools.values())
        return others.total() <= self._baseline_threads and within

    def _supervised(self, supervisor: str) -> int:
        return DynamicSupervisor.count_children(supervisor)["active"]

    def _supervisor_counts(self) -> dict[str, int]:
        return {
            RUN_SUPERVISOR: self._supervised(RUN_SUPERVISOR),
            AGENT_SUPERVISOR: self._supervised(AGENT_SUPERVISOR),
            "default_task_supervisor": default_task_supervisor().count(),
        }

    async def _invariants(self) -> list[InvariantResult]:
        others, pools = _threads()
        results = [
            invariants.no_open_invocations(runs.stats()),
            invariants.no_leaked_permits(
                await run_blocking(admission_status),
                self._permit_peak,
                exercised=self._permit_samples > 0,
            ),
            invariants.no_leaked_processes(self._baseline_processes, kernel_stats()["processes"]),
            invariants.no_leaked_threads(
                self._baseline_threads,
                others.total(),
                pools,
                others - self._baseline_thread_kinds,
            ),
            invariants.supervisor_counts(self._baseline_supervisors, self._supervisor_counts()),
        ]
        kinds = _kinds(self._scenario) if self._scenario is not None else set()
        if kinds & {"runs", "sessions"} and self._book is not None:
            results.append(
                invariants.runs_one_terminal(
                    self._started_runs, self._answered, self._unanswered, self._disagreed
                )
            )
            results.append(invariants.replies_match(self._completed, self._reply_problems))
            results.extend(await self._book.check())
        return results

    def _problem(self, text: str) -> None:
        if len(self._reply_problems) < MAX_PROBLEMS:
            self._reply_problems.append(text)

    async def _teardown(self) -> None:
        """Stop what `open` started; the runtime only if this target started it."""
        for workload in self._workloads.values():
            try:
                await workload.close()
            except Exception as error:
                _log.warning("adk.stress.workload_close_failed", error=type(error).__name__)
        self._workloads.clear()
        for agent in self._agents:
            try:
                stop_agent(agent)
            except AdkError:
                pass  # already gone
        self._agents.clear()
        if self._sessions is not None:
            self._sessions.close()
            self._sessions = None
        if self._owns_app:
            adk_app.stop()
            self._owns_app = False
        if self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            daemon_lifetime.release_workdir(self._data_dir)
            self._data_dir = None


def _turn(history: Sequence[Content]) -> tuple[int, str]:
    """Tool rounds since the newest user message, and that message's text."""
    rounds = 0
    for content in reversed(history):
        if any(isinstance(part, FunctionResponsePart) for part in content.parts):
            rounds += 1
        elif content.role == "user":
            return rounds, content.text_value()
    return rounds, ""


def _threads() -> tuple[Counter[str], dict[str, dict[str, int]]]:
    """The live threads outside the kernel's pools, counted by name without their
    numbering, and each pool's threads against its bound (one enumeration)."""
    threads = threading.enumerate()
    others = Counter(
        _NUMBERING.sub("", thread.name) for thread in threads if thread_pool_of(thread.name) is None
    )
    return others, thread_pools(threads)


def _kinds(scenario: Scenario) -> set[str]:
    if scenario.kind != "mixed" or scenario.mix is None:
        return {scenario.kind}
    return {kind for kind, weight in scenario.mix.weights().items() if weight > 0}


def _workload_kinds(scenario: Scenario) -> list[str]:
    return [kind for kind in MIX_KINDS if kind in _kinds(scenario) and kind in WORKLOADS]
