"""What every route of the daemon shares: its settings, sessions and Runners.

One `DevState` per HTTP app (``request.app.state.dev``). Runners are made per
``(agent_name, app_name)`` on first use with the daemon's runner options and kept in
a bounded LRU; a Runner is a value (the agent is resolved by name at call time), so
dropping one from the cache loses nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from adk_actors.daemon.settings import DevSettings
from adk_actors.runner import Runner
from adk_actors.sessions import SessionService

MAX_CACHED_RUNNERS = 256


class DevState:
    """Settings, the session service, Runner options, the draining flag and the count
    of requests in flight."""

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
        self._draining = threading.Event()
        self._in_flight = 0

    @property
    def draining(self) -> bool:
        """True once the daemon began to stop: new requests get 503."""
        return self._draining.is_set()

    def start_draining(self) -> None:
        """From now on every new request is refused (503); those in flight go on."""
        self._draining.set()

    @property
    def requests_in_flight(self) -> int:
        """Requests a route is serving, not counting event streams once they started."""
        return self._in_flight

    def request_started(self) -> None:
        with self._lock:
            self._in_flight += 1

    def request_ended(self) -> None:
        with self._lock:
            self._in_flight -= 1

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
