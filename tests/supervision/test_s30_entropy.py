"""`supervision.random_bytes`: ids from `os.urandom` without a syscall per id (session 30).

A run's start drew three ids with `os.urandom`, each a system call that lets go of the
GIL (and, on a busy process, waits to take it back). The bytes now come from one
`os.urandom` block at a time, each handed out once; a forked child never repeats its
parent's.
"""

from __future__ import annotations

import os
import threading

import pytest

import supervision as sv


def test_draws_have_the_asked_length_and_never_repeat_across_blocks() -> None:
    draws = [sv.random_bytes(16) for _ in range(2_000)]  # about eight blocks
    assert all(len(drawn) == 16 for drawn in draws)
    assert len(set(draws)) == len(draws)
    assert len(sv.random_bytes(sv.MAX_RANDOM_BYTES)) == sv.MAX_RANDOM_BYTES
    assert len(sv.random_bytes(1)) == 1


@pytest.mark.parametrize("count", [0, -1, sv.MAX_RANDOM_BYTES + 1, True, 1.5, "16", None])
def test_a_count_out_of_range_is_refused(count: object) -> None:
    with pytest.raises(ValueError, match="random_bytes takes"):
        sv.random_bytes(count)  # type: ignore[arg-type]


def test_threads_drawing_at_once_never_get_the_same_bytes() -> None:
    found: list[list[bytes]] = [[] for _ in range(8)]

    def draw(into: list[bytes]) -> None:
        for _ in range(1_000):
            into.append(sv.random_bytes(16))

    threads = [threading.Thread(target=draw, args=(into,)) for into in found]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    every = [drawn for into in found for drawn in into]
    assert len(every) == 8_000 and len(set(every)) == 8_000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_repeat_its_parents_bytes() -> None:
    sv.random_bytes(16)  # the parent has a partly used block
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child: its next draw, then out at once
        try:
            os.write(write_end, sv.random_bytes(16))
        finally:
            os._exit(0)
    os.close(write_end)
    parents = sv.random_bytes(16)
    childs = os.read(read_end, 16)
    os.close(read_end)
    os.waitpid(child, 0)
    assert len(childs) == 16 and childs != parents
