"""Who holds an invocation open: this process's identity, and whether another's lives.

An open invocation's marker (``_adk:open:<invocation id>``) holds the opener's token
and, after an ``@``, the identity of the process that opened it (`marker`), so a
durable store opened later can tell an invocation whose process is gone from one
that is still running (`owner_gone`). The identity is
``<boot id>:<pid namespace>:<pid>:<start time>``: the kernel's boot id (a reboot
ends every process), the pid namespace (a process in another namespace cannot be
looked up, so it is never declared gone), the pid, and the process's start time in
clock ticks (a reused pid is another process). It costs nothing per invocation: it
is computed once per process (again after a fork) and rides in the opening's
marker, which the opening writes anyway.

Without ``/proc`` (not Linux) the boot id, namespace and start time are ``-`` and
liveness falls back to ``os.kill(pid, 0)``, which a reused pid can fool (the
invocation then stays open until that process is gone too).
"""

from __future__ import annotations

import os
import re

_UNKNOWN = "-"
_OWNER = re.compile(r"([0-9a-f]{32}|-):([0-9]+|-):([0-9]+):([0-9]+|-)")
_identity: str | None = None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as file:
            return file.read()
    except (OSError, UnicodeDecodeError):
        return None


def _boot_id() -> str:
    raw = _read("/proc/sys/kernel/random/boot_id")
    boot = raw.strip().replace("-", "").lower() if raw else ""
    return boot if re.fullmatch(r"[0-9a-f]{32}", boot) else _UNKNOWN


def _pid_namespace() -> str:
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return _UNKNOWN
    digits = link.rpartition("[")[2].rstrip("]")
    return digits if digits.isdigit() else _UNKNOWN


def _start_ticks(pid: int) -> str | None:
    """The start time of a running `pid` in clock ticks since boot, ``-`` without
    ``/proc``; None if there is no such process, or it is a zombie (it ended)."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None if os.path.isdir("/proc/self") else _UNKNOWN
    fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces
    if len(fields) < 20 or fields[0] in ("Z", "X", "x"):
        return None
    return fields[19]


def identity() -> str:
    """This process's identity (computed once; a forked child computes its own)."""
    global _identity
    if _identity is None:
        pid = os.getpid()
        _identity = f"{_boot_id()}:{_pid_namespace()}:{pid}:{_start_ticks(pid) or _UNKNOWN}"
    return _identity


def _forget() -> None:
    global _identity
    _identity = None


os.register_at_fork(after_in_child=_forget)


def marker(token: str) -> str:
    """What an opening stores under its ``_adk:open:`` key: the token and this process."""
    return f"{token}@{identity()}"


def token_of(value: object) -> object:
    """The token in a stored marker (a marker written before owners were recorded is
    the token itself)."""
    if isinstance(value, str):
        token, at, owner = value.rpartition("@")
        if at and _OWNER.fullmatch(owner):
            return token
    return value


def owner_of(value: object) -> str | None:
    """The identity in a stored marker; None for a marker without one."""
    if isinstance(value, str):
        _, at, owner = value.rpartition("@")
        if at and _OWNER.fullmatch(owner):
            return owner
    return None


def owner_gone(owner: str) -> bool:
    """Is the process `owner` certainly gone? False for this process, for one in
    another pid namespace (it cannot be looked up) and whenever in doubt."""
    match = _OWNER.fullmatch(owner)
    if match is None:
        return False
    boot, namespace, pid_text, start = match.groups()
    me = identity()
    if owner == me:
        return False
    my_boot, my_namespace, _, _ = me.split(":")
    if boot != _UNKNOWN and my_boot != _UNKNOWN and boot != my_boot:
        return True  # the machine rebooted since: every process of that boot is gone
    if namespace != my_namespace:
        return False  # another pid namespace: its pids mean nothing here
    pid = int(pid_text)
    if pid == os.getpid():
        return True  # this pid, but not this process: an earlier one that used it
    if start != _UNKNOWN:
        return _start_ticks(pid) != start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists (owned by someone else)
    return False
