"""Resume from every committed boundary: each checkpoint a run commits, resumed, runs
every step whose delta it does not hold exactly once and none whose delta it holds
(behaviors §7: resume never re-runs committed steps; the spec: checkpoints at
deterministic boundaries only, with the remaining budgets)."""

from __future__ import annotations

from typing import Any

import pytest

import adk_actors as adk
from adk_actors.workflows import Completed, Goto, Output, Stop, Transfer
from adk_actors.workflows.checkpoint import Checkpoint
from adk_actors.workflows.coordinator import Begun
from adk_actors.workflows.launch import fresh_launch, start_supervised
from adk_actors.workflows.spec import CompiledWorkflow
from supervision import Pid


class Recorder:
    """A `coordinator.Persistence` that keeps every committed checkpoint, in order."""

    renew_interval = None

    def __init__(self) -> None:
        self.commits: list[Checkpoint] = []

    def begin(self, workflow: CompiledWorkflow, checkpoint: Checkpoint, owner: Pid) -> Begun:
        return Begun(checkpoint, "resume-points")

    def commit(self, checkpoint: Checkpoint) -> None:
        self.commits.append(checkpoint)

    def renew(self) -> None:
        pass

    def finish(self, phase: str, outcome: Any, checkpoint: Checkpoint) -> None:
        pass


def logged(name: str) -> Any:
    def step(state: dict) -> dict:
        return {"log": [*state["log"], name]}

    return step


SEQUENTIAL = {
    "id": "points-sequential",
    "kind": "sequential",
    "steps": [{"id": name, "run": logged(name)} for name in ("a", "b", "c")],
}
TRANSFER = {
    "id": "points-transfer",
    "kind": "transfer",
    "entry": "triage",
    "max_transfers": 2,
    "members": {
        "triage": {"run": lambda s: Transfer("second", "handoff", {"log": [*s["log"], "triage"]})},
        "second": {"run": lambda s: Transfer("last", None, {"log": [*s["log"], "second"]})},
        "last": {"run": lambda s: Stop("done", {"log": [*s["log"], "last"]})},
    },
}
LOOP = {
    "id": "points-loop",
    "kind": "loop",
    "max_iterations": 5,
    "body": lambda s: Output(len(s["log"]), {"log": [*s["log"], "body"]}),
    "until": lambda s: len(s["log"]) >= 3,
}
GRAPH = {
    "id": "points-graph",
    "kind": "graph",
    "entry": "a",
    "nodes": [
        {"id": "a", "run": logged("a")},
        {
            "id": "choose",
            "type": "branch",
            "choose": lambda s: Goto("fork", {"log": [*s["log"], "choose"]}),
            "targets": ["fork", "end"],
        },
        {"id": "fork", "type": "fork", "branches": ["left", "right"], "join": "join"},
        {"id": "left", "run": lambda s: Output("l", {"left": len(s["log"])})},
        {"id": "right", "run": lambda s: Output("r", {"right": len(s["log"])})},
        {"id": "join", "type": "join", "run": logged("join")},
        {
            "id": "again",
            "type": "loop",
            "while": lambda s: True,
            "body": "tail",
            "max_iterations": 2,
        },
        {"id": "tail", "run": logged("tail")},
    ],
    "edges": {"a": "choose", "left": "join", "right": "join", "join": "again", "tail": "again"},
}
EXPECTED = {
    "points-sequential": {"log": ["a", "b", "c"]},
    "points-transfer": {"log": ["triage", "second", "last"]},
    "points-loop": {"log": ["body", "body", "body"]},
    "points-graph": {
        "log": ["a", "choose", "join", "tail", "tail"],
        "left": 2,
        "right": 2,
    },
}


@pytest.mark.parametrize("spec", [SEQUENTIAL, TRANSFER, LOOP, GRAPH], ids=lambda s: s["kind"])
def test_every_committed_checkpoint_resumes_without_replaying_a_committed_step(
    spec: dict[str, Any],
) -> None:
    """Follows adk_workflow_test: checkpoint_resume_does_not_replay_committed_step_case,
    at every boundary a run commits (a transfer commits its member's delta, the spent
    transfer and its target at once)."""
    wf = adk.compile_workflow(spec)
    recorder = Recorder()
    launch = fresh_launch(wf, {"log": []}, persistence=recorder)
    start_supervised(launch)
    outcome = adk.workflows.wait(launch.ref, timeout=10)
    assert isinstance(outcome, Completed)
    assert outcome.state == EXPECTED[wf.id]
    assert len(recorder.commits) >= 3
    for index, checkpoint in enumerate(recorder.commits):
        resumed = adk.workflows.wait(adk.workflows.resume(wf, checkpoint), timeout=10)
        assert isinstance(resumed, Completed), (index, checkpoint.cursor)
        assert resumed.state == EXPECTED[wf.id], (index, checkpoint.cursor)
        spent = checkpoint.remaining.steps - resumed.checkpoint.remaining.steps
        assert spent >= 0  # budgets are never replenished
