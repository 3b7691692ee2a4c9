"""Starting an invocation server: `launch`, under the invocation supervisor."""

from __future__ import annotations

from adk_actors.app import RUN_SUPERVISOR, ensure_started
from adk_actors.runner.request import InvocationRequest, handoffs
from adk_actors.runner.server import InvocationServer
from providers.errors import AdkError
from supervision import (
    ChildSpec,
    DynamicSupervisor,
    MaxChildrenReached,
    Pid,
    ProcessExit,
    SupervisorError,
)


def launch(request: InvocationRequest) -> Pid:
    """Start an invocation server under the invocation supervisor; the request crosses
    the one-shot handoff (the child spec holds only its reference). Refusals raise
    `AdkError`: ``already_exists`` (a run id in use), ``too_many_runs``, ``not_started``."""
    ensure_started()
    ref = handoffs.put(request)
    spec = ChildSpec(ref, lambda: InvocationServer.start_link(ref), restart="temporary")
    try:
        server = DynamicSupervisor.start_child(RUN_SUPERVISOR, spec)
    except MaxChildrenReached:
        raise AdkError("too_many_runs", "the invocation supervisor is at max_children") from None
    except SupervisorError as error:
        reason = error.reason
        if isinstance(reason, tuple) and len(reason) == 2 and reason[0] == "shutdown":
            reason = reason[1]
        if reason in ("already_exists", "handoff_taken"):
            raise AdkError(reason, "the invocation was not started") from None
        raise AdkError(
            ("invocation_start_failed", str(reason)[:200]), "the invocation did not start"
        ) from None
    except ProcessExit:
        raise AdkError("not_started", "the application is not running") from None
    finally:
        handoffs.discard(ref)  # taken by the server, or withdrawn: never left behind
    if server is None:  # a temporary child that ended at once (cannot happen: it waits)
        raise AdkError("not_started", "the invocation ended before it started")
    return server
