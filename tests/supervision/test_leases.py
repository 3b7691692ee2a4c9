"""Fenced leases, in memory and in LMDB: boundaries, takeover, staleness, races."""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time

import pytest

from supervision.leases import LeaseError, LmdbLeases, MemoryLeases


class FakeClock:
    def __init__(self) -> None:
        self.mono = 1000.0
        self.wall = 1_700_000_000.0

    def __call__(self) -> tuple[float, float]:
        return self.mono, self.wall

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds


@pytest.fixture(params=["memory", "lmdb"])
def store_and_clock(request, tmp_path):
    clock = FakeClock()
    if request.param == "memory":
        yield MemoryLeases(clock=clock, boot_id="boot-a"), clock
    else:
        store = LmdbLeases(tmp_path / "leases", clock=clock, boot_id="boot-a")
        yield store, clock
        store.close()


def reason_of(fn) -> str:
    with pytest.raises(LeaseError) as info:
        fn()
    return info.value.reason


def test_acquire_held_until_exactly_lease_until(store_and_clock):
    store, clock = store_and_clock
    lease = store.acquire("job-1", "node-a", 10)
    assert lease.revision == 1 and lease.owner == "node-a" and len(lease.token) == 32
    clock.advance(9.999)
    assert reason_of(lambda: store.acquire("job-1", "node-b", 10)) == "lease_held"
    assert store.check("job-1", lease.token) == lease
    clock.advance(0.001)  # now == lease_until: expired
    assert reason_of(lambda: store.check("job-1", lease.token)) == "lease_expired"
    assert reason_of(lambda: store.renew("job-1", lease.token, 10)) == "lease_expired"
    assert store.get("job-1") == lease  # a refused renewal leaves the record unchanged
    taken = store.acquire("job-1", "node-b", 10)
    assert taken.revision == 2 and taken.token != lease.token
    assert reason_of(lambda: store.check("job-1", lease.token)) == "stale_owner"
    assert reason_of(lambda: store.renew("job-1", lease.token, 10)) == "stale_owner"
    assert reason_of(lambda: store.release("job-1", lease.token)) == "stale_owner"


def test_renew_advances_revision_and_expiry(store_and_clock):
    store, clock = store_and_clock
    lease = store.acquire("job-2", "node-a", 5)
    clock.advance(4)
    renewed = store.renew("job-2", lease.token, 5)
    assert renewed.revision == 2 and renewed.token == lease.token
    assert renewed.lease_until_mono == lease.lease_until_mono + 4
    clock.advance(4)  # past the first expiry, within the renewed one
    assert store.check("job-2", lease.token).revision == 2
    assert reason_of(lambda: store.acquire("job-2", "node-b", 5)) == "lease_held"


def test_release_frees_the_key(store_and_clock):
    store, _clock = store_and_clock
    lease = store.acquire("job-3", "node-a", 5)
    store.release("job-3", lease.token)
    assert store.get("job-3") is None
    assert reason_of(lambda: store.check("job-3", lease.token)) == "not_found"
    assert store.acquire("job-3", "node-b", 5).revision == 1


def test_fenced_commit_runs_only_for_the_holder(store_and_clock):
    store, clock = store_and_clock
    lease = store.acquire("job-4", "node-a", 5)
    calls = []
    assert (
        store.fenced_commit("job-4", lease.token, lambda *txn: calls.append("ok") or "done")
        == "done"
    )
    clock.advance(5)
    assert reason_of(
        lambda: store.fenced_commit("job-4", lease.token, lambda *txn: calls.append("late"))
    ) == ("lease_expired")
    assert calls == ["ok"]


def test_invalid_arguments(store_and_clock):
    store, _clock = store_and_clock
    assert reason_of(lambda: store.acquire("", "a", 1)) == "invalid_lease"
    assert reason_of(lambda: store.acquire("k", "", 1)) == "invalid_lease"
    assert reason_of(lambda: store.acquire("k", "a", 0)) == "invalid_lease"
    assert reason_of(lambda: store.acquire("k", "a", 10**9)) == "invalid_lease"
    assert reason_of(lambda: store.acquire("k" * 300, "a", 1)) == "invalid_lease"


def test_other_boot_falls_back_to_wall_clock(tmp_path):
    clock = FakeClock()
    before = LmdbLeases(tmp_path / "l", clock=clock, boot_id="boot-a")
    lease = before.acquire("job", "node-a", 10)
    before.close()
    clock.mono = 5.0  # after a reboot the monotonic clock restarted
    after = LmdbLeases(tmp_path / "l", clock=clock, boot_id="boot-b")
    assert reason_of(lambda: after.acquire("job", "node-b", 10)) == "lease_held"
    clock.wall += 10
    assert after.acquire("job", "node-b", 10).revision == lease.revision + 1
    after.close()


def test_lmdb_lease_survives_reopen(tmp_path):
    store = LmdbLeases(tmp_path / "l")
    lease = store.acquire("job", "node-a", 60)
    store.close()
    reopened = LmdbLeases(tmp_path / "l")
    assert reopened.check("job", lease.token) == lease
    reopened.close()


@pytest.mark.parametrize("kind", ["memory", "lmdb"])
def test_racing_threads_take_over_an_expired_lease_exactly_once(kind, tmp_path):
    clock = FakeClock()
    store = (
        MemoryLeases(clock=clock) if kind == "memory" else LmdbLeases(tmp_path / "r", clock=clock)
    )
    store.acquire("hot", "first", 1)
    clock.advance(1)
    winners, barrier = [], threading.Barrier(16)

    def contend(n: int) -> None:
        barrier.wait()
        try:
            winners.append(store.acquire("hot", f"node-{n}", 60))
        except LeaseError as error:
            assert error.reason == "lease_held"

    threads = [threading.Thread(target=contend, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and winners[0].revision == 2


def _contend_in_process(path: str, owner: str, attempts: int, results, start) -> None:
    store = LmdbLeases(path)
    start.wait(60)  # both processes contend from the same moment, however slow they start
    wins = []
    for _ in range(attempts):
        try:
            lease = store.acquire("shared", owner, 0.002)
        except LeaseError:
            time.sleep(0.0005)  # paced, so 300 attempts span many leases, not one
            continue
        wins.append((lease.revision, time.monotonic(), lease.lease_until_mono))
        while time.monotonic() < lease.lease_until_mono:
            pass
        time.sleep(0.001)  # give the other process a turn at the expired lease
    store.close()
    results.put(wins)


def test_two_os_processes_share_one_environment(tmp_path):
    path = str(tmp_path / "shared")
    LmdbLeases(path).close()
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    start = context.Barrier(2)
    workers = [
        context.Process(target=_contend_in_process, args=(path, f"proc-{n}", 300, results, start))
        for n in range(2)
    ]
    for worker in workers:
        worker.start()
    wins = [results.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(30)
    both = sorted(wins[0] + wins[1])
    revisions = [w[0] for w in both]
    assert len(revisions) == len(set(revisions)), "two processes won the same takeover"
    assert revisions == list(range(1, len(revisions) + 1))
    assert wins[0] and wins[1]  # both processes won some rounds
    for (_, _, until), (_, acquired, _) in itertools.pairwise(both):
        assert acquired >= until  # no acquisition while the previous lease was live


def test_a_task_killed_while_applying_does_not_commit(tmp_path):
    from supervision.tasks import Task

    store = LmdbLeases(tmp_path / "fence")
    lease = store.acquire("job", "task", 60)
    data = store.env.open_db(b"data")
    inside, release = threading.Event(), threading.Event()

    def apply(txn):
        txn.put(b"result", b"from-killed-task", db=data)
        inside.set()
        release.wait(5)

    def work():
        store.fenced_commit("job", lease.token, apply)

    task = Task.start(work)
    assert inside.wait(5)
    task.kill()
    release.set()
    time.sleep(0.1)
    with store.env.begin() as txn:
        assert txn.get(b"result", db=data) is None
    store.close()


# -- the public rules, with an explicit clock (for stores that keep their own records) ------


def test_lease_expired_at_exactly_lease_until():
    from supervision.leases import lease_expired

    assert not lease_expired(10.0, 9.999)
    assert lease_expired(10.0, 10.0)
    assert lease_expired(10.0, 10.001)
    assert lease_expired(float("nan"), 1.0) and lease_expired(10.0, float("nan"))


def test_check_fence_refuses_a_stale_token_before_an_expired_lease():
    from supervision.leases import check_fence, token_digest

    held = token_digest("token-a")
    assert held == token_digest("token-a") != token_digest("token-b")
    assert len(held) == 64 and "token-a" not in held
    check_fence(held, token_digest("token-a"), 10.0, 9.0, key="k")  # the holder, in time
    assert reason_of(lambda: check_fence(held, token_digest("token-a"), 10.0, 10.0)) == (
        "lease_expired"
    )
    for presented in (token_digest("token-b"), "", None, 42):
        assert reason_of(lambda p=presented: check_fence(held, p, 10.0, 9.0)) == "stale_owner"
        assert reason_of(lambda p=presented: check_fence(held, p, 10.0, 11.0)) == "stale_owner"
    assert reason_of(lambda: check_fence(None, held, 10.0, 9.0)) == "stale_owner"


def test_a_token_of_another_type_is_stale_not_a_crash(store_and_clock):
    store, _ = store_and_clock
    store.acquire("k", "a", 10)
    assert reason_of(lambda: store.check("k", None)) == "stale_owner"
    assert reason_of(lambda: store.renew("k", 42, 10)) == "stale_owner"
