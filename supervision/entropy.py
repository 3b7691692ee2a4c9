"""`random_bytes`: unguessable bytes for ids and tokens, without a syscall per id.

`os.urandom` is a `getrandom` system call that lets go of the GIL. On a busy process
(a supervisor starting servers, runs on the pool, an event loop) the thread that lets
go waits to take the GIL back, up to a switch interval, and the hand-over costs two
context switches: a run's start drew three such ids. Here the bytes come from the same
source, `os.urandom`, read `_BLOCK` bytes at a time and handed out in order, each byte
once. Ids stay as unguessable as `os.urandom`'s (the buffer lives in this process's
memory, as any user-space generator's state does). A forked child forgets the buffer
its parent had, so parent and child never hand out the same bytes. A leaf: it imports
only the standard library.
"""

from __future__ import annotations

import os
import threading
from typing import Final

_BLOCK: Final = 4096
"""Bytes read from `os.urandom` at a time: 256 ids of 16 bytes."""
MAX_RANDOM_BYTES: Final = _BLOCK
"""The most one call hands out."""

_lock = threading.Lock()
_buffer = b""
_offset = 0


def random_bytes(count: int) -> bytes:
    """`count` (1..`MAX_RANDOM_BYTES`) bytes from `os.urandom`, never handed out before
    in this process; thread-safe. Any other count raises `ValueError`."""
    global _buffer, _offset
    if type(count) is not int or not 1 <= count <= MAX_RANDOM_BYTES:
        raise ValueError(f"random_bytes takes 1..{MAX_RANDOM_BYTES} bytes, not {count!r}")
    with _lock:
        end = _offset + count
        if end > len(_buffer):
            _buffer, _offset, end = os.urandom(_BLOCK), 0, count
        drawn = _buffer[_offset:end]
        _offset = end
    return drawn


def _forget() -> None:
    """In a forked child: drop the parent's buffer (and a lock a parent thread held)."""
    global _buffer, _offset, _lock
    _lock = threading.Lock()
    _buffer, _offset = b"", 0


os.register_at_fork(after_in_child=_forget)
