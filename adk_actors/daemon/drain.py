"""Draining a stopping daemon: no new requests, a bounded grace for what runs.

`drain(state)` refuses every new request from then on (`DevState.start_draining`:
503 ``developer_api_unavailable``), waits up to ``drain_grace`` seconds for the
requests in flight and then for every running run to end on its own, and cancels the
runs still running after it (reason ``daemon_stopping``), waiting briefly for their
terminal. A run records each event in its session as it goes, so what a run stored
before the daemon stops stays stored; a cancelled run stores its terminal too.
Paused runs are not running: their continuation is in the session already.
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
"""How long a run cancelled at the end of the grace has to store its terminal."""
_POLL = 0.05
_PAGE = 500
_log = get_logger("adk_actors.daemon.drain")


class DrainReport(NamedTuple):
    """What a drain found: runs that ended within the grace, and runs it cancelled."""

    ended: int
    cancelled: int


def drain(state: DevState, grace: float | None = None) -> DrainReport:
    """Stop taking requests and let running runs end (see the module doc); `grace`
    defaults to the settings' ``drain_grace``."""
    state.start_draining()
    deadline = time.monotonic() + (state.settings.drain_grace if grace is None else grace)
    _log.info("adk.daemon.draining", requests=state.requests_in_flight)
    while state.requests_in_flight > 0 and time.monotonic() < deadline:
        time.sleep(_POLL)  # a request in flight may still start a run
    ended = 0
    while time.monotonic() < deadline:
        running = running_runs()
        if not running:
            break
        for run_id in running:
            if _wait(run_id, deadline - time.monotonic()):
                ended += 1
    left = running_runs()
    for run_id in left:
        try:
            runs.cancel(run_id, reason=CANCEL_REASON)
        except AdkError:
            pass  # it ended meanwhile
    cancel_deadline = time.monotonic() + CANCEL_WAIT
    for run_id in left:
        _wait(run_id, cancel_deadline - time.monotonic())
    _log.info("adk.daemon.drained", ended=ended, cancelled=len(left))
    return DrainReport(ended, len(left))


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
