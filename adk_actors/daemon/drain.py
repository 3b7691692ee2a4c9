"""Draining a stopping daemon: no new requests, a bounded grace for what runs.

`drain(state)` refuses every new request from then on (`DevState.start_draining`:
503 ``developer_api_unavailable``; open event streams end at once), waits for the
requests already admitted (up to ``request_timeout`` + the grace: one of them may
still start a run), then up to ``drain_grace`` seconds from the start for every
running run to end on its own. Every run still running after that is cancelled
(reason ``daemon_stopping``), including one a slow request started late, and the
drain waits briefly for their terminals, sweeping again until none is running. A run
records each event in its session as it goes, so what a run stored before the daemon
stops stays stored; a cancelled run stores its terminal too. Paused runs are not
running: their continuation is in the session already.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from adk_actors import runs
from adk_actors.daemon.state import DevState
from providers.errors import AdkError
from supervision import get_logger

CANCEL_REASON = "daemon_stopping"
CANCEL_WAIT = runs.CANCEL_GRACE + 5.0
"""How long the runs cancelled at the end of the grace have to store their terminal."""
_PAGE = 500
_log = get_logger("adk_actors.daemon.drain")


class DrainReport(NamedTuple):
    """What a drain found: runs that ended within the grace, and runs it cancelled."""

    ended: int
    cancelled: int


def drain(state: DevState, grace: float | None = None) -> DrainReport:
    """Stop taking requests and let running runs end (see the module doc); `grace`
    defaults to the settings' ``drain_grace``."""
    grace = state.settings.drain_grace if grace is None else grace
    started = time.monotonic()
    state.start_draining()
    _log.info("adk.daemon.draining", requests=state.requests_in_flight)
    if not state.wait_for_requests(state.settings.request_timeout + grace):
        _log.warning("adk.daemon.requests_left_in_flight", requests=state.requests_in_flight)
    deadline = started + grace
    ended = 0
    while time.monotonic() < deadline:
        running = running_runs()
        if not running:
            break
        for run_id in running:
            if _wait(run_id, deadline - time.monotonic()):
                ended += 1
    cancelled = _cancel_running(time.monotonic() + CANCEL_WAIT)
    _log.info("adk.daemon.drained", ended=ended, cancelled=cancelled)
    return DrainReport(ended, cancelled)


def _cancel_running(deadline: float) -> int:
    """Cancel every running run and wait for their terminals until `deadline`, sweeping
    again for runs that started meanwhile; how many it cancelled."""
    cancelled: set[str] = set()
    while True:
        left = running_runs()
        for run_id in left:
            if run_id in cancelled:
                continue
            try:
                runs.cancel(run_id, reason=CANCEL_REASON)
            except AdkError:
                continue  # it ended meanwhile
            cancelled.add(run_id)
        if not left or time.monotonic() >= deadline:
            return len(cancelled)
        for run_id in left:
            _wait(run_id, deadline - time.monotonic())


def running_runs() -> list[str]:
    """The ids of the runs of this process that are running now."""
    found: list[str] = []
    cursor: str | None = None
    while True:
        try:
            page = runs.list(state="running", limit=_PAGE, cursor=cursor)
        except AdkError:
            return found
        found.extend(view["run_id"] for view in page["runs"])
        cursor = page["next_cursor"]
        if cursor is None:
            return found


def _wait(run_id: str, timeout: float) -> bool:
    """True if `run_id` ended within `timeout` seconds (or was gone already)."""
    if timeout <= 0:
        return False
    try:
        runs.wait(run_id, timeout=timeout)
    except runs.RunTimeout:
        return False
    except AdkError:
        return True  # not found: it ended and was dropped
    return True
