"""The daemon stress target: load through a running ``adk serve``'s ``/dev/v1`` API.

`DaemonApiTarget` drives the daemon over HTTP with one bounded `httpx.AsyncClient`
(explicit limits and timeouts, no redirects, no proxies from the environment, the bearer
token only in the ``Authorization`` header). With ``{"daemon": {"spawn": true}}`` it
starts the daemon itself in a temporary directory (LMDB sessions under it, a generated
token, a scripted agent file it writes: `daemon_process.agent_config`): as a subprocess
(`DaemonProcess`), or on a thread of this process (`InProcessDaemon`) when the chaos
schedule kills the listener and never the daemon, since only then can the harness reach
the listener process. With ``{"daemon": {"url": ...}}`` it drives that daemon with
``ADK_DEV_TOKEN`` and the first agent it lists.

Kinds: ``runs`` (a run per unit, one session each) and ``sessions`` (create the session,
write its state, run a turn, read it back); other kinds and chaos actions it cannot do
are refused at `open` (`daemon_checks`). A run in flight when the harness SIGKILLed the
daemon ends `Outcome.LOST`; across a listener kill the target reconnects (the run goes
on in the daemon); a transport failure with no kill behind it is a failure and breaks an
invariant. Every session it creates is deleted: at once when it is not in the sample
read back at `close`, else after that read (so a ``url`` daemon keeps none of them).
`close` checks that every accepted run reached one terminal (or was lost across a kill)
that the daemon's own record of it agrees with, that the daemon answers after its
restarts, that sampled sessions hold whole invocations, that the daemon's kernel
counters settled back to the baseline taken at `open`, and that a spawned daemon drains
to exit code 0 on SIGTERM leaving no child.
"""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from adk_actors.stress.daemon_checks import (
    bounded_append,
    check_chaos,
    check_kinds,
    kernel_counters,
    kernel_invariant,
    kernel_problems,
    listener_invariant,
    lost_invariant,
    serves_in_process,
    session_problem,
    stop_invariants,
    terminal_invariant,
)
from adk_actors.stress.daemon_lifetime import register_workdir, release_workdir
from adk_actors.stress.daemon_process import (
    AGENT_NAME,
    SETTLE_TIMEOUT,
    DaemonApi,
    InProcessDaemon,
    Lost,
    agent_config,
    api_client,
    api_path,
    check_daemon_url,
    connections_for,
    env_token,
)
from adk_actors.stress.daemon_spawn import STOP_TIMEOUT, DaemonProcess
from adk_actors.stress.latency import SampleReservoir
from adk_actors.stress.records import (
    ChaosEvent,
    ChaosOutcome,
    InvariantResult,
    Outcome,
    chaos_event,
    outcome_of,
)
from adk_actors.stress.scenario import DaemonTarget, Scenario
from providers.errors import AdkError
from supervision import get_logger

APP_NAME = "stress"
MAX_SAMPLED_SESSIONS = 256
"""Sessions read back at `close` (a uniform sample of the completed ones)."""
MAX_LOST_SESSIONS = 256
MAX_UNDELETED = 4096
"""Sessions whose delete failed during the load, tried again at `close`."""
OBSERVABILITY = "/dev/v1/observability"
_log = get_logger("adk_actors.stress.daemon_target")

Daemon = DaemonProcess | InProcessDaemon


class _Sample(NamedTuple):
    """One session to read back at `close` and what its run ended as."""

    user: str
    session: str
    message: str
    outcome: Outcome
    state_index: int | None


class DaemonApiTarget:
    """A stress `Target` speaking the daemon's ``/dev/v1`` API (see the module doc).

    `in_process` None chooses: in-process when the scenario spawns the daemon and its
    chaos kills the listener but never the daemon; a subprocess otherwise."""

    def __init__(self, in_process: bool | None = None) -> None:
        self._in_process = in_process
        self._prefix = secrets.token_hex(4)
        """In every session id: a second scenario against the same daemon starts fresh."""
        self._scenario: Scenario | None = None
        self._api = DaemonApi()
        self._daemon: Daemon | None = None
        self._workdir: Path | None = None
        self._agent = AGENT_NAME
        self._token = ""
        self._down = False
        """A restart failed: the daemon is gone for good, units are refused at once."""
        self._chaos_lock = asyncio.Lock()
        self._chaos_tasks: set[asyncio.Task[ChaosEvent]] = set()
        self._generation = 0
        """Daemon kills so far: a request that fails across a change of it is lost."""
        self._restarts = 0
        self._restart_failures = 0
        self._listener_failures = 0
        self._unknown_starts = 0
        self._rng = random.Random(0)
        self._accepted = 0
        self._terminals: dict[Outcome, int] = {outcome: 0 for outcome in Outcome}
        self._unexplained: list[str] = []
        self._inconsistent: list[str] = []
        self._samples: SampleReservoir[_Sample] = SampleReservoir(
            MAX_SAMPLED_SESSIONS, rng=self._rng
        )
        self._lost_samples: list[_Sample] = []
        self._undeleted: list[tuple[str, str]] = []
        self._undeleted_dropped = 0
        self._deleted = 0
        self._cross_checked = 0
        self._disagreed: list[str] = []
        self._kernel_baseline: dict[str, int] | None = None

    def __repr__(self) -> str:  # never the token
        return f"DaemonApiTarget(daemon={self._daemon!r})"

    # -- Target ------------------------------------------------------------------------

    async def open(self, scenario: Scenario) -> None:
        """Check the kinds, spawn (or reach) the daemon and see that it answers."""
        if not isinstance(scenario.target, DaemonTarget):
            raise AdkError("stress_target_not_daemon", "the scenario's target is not a daemon")
        check_kinds(scenario)
        spec = scenario.target.daemon
        serve_here = spec.url is None and (
            serves_in_process(scenario) if self._in_process is None else self._in_process
        )
        check_chaos(scenario, serve_here)
        if scenario.tool_calls:
            raise AdkError(
                "stress_daemon_tool_calls_unsupported",
                "tool_calls is not supported against a daemon (its agent has no tools)",
            )
        self._scenario = scenario
        self._rng = random.Random(scenario.seed)
        self._samples = SampleReservoir(MAX_SAMPLED_SESSIONS, rng=self._rng)
        if spec.url is not None:
            url, self._token = check_daemon_url(spec.url), env_token()
        else:
            url = await self._spawn(scenario, serve_here)
        try:
            await self._api.replace(api_client(url, self._token, connections_for(scenario)))
            self._agent = await self._baseline(spec.url is not None)
            self._kernel_baseline = await self._kernel()
        except BaseException:
            await self._teardown()
            raise
        self._api.up.set()

    async def run_one(self, kind: str, index: int, deadline: float) -> Outcome:
        """One unit of `kind`; exactly one `Outcome`, LOST only across a daemon kill."""
        match kind:
            case "runs":
                return await self._run_unit(index, deadline, explicit_session=False)
            case "sessions":
                return await self._run_unit(index, deadline, explicit_session=True)
        raise AdkError(
            ("stress_kind_not_supported", kind[:64]),
            f"kind {kind[:64]} is not supported against a daemon",
        )

    async def chaos(self, action: str, rng: random.Random) -> ChaosEvent:
        """``kill_daemon`` (a subprocess daemon: SIGKILL, then a start on the same port
        and data) or ``kill_listener`` (an in-process daemon: the kernel's kill to its
        listener, then its supervisor's restart); anything else is skipped with the
        reason. The action runs to its end even if the caller stops waiting."""
        task = asyncio.ensure_future(self._chaos(action))
        self._chaos_tasks.add(task)
        task.add_done_callback(self._chaos_tasks.discard)
        return await asyncio.shield(task)

    def restarts(self) -> int:
        return self._restarts

    async def close(self) -> list[InvariantResult]:
        """Check every invariant, then stop a spawned daemon (SIGTERM) and clean up."""
        if self._chaos_tasks:
            await asyncio.wait(list(self._chaos_tasks), timeout=STOP_TIMEOUT)
        lost = self._terminals[Outcome.LOST]
        results = [
            terminal_invariant(
                self._accepted,
                self._terminals,
                self._unknown_starts,
                self._cross_checked,
                self._disagreed,
            ),
            lost_invariant(lost, self._generation, self._unexplained),
        ]
        if self._api.listener_kills:
            results.append(listener_invariant(self._api.listener_kills, self._listener_failures))
        try:
            if self._generation:
                results.append(await self._answers_invariant())
            if self._api.client is not None:
                results.append(await self._sessions_invariant())
                results.append(await self._kernel_invariant())
                results.append(await self._deleted_invariant())
        finally:
            results.extend(await self._teardown())
        return results

    # -- opening and closing -----------------------------------------------------------

    async def _spawn(self, scenario: Scenario, serve_here: bool) -> str:
        workdir = Path(tempfile.mkdtemp(prefix="adk-stress-daemon-"))
        register_workdir(workdir)  # removed at exit even if `close` never runs
        self._workdir = workdir
        config = workdir / "agent.json"
        config.write_text(json.dumps(agent_config(scenario)))
        self._token = secrets.token_urlsafe(32)
        extra = {"ADK_DEV_DRAIN_GRACE_MS": "5000"}
        daemon: Daemon
        if serve_here:
            daemon = InProcessDaemon(config, workdir / "data", self._token, extra)
        else:
            daemon = DaemonProcess(config, workdir / "data", self._token, extra)
        self._daemon = daemon
        try:
            return await asyncio.to_thread(daemon.start)
        except BaseException:
            await self._teardown()
            raise

    async def _baseline(self, remote: bool) -> str:
        """The agent to drive: ours when spawned, the first one listed at a URL."""
        try:
            response = await self._api.http().get("/dev/v1/agents")
        except httpx.HTTPError:
            raise AdkError("stress_daemon_unreachable", "the daemon did not answer") from None
        if response.status_code != 200:
            raise AdkError(
                ("stress_daemon_refused", response.status_code),
                f"the daemon answered GET /dev/v1/agents with HTTP {response.status_code}",
            )
        try:
            rows = response.json()["agents"]
            names = [str(row["name"]) for row in rows if isinstance(row.get("name"), str)]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise AdkError("stress_daemon_refused", "the daemon's agent list is not JSON") from None
        if not remote:
            if AGENT_NAME not in names:
                raise AdkError("stress_daemon_no_agent", "the spawned daemon runs no agent")
            return AGENT_NAME
        if not names:
            raise AdkError("stress_daemon_no_agent", "the daemon at the URL runs no agent")
        return names[0]

    async def _teardown(self) -> list[InvariantResult]:
        """Close the client, stop a spawned daemon and remove its directory; the
        invariants of its stop (none when nothing was spawned)."""
        daemon, workdir = self._daemon, self._workdir
        self._daemon = self._workdir = None
        try:
            await self._api.replace(None)
            if daemon is None:
                return []
            code = await asyncio.to_thread(daemon.stop)
            return stop_invariants(code, daemon.leftover_children())
        finally:
            if workdir is not None:
                await asyncio.to_thread(shutil.rmtree, workdir, True)
                release_workdir(workdir)

    # -- one unit ----------------------------------------------------------------------

    async def _run_unit(self, index: int, deadline: float, *, explicit_session: bool) -> Outcome:
        user = f"user-{index % self._scn().agents}"
        session = f"{'sess' if explicit_session else 'run'}-{self._prefix}-{index}"
        message = f"stress message {index}"
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                await self._api.up.wait()
        except TimeoutError:
            return Outcome.REJECTED  # the daemon was down (restarting) until the deadline
        if self._down:
            return Outcome.REJECTED
        generation, listener = self._generation, self._api.listener_kills
        try:
            if explicit_session and not await self._prepare_session(user, session, index):
                await self._delete(user, session)
                return Outcome.FAILED
            return await self._run_and_check(
                user, session, message, index if explicit_session else None, deadline
            )
        except Lost as lost:
            if self._generation != generation:
                self._terminals[Outcome.LOST] += 1
                if len(self._lost_samples) < MAX_LOST_SESSIONS:
                    self._lost_samples.append(_Sample(user, session, message, Outcome.LOST, None))
                else:
                    await self._delete(user, session)
                return Outcome.LOST
            if self._api.listener_kills != listener and not lost.accepted:
                if lost.sent:
                    self._unknown_starts += 1  # cut across a listener kill: not known started
                self._defer_delete(user, session)  # a run may have started: at `close`
                return Outcome.REJECTED
            why = "lost track of the accepted run" if lost.accepted else "the connection failed"
            bounded_append(self._unexplained, f"{session}: {why}, no daemon kill")
            await self._delete(user, session)
            return Outcome.FAILED

    async def _prepare_session(self, user: str, session: str, index: int) -> bool:
        created = await self._api.request(
            "POST", api_path("sessions", APP_NAME, user), session_id=session
        )
        if created.status_code != 201:
            bounded_append(self._inconsistent, f"{session}: create answered {created.status_code}")
            return False
        state_path = api_path("sessions", APP_NAME, user, session) + "/state"
        written = await self._api.request("POST", state_path, state_delta={"stress_index": index})
        if written.status_code != 200:
            bounded_append(self._inconsistent, f"{session}: state answered {written.status_code}")
            return False
        return True

    async def _run_and_check(
        self, user: str, session: str, message: str, state_index: int | None, deadline: float
    ) -> Outcome:
        body = {
            "agent_name": self._agent,
            "app_name": APP_NAME,
            "user_id": user,
            "session_id": session,
            "message": message,
        }
        started = await self._api.request("POST", "/dev/v1/runs", **body)
        if started.status_code != 202:
            await self._delete(user, session)
            if started.status_code in (429, 503):
                return Outcome.REJECTED
            bounded_append(self._unexplained, f"{session}: start answered {started.status_code}")
            return Outcome.FAILED
        self._accepted += 1
        run_id = str(started.json()["run_id"])
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                terminal = await self._api.await_terminal(run_id)
        except TimeoutError:
            cancelled = await self._api.cancel(run_id)
            if cancelled is None:
                bounded_append(self._unexplained, f"{run_id}: no terminal after a cancel")
            terminal = cancelled or {"type": "failed"}
        except Lost as lost:
            lost.accepted = True
            raise
        outcome = outcome_of(terminal.get("type"))
        self._terminals[outcome] += 1
        await self._cross_check(run_id, terminal)
        sample = _Sample(user, session, message, outcome, state_index)
        if state_index is not None and outcome is Outcome.COMPLETED:
            try:
                problem = await self._check_session(sample)
            except Lost:  # the run did end: its session is read back at `close` instead
                problem = None
            if problem is not None:
                bounded_append(self._inconsistent, problem)
                await self._delete(user, session)
                return Outcome.FAILED
        # a completed run's session may be sampled (read back at `close`, deleted then)
        left = self._samples.add(sample) if outcome is Outcome.COMPLETED else sample
        if left is not None:
            await self._delete(left.user, left.session)
        return outcome

    async def _cross_check(self, run_id: str, terminal: dict[str, Any]) -> None:
        """The daemon's own record of the run (``GET /dev/v1/runs/{id}``) must hold the
        terminal the stream delivered (a restarted daemon that forgot it is no check)."""
        try:
            response = await self._api.request("GET", api_path("runs", run_id))
        except Lost:
            return
        if response.status_code != 200:
            return
        recorded = response.json().get("outcome")
        self._cross_checked += 1
        if not isinstance(recorded, dict) or recorded.get("type") != terminal.get("type"):
            seen, kept = terminal.get("type"), recorded.get("type") if recorded else None
            bounded_append(self._disagreed, f"{run_id}: streamed {seen}, recorded {kept}")

    async def _delete(self, user: str, session: str) -> bool:
        """Delete one session this target created (gone already counts); on failure it
        is tried again at `close`."""
        try:
            response = await self._api.request(
                "DELETE", api_path("sessions", APP_NAME, user, session)
            )
        except Lost:
            response = None
        if response is not None and response.status_code in (200, 404):
            self._deleted += 1
            return True
        self._defer_delete(user, session)
        return False

    def _defer_delete(self, user: str, session: str) -> None:
        if len(self._undeleted) < MAX_UNDELETED:
            self._undeleted.append((user, session))
        else:
            self._undeleted_dropped += 1

    def _scn(self) -> Scenario:
        if self._scenario is None:
            raise AdkError("stress_target_not_open", "open the daemon target first")
        return self._scenario

    # -- chaos -------------------------------------------------------------------------

    async def _chaos(self, action: str) -> ChaosEvent:
        async with self._chaos_lock:
            daemon = self._daemon
            match action, daemon:
                case "kill_daemon", DaemonProcess():
                    return await self._kill_daemon(daemon)
                case "kill_listener", InProcessDaemon():
                    return await self._kill_listener(daemon)
            # refused at `open` (`check_chaos`); reached only by a direct call
            why = "not an action this daemon target can do (see daemon_checks.check_chaos)"
            return chaos_event(action, ChaosOutcome.SKIPPED, "daemon", why)

    async def _kill_daemon(self, daemon: DaemonProcess) -> ChaosEvent:
        self._api.up.clear()
        self._generation += 1
        pid = await asyncio.to_thread(daemon.kill)
        if pid is None:
            self._api.up.set()
            return chaos_event(
                "kill_daemon", ChaosOutcome.SKIPPED, "daemon", "the daemon was not running"
            )
        try:
            url = await asyncio.to_thread(daemon.start)
        except AdkError as error:
            self._restart_failures += 1
            self._down = True
            self._api.up.set()  # waiting units end at once (rejected) rather than at their deadline
            _log.warning("adk.stress.daemon_restart_failed", reason=str(error.reason))
            return chaos_event(
                "kill_daemon", ChaosOutcome.KILLED, f"daemon pid {pid}", "the restart failed"
            )
        # a fresh pool: requests still on the old one (to the dead process) fail as lost
        await self._api.replace(api_client(url, self._token, connections_for(self._scn())))
        self._restarts += 1
        self._api.up.set()
        return chaos_event("kill_daemon", ChaosOutcome.RESTARTED, f"daemon pid {pid}")

    async def _kill_listener(self, daemon: InProcessDaemon) -> ChaosEvent:
        self._api.up.clear()
        self._api.listener_kills += 1
        self._api.listener_killing = True
        try:
            victim, restarted = await asyncio.to_thread(daemon.kill_listener)
        finally:
            self._api.listener_killing = False
        if restarted:
            self._restarts += 1
        else:
            self._listener_failures += 1
            self._down = True
        self._api.up.set()
        if restarted:
            return chaos_event("kill_listener", ChaosOutcome.RESTARTED, f"http_listener {victim}")
        return chaos_event(
            "kill_listener", ChaosOutcome.KILLED, f"http_listener {victim}", "not restarted"
        )

    # -- invariants --------------------------------------------------------------------

    async def _answers_invariant(self) -> InvariantResult:
        try:
            response = await self._api.http().get("/dev/v1/agents")
            listed = [row.get("name") for row in response.json().get("agents", [])]
            held = response.status_code == 200 and self._agent in listed
            detail = f"HTTP {response.status_code} after {self._restarts} restart(s)"
        except (httpx.HTTPError, AdkError, ValueError, AttributeError):
            held, detail = False, "no answer after the restart"
        if self._restart_failures:
            held = False
            detail += f"; {self._restart_failures} restart(s) failed"
        return InvariantResult(name="daemon_answers_after_restart", held=held, detail=detail)

    async def _sessions_invariant(self) -> InvariantResult:
        """Sampled sessions, read back through the API, hold whole invocations."""
        problems = list(self._inconsistent)
        checked = 0
        if self._down:
            problems.append("the daemon is down: its sessions cannot be read back")
        try:
            for sample in [] if self._down else [*self._samples.items, *self._lost_samples]:
                problem = await self._check_session(sample)
                checked += 1
                if problem is not None:
                    bounded_append(problems, problem)
        except Lost:
            bounded_append(problems, "the daemon stopped answering while sessions were read")
        detail = f"{checked} session(s) read back after {self._generation} kill(s)"
        if problems:
            detail += "; " + "; ".join(problems[:5])
        return InvariantResult(
            name="daemon_sessions_whole_invocations", held=not problems, detail=detail
        )

    async def _kernel(self) -> dict[str, int] | None:
        """The daemon's kernel counters now (None when it exposes none)."""
        try:
            response = await self._api.http().get(OBSERVABILITY)
            return kernel_counters(response.json()) if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    async def _kernel_invariant(self) -> InvariantResult:
        """The kernel counters settle back to the baseline (polled for `SETTLE_TIMEOUT`)."""
        if self._down:
            return kernel_invariant(None, None, "the daemon is down")
        baseline, now = self._kernel_baseline, await self._kernel()
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while baseline and now and kernel_problems(baseline, now):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
            now = await self._kernel()
        return kernel_invariant(baseline, now)

    async def _deleted_invariant(self) -> InvariantResult:
        """Every session this target created is deleted: the sampled ones now, with
        those whose delete failed during the load."""
        pending = [(sample.user, sample.session) for sample in self._samples.items]
        pending += [(sample.user, sample.session) for sample in self._lost_samples]
        pending += self._undeleted
        self._undeleted = []
        for user, session in [] if self._down else pending:
            await self._delete(user, session)
        left = (len(pending) if self._down else len(self._undeleted)) + self._undeleted_dropped
        detail = f"{self._deleted} deleted; " + (
            f"{left} could not be deleted" if left else "none left on the daemon"
        )
        return InvariantResult(name="daemon_sessions_deleted", held=not left, detail=detail)

    async def _check_session(self, sample: _Sample) -> str | None:
        """What is wrong with one stored session, or None (see `session_problem`)."""
        path = api_path("sessions", APP_NAME, sample.user, sample.session)
        response = await self._api.request("GET", path)
        if response.status_code == 404 and sample.outcome is Outcome.LOST:
            return None  # killed before its first event was stored
        if response.status_code != 200:
            return f"{sample.session}: read answered {response.status_code}"
        return session_problem(response.json(), sample.message, sample.outcome, sample.state_index)
