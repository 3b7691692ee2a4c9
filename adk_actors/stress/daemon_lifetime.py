"""Bind a spawned daemon's life (and its work directory's) to the harness process.

A spawned ``adk serve`` runs in a session of its own, so a Ctrl-C at the terminal is not
its; its normal end is the target's `close` (a SIGTERM drain). Three things end it when
the harness ends some other way (SIGTERM, a second Ctrl-C, a crash, SIGKILL):

- on Linux, the child asks the kernel for SIGKILL when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``, set between fork and exec by `spawn`). The kernel sends
  it when the *thread* that forked it exits, so every spawn runs on one long-lived
  spawner thread that ends only with the process;
- a registry of the live daemons and work directories, which `reap_all` empties
  (SIGKILL to each daemon's process group, then the directories removed): at
  interpreter exit (``atexit``) and from the CLI's own stop path;
- the CLI turns SIGTERM into the first Ctrl-C (see ``adk_actors/cli/stress_command``).
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from supervision import get_logger

PR_SET_PDEATHSIG = 1
"""``<linux/prctl.h>``: the signal a process gets when its parent (thread) dies."""
REAP_WAIT_S = 5.0
"""How long `reap_all` waits for each SIGKILLed daemon to be reaped."""
_log = get_logger("adk_actors.stress.daemon_lifetime")
_lock = threading.Lock()
_processes: dict[int, subprocess.Popen[bytes]] = {}
_workdirs: set[Path] = set()
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="adk-stress-spawner")
"""The one thread every daemon is forked from (see the module doc: the parent-death
signal follows the forking thread)."""


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    prctl: Callable[..., int] = libc.prctl
    return prctl


_prctl = _load_prctl()


def parent_death_supported() -> bool:
    """Whether a spawned daemon is SIGKILLed by the kernel when the harness dies."""
    return _prctl is not None


def _die_with(parent: int) -> Callable[[], None]:
    """The child's preexec step: SIGKILL on the parent's death, and if the parent is
    already gone (it died between fork and here), exit at once."""

    def preexec() -> None:
        if _prctl is not None:
            _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def spawn(args: list[str], **options: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(args, **options)` in a new session, bound to this process's
    life, and registered for `reap_all`."""
    parent = os.getpid()

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            args, start_new_session=True, preexec_fn=_die_with(parent), **options
        )

    process = _spawner.submit(start).result()
    with _lock:
        _processes[process.pid] = process
    return process


def forget(process: subprocess.Popen[bytes]) -> None:
    """`process` was reaped by its owner: `reap_all` leaves it alone."""
    with _lock:
        _processes.pop(process.pid, None)


def register_workdir(path: Path) -> None:
    """Remove `path` in `reap_all` unless `release_workdir` came first."""
    with _lock:
        _workdirs.add(path)


def release_workdir(path: Path) -> None:
    with _lock:
        _workdirs.discard(path)


def live() -> tuple[list[int], list[Path]]:
    """The daemons' pids and work directories still registered (for tests and logs)."""
    with _lock:
        return sorted(_processes), sorted(_workdirs)


def reap_all() -> int:
    """SIGKILL every registered daemon (its whole process group), reap it and remove
    every registered work directory; how many daemons were still running. Safe from
    any thread and more than once."""
    with _lock:
        processes = list(_processes.values())
        workdirs = list(_workdirs)
        _processes.clear()
        _workdirs.clear()
    killed = 0
    for process in processes:
        if process.poll() is None:
            killed += 1
            _kill_group(process.pid)
        try:
            process.wait(REAP_WAIT_S)
        except subprocess.TimeoutExpired:
            _log.warning("adk.stress.daemon_not_reaped", pid=process.pid)
    for workdir in workdirs:
        shutil.rmtree(workdir, ignore_errors=True)
    if killed or workdirs:
        _log.warning("adk.stress.daemons_reaped", killed=killed, workdirs=len(workdirs))
    return killed


def _kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (the daemon and anything it started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


atexit.register(reap_all)
