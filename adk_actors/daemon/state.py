"""What every route of the daemon shares: its settings, sessions, Runners, and admission.

One `DevState` per HTTP app (``request.app.state.dev``). Runners are made per
``(agent_name, app_name)`` on first use with the daemon's runner options and kept in
a bounded LRU; a Runner is a value (the agent is resolved by name at call time), so
dropping one from the cache loses nothing.

Admission and the drain share one lock: `admit_request` checks ``draining`` and
counts the request in flight in one step, and `start_draining` sets the flag under
the same lock. So once `start_draining` returns, no request is admitted any more,
and every request admitted before is counted until it ends: a drain that waits for
`wait_for_requests` sees every run those requests start.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from adk_actors.daemon.settings import DevSettings
from adk_actors.runner import Runner
from adk_actors.sessions import SessionService

MAX_CACHED_RUNNERS = 256


class DevState:
    """Settings, the session service, Runner options, the draining flag, the count of
    requests in flight, and what to do when the drain starts."""

    def __init__(
        self,
        settings: DevSettings,
        sessions: SessionService,
        runner_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.runner_options = dict(runner_options or {})
        self._runners: OrderedDict[tuple[str, str], Runner] = OrderedDict()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._draining = False
        self._in_flight = 0
        self._on_drain: dict[object, Callable[[], None]] = {}

    @property
    def draining(self) -> bool:
        """True once the daemon began to stop: new requests get 503. One attribute
        read, no lock: cheap and safe from any thread or event loop."""
        return self._draining

    def start_draining(self) -> None:
        """From now on every new request is refused (503); those in flight go on. Runs
        the callbacks of `when_draining` (on this thread)."""
        with self._lock:
            self._draining = True
            callbacks = list(self._on_drain.values())
            self._on_drain.clear()
        for callback in callbacks:
            callback()

    def when_draining(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` once, when the drain starts (now, if it has); returns the
        undo. The callback runs on the thread that starts the drain: it must be quick
        and thread-safe (for an event loop: ``loop.call_soon_threadsafe``)."""
        token = object()
        with self._lock:
            if not self._draining:
                self._on_drain[token] = callback
                return lambda: self._forget(token)
        callback()
        return lambda: None

    def _forget(self, token: object) -> None:
        with self._lock:
            self._on_drain.pop(token, None)

    @property
    def requests_in_flight(self) -> int:
        """Requests a route is serving, not counting event streams once they started."""
        return self._in_flight

    def admit_request(self) -> bool:
        """Count a new request in flight, unless the daemon drains (then False and not
        counted): one step under the drain's lock."""
        with self._lock:
            if self._draining:
                return False
            self._in_flight += 1
            return True

    def request_ended(self) -> None:
        """An admitted request was answered (or its event stream started)."""
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.notify_all()

    def wait_for_requests(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds until no request is in flight; True if none is."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, max(timeout, 0.0))

    def runner(self, agent_name: str, app_name: str) -> Runner:
        """The Runner for `agent_name` in `app_name` (made once, then reused)."""
        key = (agent_name, app_name)
        with self._lock:
            runner = self._runners.get(key)
            if runner is not None:
                self._runners.move_to_end(key)
                return runner
        runner = Runner(agent_name, app_name, self.sessions, **self.runner_options)
        with self._lock:
            self._runners[key] = runner
            self._runners.move_to_end(key)
            while len(self._runners) > MAX_CACHED_RUNNERS:
                self._runners.popitem(last=False)
        return runner
