"""`adk.runs.start_async` (issue 20 §4): the awaited `adk.runs.start` for asyncio code.

The benchmark's slow row started 1,024 runs from coroutines with the blocking `start`,
so the loop's thread waited in a call to the run supervisor for every start. These
tests follow the brief of session 30: the same result, checks and refusals as
`start`; many starts on one loop; the loop runs on while a start is in flight (held
in the server's init by `gated`, never a timing assertion); a start cancelled in
flight leaves a tracked run that ends ``Cancelled("cancelled")``, never one running
untracked, and a refused one leaves nothing; one loop has at most a window of starts
in flight, so many starts followed by waits all find their runs.
"""

from __future__ import annotations

import asyncio
import re

import pytest

import adk_actors as adk
import supervision as sv
from adk_actors.runner.launch import START_WINDOW
from adk_actors.runner.request import handoffs
from supervision.process import live_processes
from tests.adk_actors.run_stream_helpers import echo
from tests.adk_actors.test_s30_start_async_gate import gated, until
from tests.helpers import wait_until

RUN_ID = re.compile(r"run-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def runner_for(sessions, name, provider=None):
    agent = adk.spawn_agent(
        name,
        {
            "provider": provider or adk.ScriptedProvider(fn=echo, inline=True),
            "max_concurrent_invocations": 1024,
        },
    )
    return adk.Runner(agent, "app", sessions)


def late(history, tools):
    """A model that answers after 5 s (awaited: no thread sleeps), so a run told to
    cancel right after its start is still running when the cancel comes."""
    return {"text": "late", "delay": 5}


def run_servers():
    return sorted(p.pid for p in live_processes() if p.label == "InvocationServer")


def listed(run_id):
    return [view for view in adk.runs.list(limit=500)["runs"] if view["run_id"] == run_id]


def async_refusal(coroutine):
    """The `RunError` an awaited call raises (run on a fresh loop)."""

    async def refused():
        with pytest.raises(adk.runs.RunError) as info:
            await coroutine
        return info.value

    return asyncio.run(refused())


def test_start_async_returns_an_id_that_wait_status_and_list_know(sessions):
    runner = runner_for(sessions, "Awaited")

    async def main():
        run_id = await adk.runs.start_async(runner, "u", "s", "hi")
        return run_id, await adk.runs.wait_async(run_id, timeout=10)

    run_id, outcome = asyncio.run(main())
    assert RUN_ID.fullmatch(run_id)
    assert outcome == adk.Completed("echo: hi")
    assert adk.runs.status(run_id)["state"] == "completed"
    assert [view["state"] for view in listed(run_id)] == ["completed"]
    chosen = asyncio.run(adk.runs.start_async(runner, "u", "t", "again", run_id="run-chosen"))
    assert chosen == "run-chosen"
    assert adk.runs.wait(chosen, timeout=10) == adk.Completed("echo: again")
    assert adk.runs.stats() == {"actors": 2, "retained": 2, "pending_handoffs": 0}


def test_a_run_id_in_use_is_refused_and_leaves_nothing_behind(sessions):
    """As `test_runs.test_a_duplicate_run_id_is_refused_and_leaves_nothing_behind`."""
    runner = runner_for(sessions, "Taken", adk.ScriptedProvider([{"text": "done", "delay": 0.3}]))
    assert adk.runs.start(runner, "u", "s", "hi", run_id="run-fixed") == "run-fixed"
    before, servers = adk.runs.stats(), run_servers()
    error = async_refusal(adk.runs.start_async(runner, "u", "other", "hi", run_id="run-fixed"))
    assert error.reason == "already_exists"
    assert adk.runs.stats() == before and before["pending_handoffs"] == 0
    assert run_servers() == servers
    assert adk.runs.wait("run-fixed", timeout=10) == adk.Completed("done")
    with pytest.raises(adk.AdkError):
        sessions.get_session("app", "u", "other")  # the refused run never ran


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"retention": 0}, "invalid_retention"),
        ({"retention": "long"}, "invalid_retention"),
        ({"max_buffered_events": 0}, "invalid_max_buffered_events"),
        ({"run_id": "not a run id!"}, "invalid_run_id"),
        ({"run_id": ""}, "invalid_run_id"),
        ({"retention": -1, "run_id": "bad id"}, "invalid_retention"),  # options first
    ],
)
def test_invalid_options_are_refused_as_start_refuses_them(sessions, options, reason):
    runner = runner_for(sessions, "Checked")
    before = adk.runs.stats()
    with pytest.raises(adk.runs.RunError) as sync:
        adk.runs.start(runner, "u", "s", "hi", **options)
    assert sync.value.reason == reason
    assert async_refusal(adk.runs.start_async(runner, "u", "s", "hi", **options)).reason == reason
    assert adk.runs.stats() == before and run_servers() == []
    with pytest.raises(adk.AdkError):
        sessions.get_session("app", "u", "s")


def test_it_is_not_started_while_the_run_supervisor_is_down(sessions):
    runner = runner_for(sessions, "Unsupervised")
    sv.Supervisor.terminate_child("adk.app", "run_supervisor")
    with pytest.raises(adk.runs.RunError) as sync:
        adk.runs.start(runner, "u", "s", "hi")
    assert sync.value.reason == "not_started"
    assert async_refusal(adk.runs.start_async(runner, "u", "s", "hi")).reason == "not_started"
    assert adk.runs.stats()["pending_handoffs"] == 0


def test_many_concurrent_starts_on_one_loop_all_complete(sessions):
    runner = runner_for(
        sessions, "Many", adk.ScriptedProvider(fn=lambda h, t: {"text": "ok", "delay": 0.05})
    )
    unique, twice = 90, 30  # the first `twice` ids are asked for by two starts each;
    # fewer runs than the registry retains once ended (100), so none is evicted

    async def one(n):
        run_id = f"run-many-{n % unique}"
        try:
            started = await adk.runs.start_async(runner, "u", f"s{n}", "hi", run_id=run_id)
        except adk.runs.RunError as error:
            return run_id, error.reason
        assert started == run_id
        return run_id, await adk.runs.wait_async(run_id, timeout=30)

    async def main():
        return await asyncio.gather(*(one(n) for n in range(unique + twice)))

    results = asyncio.run(main())
    by_id: dict[str, list] = {}
    for run_id, result in results:
        by_id.setdefault(run_id, []).append(result)
    assert len(by_id) == unique
    for n in range(unique):
        got = by_id[f"run-many-{n}"]
        if n < twice:  # exactly one of the two starts it; the other is refused
            assert sorted(map(repr, got)) == ["'already_exists'", "Completed(output='ok')"]
        else:
            assert got == [adk.Completed("ok")]
    assert adk.runs.stats() == {"actors": unique, "retained": unique, "pending_handoffs": 0}
    assert len(adk.runs.list(state="completed", limit=500)["runs"]) == unique


def test_the_event_loop_runs_on_while_a_start_is_in_flight(sessions):
    runner = runner_for(sessions, "HeldA")

    async def main():
        with gated("HeldA") as gate:
            starting = asyncio.ensure_future(adk.runs.start_async(runner, "u", "s", "hi"))
            await until(gate.entered.is_set)  # this coroutine runs while the start is held
            in_flight = not starting.done()
            gate.release()  # by the loop the start would otherwise block
            run_id = await starting
        return gate, in_flight, run_id

    gate, in_flight, run_id = asyncio.run(main())
    assert in_flight and not gate.timed_out
    assert adk.runs.wait(run_id, timeout=10) == adk.Completed("echo: hi")


def test_a_start_cancelled_in_flight_still_tracks_its_run_and_cancels_it(sessions):
    runner = runner_for(sessions, "HeldB", adk.ScriptedProvider(fn=late, inline=True))

    async def main():
        with gated("HeldB") as gate:
            starting = asyncio.ensure_future(
                adk.runs.start_async(runner, "u", "s", "hi", run_id="run-left", retention=0.5)
            )
            await until(gate.entered.is_set)
            starting.cancel()  # the start is sent and held in the server's init
            gate.release()
            with pytest.raises(asyncio.CancelledError):
                await starting
        # the caller's CancelledError comes once the run is tracked and told to cancel
        return gate, listed("run-left"), await adk.runs.wait_async("run-left", timeout=10)

    gate, views, outcome = asyncio.run(main())
    assert not gate.timed_out
    assert [view["run_id"] for view in views] == ["run-left"]  # tracked by the registry
    assert outcome == adk.Cancelled("cancelled")
    assert adk.runs.stats()["pending_handoffs"] == 0
    wait_until(lambda: adk.runs.stats()["actors"] == 0, timeout=10)  # its retention ends
    assert run_servers() == []


def test_a_start_that_wait_for_gave_up_on_still_tracks_its_run_and_cancels_it(sessions):
    runner = runner_for(sessions, "HeldC", adk.ScriptedProvider(fn=late, inline=True))

    async def main():
        with gated("HeldC") as gate:
            starting = asyncio.ensure_future(
                adk.runs.start_async(runner, "u", "s", "hi", run_id="run-timed-out")
            )

            async def release_once_given_up():
                await until(lambda: gate.entered.is_set() and starting.cancelling())
                gate.release()

            releasing = asyncio.ensure_future(release_once_given_up())
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(starting, timeout=0.05)
            await releasing
        return await adk.runs.wait_async("run-timed-out", timeout=10)

    assert asyncio.run(main()) == adk.Cancelled("cancelled")
    assert [view["state"] for view in listed("run-timed-out")] == ["cancelled"]


def test_a_refused_start_cancelled_in_flight_leaves_nothing_behind(sessions):
    """The second start of a run id waits behind the first (held in its init): its
    caller is cancelled, then the start is refused (``already_exists``)."""
    runner = runner_for(sessions, "HeldD")

    async def main():
        with gated("HeldD") as gate:
            first = asyncio.ensure_future(
                adk.runs.start_async(runner, "u", "a", "hi", run_id="run-once")
            )
            await until(gate.entered.is_set)
            second = asyncio.ensure_future(
                adk.runs.start_async(runner, "u", "b", "hi", run_id="run-once")
            )
            # its request is handed off, so sent (`stats` would wait for the held start)
            await until(lambda: handoffs.pending() == 1)
            second.cancel()
            gate.release()
            with pytest.raises(asyncio.CancelledError):
                await second
            return await first

    assert asyncio.run(main()) == "run-once"
    assert adk.runs.wait("run-once", timeout=10) == adk.Completed("echo: hi")
    assert adk.runs.stats() == {"actors": 1, "retained": 1, "pending_handoffs": 0}
    assert len(run_servers()) == 1
    with pytest.raises(adk.AdkError):
        sessions.get_session("app", "u", "b")  # the refused run never ran


def test_many_starts_then_waits_on_one_loop_outlast_the_retention_cap(sessions):
    """Found running the runs benchmark's 50 ms x 1,024 row with `start_async`: the loop
    sent every start before it handled the first answer, so its callers came back to
    their runs after hundreds had ended, and all but the last 100 (the registry keeps
    at most 100 ended runs) were gone: ``not_found``. The start window keeps answers
    handled as the starts go on."""
    model = adk.ScriptedProvider(fn=lambda h, t: {"text": "ok", "delay": 0.05}, inline=True)
    runner = runner_for(sessions, "Wide", model)
    numbers = iter(range(10**6))

    async def one():
        run_id = await adk.runs.start_async(runner, "u", f"s{next(numbers)}", "hi")
        try:
            return await adk.runs.wait_async(run_id, timeout=30)
        except adk.runs.RunError as error:
            return error.reason

    async def main():
        return await asyncio.gather(*(one() for _ in range(500)))

    outcomes = asyncio.run(main())
    assert [o for o in outcomes if o != adk.Completed("ok")] == []


def test_one_loop_has_at_most_a_window_of_starts_in_flight(sessions):
    runner = runner_for(sessions, "Windowed")
    callers = START_WINDOW + 4

    async def main():
        with gated("Windowed") as gate:
            starting = [
                asyncio.ensure_future(adk.runs.start_async(runner, "u", f"s{n}", "hi"))
                for n in range(callers)
            ]
            await until(lambda: gate.entered.is_set() and handoffs.pending() == START_WINDOW - 1)
            for _ in range(20):  # every caller has had its turn on the loop
                await asyncio.sleep(0)
            sent = handoffs.pending() + 1  # the held start took its handoff
            starting[-1].cancel()  # still waiting for the window: it sends nothing
            gate.release()
            results = await asyncio.gather(*starting, return_exceptions=True)
        return sent, results

    sent, results = asyncio.run(main())
    assert sent == START_WINDOW
    assert isinstance(results[-1], asyncio.CancelledError)
    run_ids = results[:-1]
    assert all(adk.runs.wait(run_id, timeout=10) == adk.Completed("echo: hi") for run_id in run_ids)
    assert adk.runs.stats()["actors"] == callers - 1 and handoffs.pending() == 0
    with pytest.raises(adk.AdkError):
        sessions.get_session("app", "u", f"s{callers - 1}")  # the cancelled one never ran
