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
write its state, run a turn, read it back); any other kind is refused at `open`. A run
in flight when the harness SIGKILLed the daemon ends `Outcome.LOST`; across a listener
kill the target reconnects (the run goes on in the daemon); a transport failure with no
kill behind it is a failure and breaks an invariant. `close` checks that every accepted
run reached one terminal (or was lost across a kill), that the daemon answers after its
restarts, that sampled sessions read back through the API hold whole invocations, and
that a spawned daemon drains to exit code 0 on SIGTERM leaving no child process.
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
from urllib.parse import quote

import httpx

from adk_actors.stress.daemon_process import (
    AGENT_NAME,
    STOP_TIMEOUT,
    DaemonProcess,
    InProcessDaemon,
    agent_config,
    api_client,
    check_daemon_url,
    check_kinds,
    connections_for,
    env_token,
    listener_invariant,
    reservoir_add,
    session_problem,
    stop_invariants,
)
from adk_actors.stress.engine import install_daemon_target
from adk_actors.stress.records import ChaosEvent, InvariantResult, Outcome
from adk_actors.stress.scenario import DaemonTarget, Scenario
from providers.errors import AdkError
from supervision import get_logger

APP_NAME = "stress"
MAX_SAMPLED_SESSIONS = 256
"""Sessions read back at `close` (a uniform sample of the completed ones)."""
MAX_LOST_SESSIONS = 256
MAX_STREAMS_PER_RUN = 64
"""Event-stream connections one run may take (each ends at the daemon's own bounds)."""
MAX_STREAM_BYTES = 64 << 20
MAX_RETRIES = 20
"""Reconnections of one request across listener kills."""
SETTLE_TIMEOUT = 5.0
_log = get_logger("adk_actors.stress.daemon_target")

Daemon = DaemonProcess | InProcessDaemon


class _Lost(Exception):
    """The connection failed under a request; `sent`: the request may have arrived."""

    def __init__(self, sent: bool) -> None:
        super().__init__("connection failed")
        self.sent = sent
        self.accepted = False
        """The run had been accepted (202) before the connection failed."""


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
        self._client: httpx.AsyncClient | None = None
        self._daemon: Daemon | None = None
        self._workdir: Path | None = None
        self._agent = AGENT_NAME
        self._token = ""
        self._up = asyncio.Event()
        self._down = False
        """A restart failed: the daemon is gone for good, units are refused at once."""
        self._chaos_lock = asyncio.Lock()
        self._chaos_tasks: set[asyncio.Task[ChaosEvent]] = set()
        self._generation = 0
        """Daemon kills so far: a request that fails across a change of it is lost."""
        self._listener_kills = 0
        self._listener_killing = False
        self._restarts = 0
        self._restart_failures = 0
        self._listener_failures = 0
        self._unknown_starts = 0
        self._rng = random.Random(0)
        self._accepted = 0
        self._terminals: dict[Outcome, int] = {outcome: 0 for outcome in Outcome}
        self._unexplained: list[str] = []
        self._inconsistent: list[str] = []
        self._seen_completed = 0
        self._samples: list[_Sample] = []
        self._lost_samples: list[_Sample] = []

    def __repr__(self) -> str:  # never the token
        return f"DaemonApiTarget(daemon={self._daemon!r})"

    # -- Target ------------------------------------------------------------------------

    async def open(self, scenario: Scenario) -> None:
        """Check the kinds, spawn (or reach) the daemon and see that it answers."""
        if not isinstance(scenario.target, DaemonTarget):
            raise AdkError("stress_target_not_daemon", "the scenario's target is not a daemon")
        check_kinds(scenario)
        if scenario.tool_calls:
            raise AdkError(
                "stress_daemon_tool_calls_unsupported",
                "tool_calls is not supported against a daemon (its agent has no tools)",
            )
        self._scenario = scenario
        self._rng = random.Random(scenario.seed)
        spec = scenario.target.daemon
        if spec.url is not None:
            url, self._token = check_daemon_url(spec.url), env_token()
        else:
            url = await self._spawn(scenario)
        try:
            self._client = api_client(url, self._token, connections_for(scenario))
            self._agent = await self._baseline(spec.url is not None)
        except BaseException:
            await self._teardown()
            raise
        self._up.set()

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
        results = [self._terminal_invariant(), self._lost_invariant()]
        if self._listener_kills:
            results.append(listener_invariant(self._listener_kills, self._listener_failures))
        try:
            if self._generation:
                results.append(await self._answers_invariant())
            if self._client is not None:
                results.append(await self._sessions_invariant())
        finally:
            results.extend(await self._teardown())
        return results

    # -- opening and closing -----------------------------------------------------------

    async def _spawn(self, scenario: Scenario) -> str:
        workdir = Path(tempfile.mkdtemp(prefix="adk-stress-daemon-"))
        self._workdir = workdir
        config = workdir / "agent.json"
        config.write_text(json.dumps(agent_config(scenario)))
        self._token = secrets.token_urlsafe(32)
        extra = {"ADK_DEV_DRAIN_GRACE_MS": "5000"}
        daemon: Daemon
        if _in_process(scenario) if self._in_process is None else self._in_process:
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
            response = await self._http().get("/dev/v1/agents")
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
        client, self._client = self._client, None
        daemon, workdir = self._daemon, self._workdir
        self._daemon = self._workdir = None
        if client is not None:
            await client.aclose()
        if daemon is None:
            return []
        try:
            code = await asyncio.to_thread(daemon.stop)
            leftovers = daemon.leftover_children()
        finally:
            if workdir is not None:
                await asyncio.to_thread(shutil.rmtree, workdir, True)
        return stop_invariants(code, leftovers)

    # -- one unit ----------------------------------------------------------------------

    async def _run_unit(self, index: int, deadline: float, *, explicit_session: bool) -> Outcome:
        user = f"user-{index % self._scn().agents}"
        session = f"{'sess' if explicit_session else 'run'}-{self._prefix}-{index}"
        message = f"stress message {index}"
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                await self._up.wait()
        except TimeoutError:
            return Outcome.REJECTED  # the daemon was down (restarting) until the deadline
        if self._down:
            return Outcome.REJECTED
        generation, listener = self._generation, self._listener_kills
        try:
            if explicit_session and not await self._prepare_session(user, session, index):
                return Outcome.FAILED
            return await self._run_and_check(
                user, session, message, index if explicit_session else None, deadline
            )
        except _Lost as lost:
            if self._generation != generation:
                self._terminals[Outcome.LOST] += 1
                _keep(self._lost_samples, _Sample(user, session, message, Outcome.LOST, None))
                return Outcome.LOST
            if self._listener_kills != listener and not lost.accepted:
                if lost.sent:
                    self._unknown_starts += 1  # cut across a listener kill: not known started
                return Outcome.REJECTED
            why = "lost track of the accepted run" if lost.accepted else "the connection failed"
            _bounded_append(self._unexplained, f"{session}: {why}, no daemon kill")
            return Outcome.FAILED

    async def _prepare_session(self, user: str, session: str, index: int) -> bool:
        created = await self._request("POST", _path("sessions", APP_NAME, user), session_id=session)
        if created.status_code != 201:
            _bounded_append(self._inconsistent, f"{session}: create answered {created.status_code}")
            return False
        state_path = _path("sessions", APP_NAME, user, session) + "/state"
        written = await self._request("POST", state_path, state_delta={"stress_index": index})
        if written.status_code != 200:
            _bounded_append(self._inconsistent, f"{session}: state answered {written.status_code}")
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
        started = await self._request("POST", "/dev/v1/runs", **body)
        if started.status_code in (429, 503):
            return Outcome.REJECTED
        if started.status_code != 202:
            _bounded_append(self._unexplained, f"{session}: start answered {started.status_code}")
            return Outcome.FAILED
        self._accepted += 1
        run_id = str(started.json()["run_id"])
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                terminal = await self._await_terminal(run_id)
        except TimeoutError:
            terminal = await self._cancel(run_id)
        except _Lost as lost:
            lost.accepted = True
            raise
        outcome = _outcome(terminal)
        self._terminals[outcome] += 1
        sample = _Sample(user, session, message, outcome, state_index)
        if state_index is not None and outcome is Outcome.COMPLETED:
            try:
                problem = await self._check_session(sample)
            except _Lost:  # the run did end: its session is read back at `close` instead
                problem = None
            if problem is not None:
                _bounded_append(self._inconsistent, problem)
                return Outcome.FAILED
        if outcome is Outcome.COMPLETED:
            self._seen_completed += 1
            reservoir_add(
                self._samples, sample, self._seen_completed, self._rng, MAX_SAMPLED_SESSIONS
            )
        return outcome

    async def _await_terminal(self, run_id: str) -> dict[str, Any]:
        """The run's terminal outcome JSON, read from its event stream (reconnecting
        with ``Last-Event-ID`` when a connection ends at its bounds or a listener kill
        cut it)."""
        cursor = 0
        budget = MAX_STREAM_BYTES
        for attempt in range(MAX_STREAMS_PER_RUN):
            headers = {"accept": "text/event-stream"}
            if cursor:
                headers["last-event-id"] = str(cursor)
            listener = self._listener_kills
            try:
                async with self._http().stream(
                    "GET", f"/dev/v1/runs/{quote(run_id, safe='')}/events", headers=headers
                ) as response:
                    if response.status_code != 200:
                        return await self._status_terminal(run_id)
                    frame: dict[str, str] = {}
                    async for line in response.aiter_lines():
                        budget -= len(line) + 1
                        if budget < 0:
                            return await self._status_terminal(run_id)
                        if line:
                            field, _, value = line.partition(":")
                            frame[field] = value.removeprefix(" ")
                            continue
                        if frame.get("id", "").isdigit():
                            cursor = int(frame["id"])
                        if frame.get("event") == "terminal":
                            terminal: dict[str, Any] = json.loads(frame.get("data", "{}"))
                            return terminal
                        if frame.get("event") == "replay_gap":
                            return await self._status_terminal(run_id)
                        frame = {}
            except httpx.TransportError:
                if not self._across_listener_kill(listener):
                    raise _Lost(sent=True) from None
                await self._pause(attempt)
        return await self._status_terminal(run_id)

    async def _status_terminal(self, run_id: str) -> dict[str, Any]:
        """The run's outcome from its status, polled until it is terminal."""
        delay = 0.01
        while True:
            response = await self._request("GET", f"/dev/v1/runs/{quote(run_id, safe='')}")
            if response.status_code == 404:
                raise _Lost(sent=True)  # only a restarted daemon forgets a retained run
            if response.status_code == 200:
                outcome = response.json().get("outcome")
                if isinstance(outcome, dict):
                    return outcome
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)

    async def _cancel(self, run_id: str) -> dict[str, Any]:
        """Past its deadline: cancel the run and take the terminal it reaches."""
        try:
            async with asyncio.timeout(SETTLE_TIMEOUT):
                await self._request("DELETE", f"/dev/v1/runs/{quote(run_id, safe='')}")
                return await self._status_terminal(run_id)
        except TimeoutError:
            _bounded_append(self._unexplained, f"{run_id}: no terminal after a cancel")
            return {"type": "failed", "reason": "no_terminal"}

    async def _request(self, method: str, path: str, **body: Any) -> httpx.Response:
        """One API request, sent again across a listener kill when that is safe (it
        never arrived, or it is a GET); otherwise a transport failure is `_Lost`."""
        for attempt in range(MAX_RETRIES):
            listener = self._listener_kills
            try:
                return await self._http().request(method, path, json=body if body else None)
            except httpx.ConnectError:
                if not self._across_listener_kill(listener):
                    raise _Lost(sent=False) from None
            except httpx.TransportError:
                if method != "GET" or not self._across_listener_kill(listener):
                    raise _Lost(sent=True) from None
            await self._pause(attempt)
        raise _Lost(sent=method != "GET")

    def _across_listener_kill(self, listener_kills_before: int) -> bool:
        return self._listener_killing or self._listener_kills != listener_kills_before

    async def _pause(self, attempt: int) -> None:
        """Before a reconnection: the listener's restart, then a short backoff."""
        try:
            async with asyncio.timeout(SETTLE_TIMEOUT * 2):
                await self._up.wait()
        except TimeoutError:
            pass
        await asyncio.sleep(min(0.02 * (attempt + 1), 0.5))

    def _scn(self) -> Scenario:
        if self._scenario is None:
            raise AdkError("stress_target_not_open", "open the daemon target first")
        return self._scenario

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            raise AdkError("stress_target_not_open", "open the daemon target first")
        return self._client

    # -- chaos -------------------------------------------------------------------------

    async def _chaos(self, action: str) -> ChaosEvent:
        async with self._chaos_lock:
            daemon = self._daemon
            match action, daemon:
                case "kill_daemon", DaemonProcess():
                    return await self._kill_daemon(daemon)
                case "kill_listener", InProcessDaemon():
                    return await self._kill_listener(daemon)
                case "kill_daemon", InProcessDaemon():
                    why = "the daemon runs in this process"
                case "kill_listener", DaemonProcess():
                    why = "the daemon offers no way to kill only its HTTP listener from outside"
                case (("kill_daemon" | "kill_listener"), None):
                    why = "the daemon was not spawned here"
                case _:
                    why = "not an action the daemon target can do"
            return _event(action, "daemon", f"skipped: {why}")

    async def _kill_daemon(self, daemon: DaemonProcess) -> ChaosEvent:
        self._up.clear()
        self._generation += 1
        pid = await asyncio.to_thread(daemon.kill)
        if pid is None:
            self._up.set()
            return _event("kill_daemon", "daemon", "skipped: the daemon was not running")
        try:
            url = await asyncio.to_thread(daemon.start)
        except AdkError as error:
            self._restart_failures += 1
            self._down = True
            self._up.set()  # waiting units end at once (rejected) rather than at their deadline
            _log.warning("adk.stress.daemon_restart_failed", reason=str(error.reason))
            return _event("kill_daemon", f"daemon pid {pid}", "killed: the restart failed")
        # a fresh pool: requests still on the old one (to the dead process) fail as lost
        old, self._client = self._client, api_client(url, self._token, connections_for(self._scn()))
        if old is not None:
            await old.aclose()
        self._restarts += 1
        self._up.set()
        return _event("kill_daemon", f"daemon pid {pid}", "restarted")

    async def _kill_listener(self, daemon: InProcessDaemon) -> ChaosEvent:
        self._up.clear()
        self._listener_kills += 1
        self._listener_killing = True
        try:
            victim, restarted = await asyncio.to_thread(daemon.kill_listener)
        finally:
            self._listener_killing = False
        if restarted:
            self._restarts += 1
        else:
            self._listener_failures += 1
            self._down = True
        self._up.set()
        outcome = "restarted" if restarted else "killed: not restarted"
        return _event("kill_listener", f"http_listener {victim}", outcome)

    # -- invariants --------------------------------------------------------------------

    def _terminal_invariant(self) -> InvariantResult:
        ended = sum(n for outcome, n in self._terminals.items() if outcome is not Outcome.LOST)
        accepted_lost = self._accepted - ended
        held = 0 <= accepted_lost <= self._terminals[Outcome.LOST]
        counts = ", ".join(f"{outcome}={n}" for outcome, n in self._terminals.items() if n)
        detail = f"{self._accepted} runs accepted; terminals: {counts or 'none'}"
        if self._unknown_starts:
            detail += f"; {self._unknown_starts} start(s) cut by a listener kill"
        return InvariantResult(name="daemon_runs_reach_one_terminal", held=held, detail=detail)

    def _lost_invariant(self) -> InvariantResult:
        lost = self._terminals[Outcome.LOST]
        held = not self._unexplained and (lost == 0 or self._generation > 0)
        detail = f"{lost} lost across {self._generation} daemon kill(s)"
        if self._unexplained:
            detail += "; unexplained: " + "; ".join(self._unexplained[:5])
        return InvariantResult(name="daemon_lost_only_across_kill", held=held, detail=detail)

    async def _answers_invariant(self) -> InvariantResult:
        try:
            response = await self._http().get("/dev/v1/agents")
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
            for sample in [] if self._down else [*self._samples, *self._lost_samples]:
                problem = await self._check_session(sample)
                checked += 1
                if problem is not None:
                    _bounded_append(problems, problem)
        except _Lost:
            _bounded_append(problems, "the daemon stopped answering while sessions were read")
        detail = f"{checked} session(s) read back after {self._generation} kill(s)"
        if problems:
            detail += "; " + "; ".join(problems[:5])
        return InvariantResult(
            name="daemon_sessions_whole_invocations", held=not problems, detail=detail
        )

    async def _check_session(self, sample: _Sample) -> str | None:
        """What is wrong with one stored session, or None (see `session_problem`)."""
        path = _path("sessions", APP_NAME, sample.user, sample.session)
        response = await self._request("GET", path)
        if response.status_code == 404 and sample.outcome is Outcome.LOST:
            return None  # killed before its first event was stored
        if response.status_code != 200:
            return f"{sample.session}: read answered {response.status_code}"
        return session_problem(response.json(), sample.message, sample.outcome, sample.state_index)


def make_daemon_target(scenario: Scenario) -> DaemonApiTarget:
    """The engine's target for a daemon scenario (installed when this module loads)."""
    return DaemonApiTarget()


def _in_process(scenario: Scenario) -> bool:
    """Serve the spawned daemon in this process only for listener kills: a SIGKILL of
    the daemon would kill the harness with it."""
    chaos = scenario.chaos
    return chaos is not None and chaos.kill_listener_every_s > 0 and not chaos.kill_daemon_every_s


# -- helpers -----------------------------------------------------------------------------


def _outcome(terminal: dict[str, Any]) -> Outcome:
    match terminal.get("type"):
        case "completed":
            return Outcome.COMPLETED
        case "cancelled":
            return Outcome.CANCELLED
    return Outcome.FAILED  # failed, paused (never asked for) or unknown


def _path(*segments: str) -> str:
    return "/dev/v1/" + "/".join(quote(segment, safe="") for segment in segments)


def _event(action: str, target: str, outcome: str) -> ChaosEvent:
    return ChaosEvent(t_s=0.0, action=action, target=target, outcome=outcome)


def _bounded_append(items: list[str], item: str, limit: int = 64) -> None:
    if len(items) < limit:
        items.append(item)


def _keep(samples: list[_Sample], sample: _Sample) -> None:
    if len(samples) < MAX_LOST_SESSIONS:
        samples.append(sample)


# END


install_daemon_target(make_daemon_target)
