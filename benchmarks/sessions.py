"""LMDB sessions before and after: read-only reads, continuations apart, one cache per path.

Figures in milliseconds (p50, p99) on `LmdbSessionService` environments in fresh temp
directories (a real disk here, so a write transaction that wrote pays its fsync):

1. `get_session` of a session with 20 events: after, as shipped (a read-only
   transaction); before, the same operation run in a write transaction, as every
   operation was. Once alone, once while another OS process writes invocation steps to
   another session of the same path back to back: LMDB has one writer at a time, so a
   read in a write transaction queues behind each step's commit, a read-only one never
   does. (Alone both cost the same: a write transaction that wrote nothing commits
   without writing or syncing anything.)
2. One invocation step (`add_event_if_state` expecting a small ``_adk:open:`` token,
   with a text event) in a session holding 0, 1 or 8 MiB of unclaimed continuations
   (1 MiB each): after, as shipped (continuations in their own table); before, the same
   state with the continuations inside the record, the old layout (which the service
   still reads), so every step decodes and re-encodes them. Each layout has its own
   environment, so one's page churn never slows the other.
3. The first `get_session` of a 1,000-event session by a second service opened on a
   path another service has read (as a restarted component opens its service again
   while the old one is still open): after, as shipped (one event cache per path, so
   the other service's read is a hit); before, the path's cache emptied first, which
   is what the second service's own cache held when each service had one (it decoded
   the whole history, and kept a second copy of it).

The two sides of a row run in turn, in alternating order, several rounds; each side's
percentiles are over all its samples.

Usage: ``python benchmarks/sessions.py [--quick]``
"""

from __future__ import annotations

import argparse
import gc
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import lmdb

from adk_actors.events import Event
from adk_actors.sessions import core
from adk_actors.sessions.lmdb_store import LmdbSessionService
from providers import content

APP, USER = "bench", "u"
OPEN_KEY = "_adk:open:inv-bench"
TOKEN = "0123456789abcdef0123456789abcdef"
WRITER_SECONDS = 120.0  # the writer process's own limit, should this one die first


def continuation(number: int) -> dict[str, Any]:
    """A paused invocation's continuation of about 1 MiB (JSON): a long history."""
    part = {"role": "model", "text": f"continuation {number} " + "x" * 1000}
    return {"kind": "tool_confirmation", "invocation": number, "history": [part] * 1040}


def text_event(text: str) -> Event:
    return Event.new("Agent", "inv-bench", content.from_text(text, role="model"))


def percentiles_ms(samples: list[float]) -> tuple[float, float]:
    """(p50, p99) in milliseconds."""
    ordered = sorted(samples)
    return ordered[len(ordered) // 2] * 1e3, ordered[int(len(ordered) * 0.99)] * 1e3


def timed(operation: Callable[[], Any], count: int) -> list[float]:
    gc.collect()
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        operation()
        samples.append(time.perf_counter() - began)
    return samples


class Row:
    """One comparison: (p50, p99) of each side."""

    def __init__(self, name: str, before: list[float], after: list[float]) -> None:
        self.name = name
        self.before = percentiles_ms(before)
        self.after = percentiles_ms(after)


def compare(
    name: str, before: Callable[[], Any], after: Callable[[], Any], count: int, rounds: int
) -> Row:
    """Each side run in turn, in alternating order (after a warm-up of each)."""
    before(), after()
    samples: dict[str, list[float]] = {"before": [], "after": []}
    sides = [("before", before), ("after", after)]
    for round_number in range(rounds):
        for side, operation in sides if round_number % 2 == 0 else sides[::-1]:
            samples[side] += timed(operation, count)
    return Row(name, samples["before"], samples["after"])


def open_session(service: LmdbSessionService, session_id: str) -> None:
    service.create_session(APP, USER, session_id, {"topic": "benchmarks"})
    service.add_event(APP, USER, session_id, text_event("open"), runtime_delta={OPEN_KEY: TOKEN})


def step(service: LmdbSessionService, session_id: str) -> None:
    """One step of an open invocation, as the Runner writes it."""
    event = text_event("a step of the invocation")
    service.add_event_if_state(APP, USER, session_id, event, {OPEN_KEY: TOKEN})


# -- 1. get_session ---------------------------------------------------------------------------


def get_session_sides(service: LmdbSessionService) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(before, after): `get_session` in a write transaction, and as shipped."""
    open_session(service, "read")
    for n in range(19):
        service.add_event(APP, USER, "read", text_event(f"m{n}"))

    def in_a_write_transaction() -> None:
        service._locked(core.get, APP, USER, "read")  # `_run`: a write transaction

    def as_shipped() -> None:
        service.get_session(APP, USER, "read")

    return in_a_write_transaction, as_shipped


@contextmanager
def steps_written_by_another_process(directory: str) -> Iterator[None]:
    """A process writing steps to another session of `directory`, back to back."""
    writer = subprocess.Popen(
        [sys.executable, __file__, "--write-steps", directory],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "writing"
        yield
    finally:
        writer.terminate()
        writer.wait()


def write_steps(directory: str) -> None:
    """The writer process: steps until terminated (or `WRITER_SECONDS`)."""
    service = LmdbSessionService(directory)
    open_session(service, "busy")
    print("writing", flush=True)
    deadline = time.monotonic() + WRITER_SECONDS
    while time.monotonic() < deadline:
        step(service, "busy")


# -- 2. steps with unclaimed continuations ------------------------------------------------------


def in_the_record(
    storage: core.Storage, app: str, user: str, session_id: str, values: dict[str, Any]
) -> None:
    """The old layout: continuations kept in the record's own state."""
    record = storage.get_session(app, user, session_id)
    assert record is not None
    record.state.update(values)
    storage.put_session(record)


def step_row(mebibytes: int, count: int, rounds: int) -> Row:
    values = {f"{core.CONTINUATION_PREFIX}inv-{n}": continuation(n) for n in range(mebibytes)}
    with (
        tempfile.TemporaryDirectory(prefix="adk-sessions-old-") as old_directory,
        tempfile.TemporaryDirectory(prefix="adk-sessions-new-") as new_directory,
    ):
        old = LmdbSessionService(old_directory, map_size=4 << 30)
        new = LmdbSessionService(new_directory, map_size=4 << 30)
        open_session(old, "s")
        old._run(in_the_record, APP, USER, "s", values)
        open_session(new, "s")
        for key, value in values.items():  # as a pause stores them: one key per step
            new.add_event(APP, USER, "s", text_event("pause"), runtime_delta={key: value})
        for service in (old, new):  # both layouts hold the same state
            state = service.get_session(APP, USER, "s", include_internal=True).state
            assert all(state[key] == value for key, value in values.items())
        row = compare(
            f"step, {mebibytes} MiB unclaimed continuations",
            lambda: step(old, "s"),
            lambda: step(new, "s"),
            count,
            rounds,
        )
        old.close()
        new.close()
    return row


# -- 3. a second service on a path ------------------------------------------------------------


def second_service_row(count: int, rounds: int) -> Row:
    with tempfile.TemporaryDirectory(prefix="adk-sessions-shared-") as directory:
        first = LmdbSessionService(directory)
        first.create_session(APP, USER, "long")
        for n in range(1000):
            first.add_event(APP, USER, "long", text_event(f"message {n} of a long history"))
        first.get_session(APP, USER, "long")  # the first service's read: now cached

        def first_read(own_empty_cache: bool) -> None:
            second = LmdbSessionService(directory)
            if own_empty_cache:
                second._events.clear()  # as each service had its own: empty at first
            assert len(second.get_session(APP, USER, "long").events) == 1000
            second.close()

        row = compare(
            "second service's first read, 1,000 events",
            lambda: first_read(True),
            lambda: first_read(False),
            count,
            rounds,
        )
        first.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    parser.add_argument("--write-steps", metavar="DIR", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.write_steps:
        write_steps(options.write_steps)
        return
    reads, steps, big_steps, rounds = (100, 10, 4, 2) if options.quick else (2500, 150, 30, 4)
    opens = 5 if options.quick else 40
    with tempfile.TemporaryDirectory(prefix="adk-sessions-read-") as directory:
        service = LmdbSessionService(directory)
        before, after = get_session_sides(service)
        rows = [compare("get_session (20 events), alone", before, after, reads, rounds)]
        with steps_written_by_another_process(directory):
            rows.append(
                compare("get_session, another process writing", before, after, reads, rounds)
            )
        service.close()
    for mebibytes in (0, 1, 8):
        rows.append(step_row(mebibytes, big_steps if mebibytes == 8 else steps, rounds))
    rows.append(second_service_row(opens, rounds))
    print(
        f"python {platform.python_version()}, lmdb {lmdb.__version__} (LMDB "
        f"{'.'.join(map(str, lmdb.version()))}), {platform.machine()}, "
        f"temp dirs in {tempfile.gettempdir()}"
    )
    print(f"{'ms':<40}{'p50 before':>11}{'p50 after':>10}{'p99 before':>11}{'p99 after':>10}")
    for row in rows:
        print(
            f"{row.name:<40}{row.before[0]:>11.3f}{row.after[0]:>10.3f}"
            f"{row.before[1]:>11.3f}{row.after[1]:>10.3f}"
        )


if __name__ == "__main__":
    main()
