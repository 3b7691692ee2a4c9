"""LMDB storage limits: a full map grows up to its ceiling, then fails `storage_full`
with nothing half-written; a map grown by another process is adopted; stored partial
events stay bounded however many deltas a provider streams."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import lmdb
import pytest

import adk_actors as adk
from adk_actors.events import Event, EventActions
from providers import content

SMALL = 1 << 16  # 64 KiB: a few pages


def event(text, delta=None):
    return Event.new(
        "user", "inv-1", content.from_text(text), actions=EventActions(state_delta=delta or {})
    )


def reason(fn):
    with pytest.raises(adk.AdkError) as info:
        fn()
    return info.value.reason


def test_a_full_map_grows_and_every_write_lands(tmp_path):
    store = adk.sessions.LmdbSessionService(tmp_path / "s", map_size=SMALL, max_map_size=64 << 20)
    store.create_session("app", "u", "s")
    for n in range(200):  # ~2 MiB: the map must double several times
        store.add_event("app", "u", "s", event("x" * 10_000, {f"k{n}": n}))
    session = store.get_session("app", "u", "s")
    assert len(session.events) == 200 and session.state["k199"] == 199
    assert store._shared.map_size > SMALL
    store.close()
    reopened = adk.sessions.LmdbSessionService(tmp_path / "s", map_size=SMALL)
    assert len(reopened.get_session("app", "u", "s").events) == 200  # the file kept its size
    reopened.close()


def test_at_the_ceiling_a_write_fails_storage_full_and_leaves_nothing(tmp_path):
    store = adk.sessions.LmdbSessionService(tmp_path / "s", map_size=SMALL, max_map_size=SMALL * 4)
    store.create_session("app", "u", "s")
    stored = 0
    with pytest.raises(adk.AdkError) as info:
        for n in range(10_000):
            store.add_event("app", "u", "s", event("y" * 4000, {"count": n + 1}))
            stored += 1
    assert info.value.reason == "storage_full"
    assert not isinstance(info.value, lmdb.Error)
    session = store.get_session("app", "u", "s")  # consistent: the failed step left nothing
    assert len(session.events) == stored and session.state["count"] == stored
    assert reason(lambda: store.update_state("app", "u", "s", {"big": "z" * SMALL})) == (
        "storage_full"
    )
    assert "big" not in store.get_session("app", "u", "s").state
    store.update_state("app", "u", "s", {"small": 1})  # small writes may still fit or fail
    assert store.get_session("app", "u", "s").state["small"] == 1
    store.close()


def test_concurrent_writers_share_a_growing_map(tmp_path):
    store = adk.sessions.LmdbSessionService(tmp_path / "s", map_size=SMALL, max_map_size=64 << 20)
    errors: list[BaseException] = []

    def writer(n):
        try:
            store.create_session("app", "u", f"s{n}")
            for i in range(30):
                store.add_event("app", "u", f"s{n}", event("w" * 5000, {"i": i}))
                store.get_session("app", "u", f"s{n}")  # readers meet the resize too
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    for n in range(8):
        assert len(store.get_session("app", "u", f"s{n}").events) == 30
    store.close()


def test_a_map_grown_by_another_process_is_adopted(tmp_path):
    path = tmp_path / "s"
    store = adk.sessions.LmdbSessionService(path, map_size=SMALL, max_map_size=64 << 20)
    store.create_session("app", "u", "mine")
    script = textwrap.dedent(
        f"""
        import adk_actors as adk
        from adk_actors.events import Event
        from providers import content
        store = adk.sessions.LmdbSessionService({str(path)!r}, map_size={SMALL})
        store.create_session("app", "u", "theirs")
        for n in range(100):
            store.add_event("app", "u", "theirs", Event.new("user", "i", content.from_text("t" * 10000)))
        store.close()
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert (path / "data.mdb").stat().st_size > SMALL  # grown beyond this process's map
    assert len(store.get_session("app", "u", "theirs").events) == 100  # read: adopts
    store.add_event("app", "u", "mine", event("after"))  # write: adopts or grows
    assert len(store.get_session("app", "u", "mine").events) == 1
    assert store._shared.map_size > SMALL
    store.close()


def test_invalid_map_sizes_are_refused(tmp_path):
    for options, why in (
        ({"map_size": 0}, "invalid_map_size"),
        ({"map_size": True}, "invalid_map_size"),
        ({"max_map_size": 100}, "invalid_max_map_size"),
    ):
        assert reason(lambda o=options: adk.sessions.LmdbSessionService(tmp_path / "x", **o)) == (
            why
        )


# -- streamed partials are bounded ---------------------------------------------------------------


@pytest.mark.parametrize("store", ["memory", "lmdb"])
def test_two_hundred_thousand_one_byte_deltas_store_a_bounded_number_of_partials(tmp_path, store):
    sessions = (
        adk.sessions.InMemorySessionService()
        if store == "memory"
        else adk.sessions.LmdbSessionService(tmp_path / "s")
    )
    letters = "abcdefghijklmnopqrstuvwxyz"
    deltas = [letters[n % 26] for n in range(200_000)]
    model = adk.ScriptedProvider([{"stream": deltas}])
    agent = adk.spawn_agent(f"Flood{store}", {"provider": model})
    runner = adk.Runner(agent, "app", sessions, streaming_mode="text", run_timeout=300)
    seen = [event for event in runner.run_async("u", "s", "go")]
    expected = "".join(deltas)
    session = sessions.get_session("app", "u", "s")
    partials = [e for e in session.events if e.partial]
    assert 1 <= len(partials) <= 64  # the default max_partial_events per model round
    assert "".join(e.text() for e in partials) == expected  # coalesced, never dropped
    assert session.events[-1].is_final and session.events[-1].text() == expected
    assert len(session.events) == len(partials) + 2  # user, partials, final
    live = [e for e in seen if e.partial]  # the stream carries the stored (coalesced) partials
    assert [e.id for e in live] == [e.id for e in partials]
    sessions.close()


def test_few_deltas_are_stored_one_per_delta_and_the_cap_is_configurable():
    sessions = adk.sessions.InMemorySessionService()
    model = adk.ScriptedProvider([{"stream": list("abcde")}, {"stream": list("abcdefghij")}])
    agent = adk.spawn_agent("Capped", {"provider": model})
    runner = adk.Runner(agent, "app", sessions, streaming_mode="text", max_partial_events=4)
    assert runner.run("u", "s", "go") == "abcde"
    texts = [e.text() for e in sessions.get_session("app", "u", "s").events if e.partial]
    assert len(texts) <= 4 and "".join(texts) == "abcde"
    exact = adk.Runner(agent, "app", sessions, streaming_mode="text", max_partial_events=10)
    assert exact.run("u", "t", "go") == "abcdefghij"
    texts = [e.text() for e in sessions.get_session("app", "u", "t").events if e.partial]
    assert texts == list("abcdefghij")  # at most the cap: one stored partial per delta
    for bad in (0, 10_001, True):
        assert reason(lambda b=bad: adk.Runner(agent, "app", sessions, max_partial_events=b)) == (
            "invalid_max_partial_events"
        )
    sessions.close()


def test_partials_coalesce_text_and_frames_in_order_within_the_cap():
    from adk_actors.runner.steps import Partials

    for cap in (1, 2, 3, 7, 64):
        partials = Partials(cap)
        deltas = [str(n % 10) for n in range(1000)]
        assert all(partials.add("a", "i", d, 1 << 20) for d in deltas)
        events = partials.take("a", "i")
        assert 1 <= len(events) <= cap and all(e.partial for e in events)
        assert "".join(e.text() for e in events) == "".join(deltas)
        assert partials.take("a", "i") == []  # the next round starts empty
    image = content.new([content.inline_data("image/png", b"\x89PNG")], role="model")
    frames = [content.new(["a"], role="model"), image, content.new(["b"], role="model")] * 5
    partials = Partials(2)
    for frame in frames:
        partials.add("a", "i", frame, 1 << 20)
    events = partials.take("a", "i")
    parts = [p for e in events for p in e.content.parts]
    assert len(events) == 2
    assert "".join(e.content.text_value() for e in events) == "ab" * 5  # text in order
    assert sum(1 for p in parts if not hasattr(p, "text")) == 5  # every frame's media kept
    over = Partials(4)
    assert over.add("a", "i", "x" * 10, 15) and not over.add("a", "i", "y" * 10, 15)
