"""What the daemon stress target refuses at `open` and checks at `close`.

Refusals: kinds other than ``runs`` and ``sessions``, and chaos actions a daemon target
cannot do (`check_chaos`): the in-process kills (run workers, agents, invocation
servers: those processes live in the daemon's process, out of the harness's reach),
``kill_listener`` unless the harness serves the spawned daemon itself, ``kill_daemon``
unless it spawned the daemon as a subprocess. Checks: one terminal per accepted run,
LOST only across a daemon kill, the listener's restarts, whole invocations in a stored
session (`session_problem`), the daemon's kernel counters back to their baseline
(`kernel_invariant`, from ``GET /dev/v1/observability``) and a clean exit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from adk_actors.stress.records import ChaosAction, InvariantResult, Outcome
from adk_actors.stress.scenario import DaemonTarget, Scenario
from providers.errors import AdkError

SUPPORTED_KINDS: Final = ("runs", "sessions")
IN_PROCESS_ONLY: Final = (
    ChaosAction.KILL_RUN_WORKERS,
    ChaosAction.KILL_AGENTS,
    ChaosAction.KILL_INVOCATION_SERVERS,
)
"""Chaos actions on processes inside the runtime: the in-process target's only."""
SETTLED_KEYS: Final = ("task_threads_busy", "task_queue")
"""Kernel counters that are 0 once nothing runs."""
BASELINE_KEYS: Final = ("task_threads_abandoned", "unregistered_processes")
"""Kernel counters that come back to the baseline taken at `open` once nothing runs
(retained runs and idle sessions are registered processes, kept for their retention)."""


def check_kinds(scenario: Scenario) -> None:
    """Refuse a kind the daemon target cannot drive (``stress_kind_not_supported``)."""
    kinds: list[str] = [scenario.kind]
    if scenario.kind == "mixed" and scenario.mix is not None:
        kinds = [kind for kind, weight in scenario.mix.weights().items() if weight > 0]
    for kind in kinds:
        if kind not in SUPPORTED_KINDS:
            raise AdkError(
                ("stress_kind_not_supported", kind),
                f"kind {kind} is not supported against a daemon (only runs and sessions)",
            )


def check_chaos(scenario: Scenario, in_process: bool) -> None:
    """Refuse a chaos action this daemon target would always skip
    (``stress_chaos_not_supported``); `in_process`: the harness serves the daemon."""
    chaos = scenario.chaos
    if chaos is None or not isinstance(scenario.target, DaemonTarget):
        return
    spawned = scenario.target.daemon.url is None
    rates = {
        ChaosAction.KILL_RUN_WORKERS: chaos.kill_run_workers_per_s,
        ChaosAction.KILL_AGENTS: chaos.kill_agents_per_s,
        ChaosAction.KILL_INVOCATION_SERVERS: chaos.kill_invocation_servers_per_s,
        ChaosAction.KILL_LISTENER: chaos.kill_listener_every_s,
        ChaosAction.KILL_DAEMON: chaos.kill_daemon_every_s,
    }
    for action, rate in rates.items():
        if not rate:
            continue
        why = _why_not(action, spawned, in_process)
        if why is not None:
            raise AdkError(
                ("stress_chaos_not_supported", action.value),
                f"chaos {action.value} cannot run against this daemon target: {why}",
            )


def serves_in_process(scenario: Scenario) -> bool:
    """Serve a spawned daemon in this process only for listener kills (the only way to
    reach its listener process): a SIGKILL of the daemon would kill the harness too."""
    chaos = scenario.chaos
    return chaos is not None and chaos.kill_listener_every_s > 0 and not chaos.kill_daemon_every_s


def _why_not(action: ChaosAction, spawned: bool, in_process: bool) -> str | None:
    if action in IN_PROCESS_ONLY:
        return "its processes live in the daemon's process; use the inprocess target"
    if not spawned:
        return "the harness did not start that daemon (use {'daemon': {'spawn': true}})"
    if action is ChaosAction.KILL_LISTENER and not in_process:
        return "only a daemon the harness serves itself (spawn, no kill_daemon) has a listener it can kill"
    if action is ChaosAction.KILL_DAEMON and in_process:
        return "the daemon runs in the harness's process, which a SIGKILL would end"
    return None


def bounded_append(items: list[str], item: str, limit: int = 64) -> None:
    """Keep at most `limit` problem descriptions (the first ones)."""
    if len(items) < limit:
        items.append(item)


def terminal_invariant(
    accepted: int,
    terminals: Mapping[Outcome, int],
    unknown_starts: int,
    cross_checked: int = 0,
    disagreed: list[str] | None = None,
) -> InvariantResult:
    """Every accepted run reached one terminal, or was lost across a daemon kill; and
    the daemon's own record of each run (`cross_checked` of them) holds the terminal
    its event stream delivered (`disagreed`: those that did not)."""
    ended = sum(n for outcome, n in terminals.items() if outcome is not Outcome.LOST)
    accepted_lost = accepted - ended
    held = 0 <= accepted_lost <= terminals[Outcome.LOST] and not disagreed
    counts = ", ".join(f"{outcome}={n}" for outcome, n in terminals.items() if n)
    detail = f"{accepted} runs accepted; terminals: {counts or 'none'}"
    if cross_checked:
        detail += f"; {cross_checked} checked against the daemon's record"
    if disagreed:
        detail += "; disagreeing: " + "; ".join(disagreed[:5])
    if unknown_starts:
        detail += f"; {unknown_starts} start(s) cut by a listener kill"
    return InvariantResult(name="daemon_runs_reach_one_terminal", held=held, detail=detail)


def lost_invariant(lost: int, kills: int, unexplained: list[str]) -> InvariantResult:
    """Runs end LOST only across a daemon kill; no transport failure without one."""
    held = not unexplained and (lost == 0 or kills > 0)
    detail = f"{lost} lost across {kills} daemon kill(s)"
    if unexplained:
        detail += "; unexplained: " + "; ".join(unexplained[:5])
    return InvariantResult(name="daemon_lost_only_across_kill", held=held, detail=detail)


def kernel_counters(body: object) -> dict[str, int] | None:
    """The kernel counters of a ``/dev/v1/observability`` answer (with
    ``unregistered_processes``), or None when it has none."""
    kernel = body.get("kernel") if isinstance(body, dict) else None
    if not isinstance(kernel, dict):
        return None
    try:
        counters = {str(key): int(value) for key, value in kernel.items()}
        counters["unregistered_processes"] = counters["processes"] - counters["registered"]
        for key in (*SETTLED_KEYS, *BASELINE_KEYS):
            _ = counters[key]
    except (KeyError, TypeError, ValueError):
        return None
    return counters


def kernel_problems(baseline: Mapping[str, int], now: Mapping[str, int]) -> list[str]:
    """What in `now` is not back where an idle daemon is (empty: settled)."""
    problems = [f"{key} {now[key]}" for key in SETTLED_KEYS if now[key] != 0]
    problems += [
        f"{key} {now[key]} (baseline {baseline[key]})"
        for key in BASELINE_KEYS
        if now[key] > baseline[key]
    ]
    return problems


def kernel_invariant(
    baseline: Mapping[str, int] | None, now: Mapping[str, int] | None, why_not: str = ""
) -> InvariantResult:
    """``daemon_no_leaks``: no busy or queued pool task, no abandoned thread and no
    unregistered (transient) process beyond the baseline once the load settled."""
    name = "daemon_no_leaks"
    if baseline is None or now is None:
        reason = why_not or "the daemon exposes no kernel counters (GET /dev/v1/observability)"
        return InvariantResult(name=name, held=False, detail=f"not checked: {reason}")
    problems = kernel_problems(baseline, now)
    shown = ", ".join(f"{key} {now[key]}" for key in (*SETTLED_KEYS, *BASELINE_KEYS))
    detail = f"settled: {shown}" if not problems else "not settled: " + ", ".join(problems)
    return InvariantResult(name=name, held=not problems, detail=detail)


def stop_invariants(code: int | None, leftovers: list[str]) -> list[InvariantResult]:
    """A spawned daemon's stop: exit code 0 after its drain, and nothing left behind."""
    left = f"{len(leftovers)} left after the stop: {', '.join(leftovers[:5])}"
    return [
        InvariantResult(
            name="daemon_clean_exit", held=code == 0, detail=f"exit code {code} on SIGTERM"
        ),
        InvariantResult(
            name="daemon_no_child_processes",
            held=not leftovers,
            detail=left if leftovers else "nothing left after the stop",
        ),
    ]


def listener_invariant(kills: int, failures: int) -> InvariantResult:
    """Every killed listener was restarted by its supervisor and its port answered."""
    return InvariantResult(
        name="daemon_listener_restarted",
        held=failures == 0,
        detail=f"{kills} listener kill(s), {failures} not restarted with the port answering",
    )


def session_problem(
    session: Any, message: str, outcome: Outcome, state_index: int | None
) -> str | None:
    """What breaks "whole invocations" in one session's JSON, or None.

    Its events group by invocation id into contiguous runs, each opened by the user's
    message; a completed run's one invocation ends with a final answer; only a run lost
    across a kill may stop part way. `state_index` is checked against the state."""
    name = str(session.get("id", "?")) if isinstance(session, dict) else "?"
    if not isinstance(session, dict) or not isinstance(session.get("events"), list):
        return f"{name}: not a session"
    events = [event for event in session["events"] if isinstance(event, dict)]
    if session.get("events_truncated"):
        return f"{name}: more events than one page holds"
    groups: list[list[dict[str, Any]]] = []
    for event in events:
        if groups and groups[-1][0].get("invocation_id") == event.get("invocation_id"):
            groups[-1].append(event)
        elif any(group[0].get("invocation_id") == event.get("invocation_id") for group in groups):
            return f"{name}: invocations interleave"
        else:
            groups.append([event])
    if state_index is not None and session.get("state", {}).get("stress_index") != state_index:
        return f"{name}: its state was not kept"
    if not groups:
        return None if outcome is Outcome.LOST else f"{name}: no events stored"
    if len(groups) != 1:
        return f"{name}: {len(groups)} invocations for one run"
    group = groups[0]
    if group[0].get("author") != "user" or group[0].get("text") != message:
        return f"{name}: the invocation does not open with its message"
    final = group[-1]
    complete = len(group) >= 2 and final.get("is_final") is True and "error" not in final
    if outcome is Outcome.COMPLETED and not complete:
        return f"{name}: a completed run without its final answer"
    return None
