"""The invariant checks of a stress run, as pure functions over measured state, so each
can be shown to fail (tests feed them a leaked permit or a run with two terminals).

Every check returns an `InvariantResult` whose `detail` says what was measured.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from adk_actors.events import Event
from adk_actors.stress.records import InvariantResult, Outcome

MAX_LISTED_SESSIONS = 500
"""Sessions `sessions_bounded` counts at most (the store's longest listing)."""
MAX_PROBLEMS_SHOWN = 5
"""Examples a failed check names in its detail (the rest are counted)."""
_MESSAGE = re.compile(r"message (\d{1,7})")
"""The user message of stress run N (what the scripted model echoes)."""


def tally(counts: Mapping[str, int]) -> str:
    """Counts for a detail line, by name: ``"a 2, b 1"``, or ``"none"``."""
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "none"


def one_terminal(
    started: int, counts: Mapping[str, int], duplicates: int, unfinished: int
) -> InvariantResult:
    """``engine_accounting``: every run the engine started ended exactly once in its own
    books (the runtime's side is ``every_run_one_terminal``, checked by the target)."""
    ended = sum(counts.get(outcome.value, 0) for outcome in Outcome)
    held = started == ended and duplicates == 0 and unfinished == 0
    detail = f"started {started}, ended {ended}, duplicate terminals {duplicates}, unfinished {unfinished}"
    return InvariantResult(name="engine_accounting", held=held, detail=detail)


def runs_one_terminal(
    started: int, answered: int, unanswered: Mapping[str, int], disagreed: Sequence[str]
) -> InvariantResult:
    """``every_run_one_terminal``, from the runtime: every run the target started was
    answered with a terminal by its waiter (`unanswered`: the others, by the wait's
    error reason), and asked again (a second waiter, then its status) the runtime gave
    the same terminal (`disagreed`: the runs it reported differently)."""
    missing = sum(unanswered.values())
    held = started == answered + missing and missing == 0 and not disagreed
    detail = _problems(
        f"started {started}, answered {answered}, without a terminal {missing} "
        f"({tally(unanswered)})",
        disagreed,
    )
    return InvariantResult(name="every_run_one_terminal", held=held, detail=detail)


def no_unexpected_lost(counts: Mapping[str, int], daemon_kills: int) -> InvariantResult:
    """``no_unexpected_lost``: runs are LOST only when the daemon was SIGKILLed."""
    lost = counts.get(Outcome.LOST.value, 0)
    held = lost == 0 or daemon_kills > 0
    return InvariantResult(
        name="no_unexpected_lost", held=held, detail=f"lost {lost}, daemon kills {daemon_kills}"
    )


def no_leaked_permits(
    status: Mapping[str, object], peak: int, *, exercised: bool = True
) -> InvariantResult:
    """``no_leaked_permits``: the admission controller holds no active or queued permit,
    and (when the load's runs take permits: `exercised`) the load did take some
    (`peak`: the most seen active at once; 0 fails the check, which was then not
    exercised). A renamed status key raises."""
    active, queued = status["active"], status["queued"]
    detail = f"admission active {active}, queued {queued}; peak active during the load {peak}"
    if peak <= 0:
        detail += " (not exercised: no run took a permit)"
    held = active == 0 and queued == 0 and (peak > 0 or not exercised)
    return InvariantResult(name="no_leaked_permits", held=held, detail=detail)


def no_leaked_processes(baseline: int, now: int) -> InvariantResult:
    """``no_leaked_processes``: the kernel's live processes are back to the baseline."""
    return InvariantResult(
        name="no_leaked_processes",
        held=now <= baseline,
        detail=f"kernel processes {now}, baseline {baseline}",
    )


def no_leaked_threads(
    baseline: int,
    now: int,
    pools: Mapping[str, Mapping[str, int]] | None = None,
    new_threads: Mapping[str, int] | None = None,
) -> InvariantResult:
    """``no_leaked_threads``: the threads outside the kernel's pools are back to the
    baseline, and each pool (``threads`` and ``max_threads``, as
    `supervision.thread_pools` gives them) is within its bound. A pool keeps idle
    threads after load by design, so it is held to its bound, not to the baseline.
    `new_threads` (threads outside the pools by name, not there at the baseline) go
    into the detail."""
    shown_pools = sorted((pools or {}).items())
    over = [name for name, pool in shown_pools if pool["threads"] > pool["max_threads"]]
    detail = f"threads outside pools {now}, baseline {baseline}"
    if shown_pools:
        listed = ", ".join(
            f"{name} {pool['threads']}/{pool['max_threads']}" for name, pool in shown_pools
        )
        detail += f"; pool threads/bound: {listed}"
    if over:
        detail += f"; over their bound: {', '.join(over)}"
    if new_threads:
        shown = sorted(new_threads.items(), key=lambda item: (-item[1], item[0]))
        listed = ", ".join(f"{name} x{count}" for name, count in shown[:MAX_PROBLEMS_SHOWN])
        detail += f"; new: {listed}"
    return InvariantResult(
        name="no_leaked_threads", held=now <= baseline and not over, detail=detail
    )


def no_open_invocations(stats: Mapping[str, int]) -> InvariantResult:
    """``no_open_invocations``: no run server, retained run or pending handoff is left."""
    held = all(stats.get(key, 0) == 0 for key in ("actors", "retained", "pending_handoffs"))
    shown = ", ".join(f"{key} {value}" for key, value in sorted(stats.items()))
    return InvariantResult(name="no_open_invocations", held=held, detail=shown or "no runs")


def supervisor_counts(baseline: Mapping[str, int], now: Mapping[str, int]) -> InvariantResult:
    """``supervisor_counts_baseline``: every supervisor has its baseline child count."""
    off = [
        f"{name} {now.get(name)} (baseline {count})"
        for name, count in sorted(baseline.items())
        if now.get(name) != count
    ]
    detail = "; ".join(off) if off else f"{len(baseline)} supervisors at baseline"
    return InvariantResult(name="supervisor_counts_baseline", held=not off, detail=detail)


def sessions_consistent(
    checked: int, problems: Sequence[str], not_completed: int = 0
) -> InvariantResult:
    """``sessions_consistent``: each checked session holds exactly the events of its
    completed invocations, and every stored invocation (failed, cancelled and killed
    ones too: `not_completed` of the checked sessions are theirs) ends exactly once."""
    summary = f"{checked} sessions checked"
    if not_completed:
        summary += f" ({not_completed} of runs that did not complete)"
    return InvariantResult(
        name="sessions_consistent", held=not problems, detail=_problems(summary, problems)
    )


def sessions_bounded(stored: int, bound: int, deleted: int) -> InvariantResult:
    """``sessions_bounded``: the runs' sessions left in the store at the end are within
    the bound (the checked sample and the live generations; counted up to
    `MAX_LISTED_SESSIONS`): ended runs' sessions were deleted as the load went on."""
    return InvariantResult(
        name="sessions_bounded",
        held=stored <= bound,
        detail=f"{stored} sessions stored at the end (bound {bound}), {deleted} deleted",
    )


def replies_match(completed: int, problems: Sequence[str]) -> InvariantResult:
    """``replies_match``: every completed run answered with its own message."""
    return InvariantResult(
        name="replies_match",
        held=not problems,
        detail=_problems(f"{completed} completed runs", problems),
    )


def check_history(
    label: str, events: Sequence[Event], completed: set[int], size: int, *, exact: bool
) -> list[str]:
    """What is wrong with one session's history (empty when consistent): every
    invocation opens with one user message and ends exactly once (a final reply or an
    error, killed runs included); a completed run's invocation holds exactly `size`
    events ending in a final reply equal to its message; with `exact`, every completed
    run is there exactly once."""
    problems: list[str] = []
    groups: dict[str, list[Event]] = {}
    for event in events:
        groups.setdefault(event.invocation_id, []).append(event)
    found: set[int] = set()
    for group in groups.values():
        opening = group[0]
        numbered = _MESSAGE.fullmatch(opening.text())
        if opening.author != "user" or numbered is None:
            problems.append(f"{label}: an invocation opens without its user message")
            continue
        index = int(numbered[1])
        terminals = [event for event in group if event.is_final or event.error is not None]
        if len(terminals) != 1:
            problems.append(f"{label}: run {index} has {len(terminals)} terminal events")
        if index not in completed:
            continue
        if index in found:
            problems.append(f"{label}: run {index} is stored twice")
        found.add(index)
        last = group[-1]
        if len(group) != size or not last.is_final or last.text() != opening.text():
            problems.append(f"{label}: run {index} holds {len(group)} events, expected {size}")
    if exact and found != completed:
        problems.append(f"{label}: {len(completed - found)} completed runs are missing")
    return problems


def _problems(summary: str, problems: Sequence[str]) -> str:
    if not problems:
        return summary
    shown = "; ".join(problems[:MAX_PROBLEMS_SHOWN])
    more = (
        f" (+{len(problems) - MAX_PROBLEMS_SHOWN} more)"
        if len(problems) > MAX_PROBLEMS_SHOWN
        else ""
    )
    return f"{summary}: {len(problems)} problems: {shown}{more}"
