"""`make run`: a small supervision tree that shows restarts and escalation in the log.

root (one_for_one)
 ├─ cache                      a permanent worker
 └─ pipeline (rest_for_one, intensity 2 per 10 s)
     ├─ source
     ├─ transform
     └─ sink

1. the cache crashes: only the cache restarts;
2. transform crashes: rest_for_one restarts transform and sink, source keeps its pid;
3. transform keeps crashing: the pipeline supervisor gives up and exits with
   ``shutdown``; root restarts the whole pipeline subtree.
"""

from __future__ import annotations

import time
from typing import Any

import supervision as sv
from supervision.logs import configure_console, get_logger

_log = get_logger("demo")


class Stage(sv.GenServer):
    """A worker that answers `ping` and crashes on request."""

    def init(self, name: str) -> str:
        _log.info("demo.worker_started", worker=name, pid=str(sv.self_pid()))
        return name

    def handle_call(self, request: Any, from_: sv.From, state: str) -> Any:
        if request == "crash":
            raise RuntimeError(f"{state} hit a bad record")
        return sv.Reply(f"{state} ok", state)


def _stage(name: str) -> sv.ChildSpec:
    return sv.ChildSpec(name, lambda: Stage.start_link(name, name=name))


def _pipeline() -> sv.Pid:
    return sv.Supervisor.start_link(
        [_stage("source"), _stage("transform"), _stage("sink")],
        strategy="rest_for_one",
        intensity=2,
        period=10.0,
        name="pipeline",
    )


def _crash(name: str, *restarted: str) -> None:
    """Crash a worker, then wait until it and the siblings named in `restarted` are back."""
    old = {other: sv.whereis(other) for other in (name, *restarted)}
    try:
        sv.call(name, "crash")
    except sv.ProcessExit:
        pass
    while any(sv.whereis(other) in (None, pid) for other, pid in old.items()):
        time.sleep(0.001)


def _pids(*names: str) -> dict[str, str]:
    return {name: str(sv.whereis(name)) for name in names}


def main() -> None:
    configure_console()
    root = sv.Supervisor.start_link(
        [
            sv.ChildSpec("cache", lambda: Stage.start_link("cache", name="cache")),
            sv.ChildSpec("pipeline", _pipeline, type="supervisor"),
        ],
        name="root",
    )
    _log.info("demo.tree_started", root=str(root), **_pids("cache", "source", "transform", "sink"))

    _log.info("demo.step", step=1, what="cache crashes: one_for_one restarts only the cache")
    _crash("cache")
    _log.info("demo.after", **_pids("cache", "source", "transform", "sink"))

    _log.info(
        "demo.step", step=2, what="transform crashes: rest_for_one restarts transform and sink"
    )
    before = sv.whereis("source")
    _crash("transform", "sink")
    _log.info(
        "demo.after", source_kept_pid=sv.whereis("source") == before, **_pids("transform", "sink")
    )

    _log.info(
        "demo.step",
        step=3,
        what="transform crashes twice more: pipeline gives up, root restarts it",
    )
    old_pipeline = sv.whereis("pipeline")
    _crash("transform", "sink")
    _crash("transform", "pipeline", "source", "sink")
    _log.info(
        "demo.after",
        pipeline_before=str(old_pipeline),
        pipeline_now=str(sv.whereis("pipeline")),
        answers=sv.call("sink", "ping"),
    )
    sv.stop(root, "shutdown")
    _log.info("demo.done", stats=sv.kernel_stats())


if __name__ == "__main__":
    main()
