"""Supervised declarative workflows (`adk.workflows`).

    wf = adk.compile_workflow({"version": 1, "id": "wf-v1", "kind": "sequential",
                               "steps": [{"id": "a", "run": fn}]})
    outcome = adk.run_workflow(wf, {"count": 0})      # Completed(state, checkpoint) | ...
    ref = adk.workflows.start(wf, state); adk.workflows.wait(ref)
    outcome = await adk.workflows.run_async(wf, state)  # the wait registered at the start
    adk.workflows.cancel(ref, "revise_later"); adk.workflows.resume(wf, checkpoint, resume_input)

Durable invocations (`start_durable`, `resume_durable`, ...) keep every checkpoint in
a fenced ledger (`LmdbLedger`) so a run survives its process. See `docs/workflows.md`.
"""

from adk_actors.workflows import retry
from adk_actors.workflows.api import (
    cancel,
    checkpoint,
    compile_workflow,
    resume,
    run_async,
    run_workflow,
    start,
    status,
    wait,
    wait_async,
)
from adk_actors.workflows.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from adk_actors.workflows.durable import (
    delete_durable,
    durable_status,
    resume_durable,
    start_durable,
)
from adk_actors.workflows.errors import WorkflowSpecError
from adk_actors.workflows.ledger import Ledger, MemoryLedger
from adk_actors.workflows.ledger_lmdb import LmdbLedger
from adk_actors.workflows.messages import WorkflowEvent
from adk_actors.workflows.outcomes import Cancelled, Completed, Failed, Outcome, Paused
from adk_actors.workflows.results import (
    Agent,
    Error,
    Goto,
    Output,
    Pause,
    Route,
    Stop,
    ToolCall,
    Transfer,
)
from adk_actors.workflows.spec import CompiledWorkflow

__all__ = [
    "Agent",
    "Cancelled",
    "Checkpoint",
    "CompiledWorkflow",
    "Completed",
    "Error",
    "Failed",
    "Goto",
    "Ledger",
    "LmdbLedger",
    "MemoryLedger",
    "Outcome",
    "Output",
    "Pause",
    "Paused",
    "Route",
    "Stop",
    "ToolCall",
    "Transfer",
    "WorkflowEvent",
    "WorkflowSpecError",
    "cancel",
    "checkpoint",
    "compile_workflow",
    "decode_checkpoint",
    "delete_durable",
    "durable_status",
    "encode_checkpoint",
    "resume",
    "resume_durable",
    "retry",
    "run_async",
    "run_workflow",
    "start",
    "start_durable",
    "status",
    "wait",
    "wait_async",
]
