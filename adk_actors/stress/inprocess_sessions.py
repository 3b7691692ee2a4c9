"""The sessions the in-process target's runs write, kept bounded and checked.

Kind ``runs``: each run has a session of its own; a seeded sample of them (every
outcome: completed, failed, cancelled, rejected ones alike) is kept for the history
check at the end and every other session is deleted as soon as its run ended. Kind
``sessions``: runs share a bounded set of sessions, `runs_per_session` runs each before
the next generation starts; a generation two behind the newest whose runs have all
ended is checked (each stored invocation ends exactly once, each completed run is
there exactly once) and deleted. So the store holds a bounded number of sessions
however long the scenario runs, and the check sees killed runs' sessions too.
"""

from __future__ import annotations

import random
from collections import Counter

from adk_actors.events import Event
from adk_actors.sessions import InMemorySessionService, LmdbSessionService
from adk_actors.stress import invariants
from adk_actors.stress.latency import SampleReservoir
from adk_actors.stress.records import InvariantResult, Outcome
from providers.errors import AdkError
from supervision.aio import run_blocking

MAX_CHECKED_SESSIONS = 256
"""Sessions of kind ``runs`` kept for the history check (a seeded sample)."""
MAX_RUNS_PER_SESSION = 4096
MAX_PROBLEMS = 100
_GENERATIONS_KEPT = 2
"""Generations of shared sessions that may still take runs (the newest and the one
before); older ones are retired once their runs have ended."""


_Store = InMemorySessionService | LmdbSessionService


class SessionBook:
    """What the target's runs left in the store, what is checked, what is deleted."""

    def __init__(
        self,
        store: _Store,
        app: str,
        user: str,
        *,
        seed: int,
        shared_sessions: int,
        runs_per_session: int,
        checked_sessions: int = MAX_CHECKED_SESSIONS,
        expected_events: int,
    ) -> None:
        self._store = store
        self._app, self._user = app, user
        self._shared = shared_sessions
        self._per_session = runs_per_session
        self._size = expected_events
        self._sample: SampleReservoir[tuple[int, Outcome]] = SampleReservoir(
            checked_sessions, rng=random.Random(seed)
        )
        self._checked_cap = checked_sessions
        self._done: dict[str, set[int]] = {}
        """Shared session -> its completed runs (live generations only)."""
        self._generations: dict[int, set[str]] = {}
        self._live: Counter[str] = Counter()
        self._newest = 0
        self.problems: list[str] = []
        self.checked = 0
        self.checked_not_completed = 0
        self.deleted = 0

    # -- kind sessions -----------------------------------------------------------------------

    def shared_session(self, index: int) -> str:
        """Run `index`'s shared session: slot ``index % shared``, generation
        ``index // (shared * runs_per_session)``."""
        generation = index // (self._shared * self._per_session)
        return f"s{index % self._shared}.{generation}"

    def begin_shared(self, index: int) -> str:
        """A run of kind ``sessions`` starts: its session, counted live."""
        session_id = self.shared_session(index)
        generation = int(session_id.rsplit(".", 1)[1])
        self._newest = max(self._newest, generation)
        self._generations.setdefault(generation, set()).add(session_id)
        self._done.setdefault(session_id, set())
        self._live[session_id] += 1
        return session_id

    async def end_shared(self, session_id: str, index: int, outcome: Outcome) -> None:
        """A run of kind ``sessions`` ended; retire the generations that are done."""
        if outcome is Outcome.COMPLETED:
            self._done.setdefault(session_id, set()).add(index)
        self._live[session_id] -= 1
        if self._live[session_id] <= 0:
            del self._live[session_id]
        retired: list[str] = []  # chosen without awaiting: runs end concurrently
        for generation in sorted(self._generations):
            if generation > self._newest - _GENERATIONS_KEPT:
                break
            sessions = self._generations[generation]
            retired.extend(old for old in sorted(sessions) if old not in self._live)
            sessions.difference_update(retired)
            if not sessions:
                del self._generations[generation]
        for old in retired:
            await self._retire(old, self._done.pop(old, set()), exact=True)

    # -- kind runs ---------------------------------------------------------------------------

    async def end_own(self, index: int, outcome: Outcome) -> None:
        """A run of kind ``runs`` ended: kept in the sample, or its session deleted
        (or the session it displaced from the sample)."""
        left = self._sample.add((index, outcome))
        if left is not None:
            await self._delete(f"r{left[0]}")

    # -- the end -----------------------------------------------------------------------------

    async def check(self) -> list[InvariantResult]:
        """Check every session still kept (then delete it), and that the store holds
        no more sessions than the bound (what was left behind)."""
        stored = await self._stored()
        for index, outcome in list(self._sample.items):
            completed = outcome is Outcome.COMPLETED
            found = await self._retire(
                f"r{index}", {index} if completed else set(), exact=completed
            )
            self.checked_not_completed += found and not completed
        self._sample.items.clear()
        for generation in sorted(self._generations):
            for session_id in sorted(self._generations[generation]):
                await self._retire(session_id, self._done.pop(session_id, set()), exact=True)
        self._generations.clear()
        bound = self.bound()
        return [
            invariants.sessions_consistent(
                self.checked, self.problems[:MAX_PROBLEMS], self.checked_not_completed
            ),
            invariants.sessions_bounded(stored, bound, self.deleted),
        ]

    def bound(self) -> int:
        """The most sessions the store may hold at the end: the sample of kind ``runs``
        and the live generations of kind ``sessions``."""
        return self._checked_cap + _GENERATIONS_KEPT * self._shared

    async def _retire(self, session_id: str, done: set[int], *, exact: bool) -> bool:
        """Check `session_id`'s history against its completed runs, then delete it;
        whether it was stored."""
        events = await run_blocking(self._events, session_id)
        if events is None:
            if done:
                self._problem(f"{session_id}: missing, with {len(done)} completed runs")
            return False
        self.checked += 1
        for problem in invariants.check_history(session_id, events, done, self._size, exact=exact):
            self._problem(problem)
        await self._delete(session_id)
        return True

    def _events(self, session_id: str) -> list[Event] | None:
        try:
            return list(self._store.get_session(self._app, self._user, session_id).events)
        except AdkError:
            return None

    async def _delete(self, session_id: str) -> None:
        try:
            await run_blocking(self._store.delete_session, self._app, self._user, session_id)
            self.deleted += 1
        except AdkError as error:
            if error.reason != "not_found":  # never created (a refused run)
                self._problem(f"{session_id}: could not be deleted ({error.reason})")

    async def _stored(self) -> int:
        listed = await run_blocking(
            self._store.list_sessions, self._app, self._user, invariants.MAX_LISTED_SESSIONS
        )
        return len(listed)

    def _problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)
