"""Agent names: what a valid one is, the name its process is registered under, and the
failure an agent left under its name when it used up its restart intensity.

A leaf of the agents package (it imports only `app.py`'s names, providers' errors and
the kernel): the spec, `AgentTool`, the low-level calls (`calls.py`), the agent process
and the facade all need these, and none of them may import another for it.

A failed agent has no process, so its failure is kept here, by name, until a new
`spawn_agent` of that name (or `stop_agent`, which forgets it). A record names the agent
supervisor it failed under: once the application tree restarts, it is stale and is
dropped when next looked up. At most `MAX_FAILURES` are kept (the oldest go first).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from adk_actors.app import AGENT_SUPERVISOR
from providers.errors import AdkError
from supervision import Crash, Pid, whereis

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_NAME_BYTES = 128
MAX_FAILURES = 10_000
"""Failed agents remembered at once; past it the oldest record is dropped."""


def check_agent_name(name: Any) -> str:
    """Agent names are identifiers; ``user`` is reserved for the human. An ASCII
    identifier is exactly ``[A-Za-z_][A-Za-z0-9_]*`` (two C calls, no regex); anything
    else takes the regex, which is what decides."""
    if (
        type(name) is str
        and name.isascii()
        and name.isidentifier()
        and len(name) <= MAX_NAME_BYTES
        and (len(name) != 4 or name.lower() != "user")
    ):
        return name
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or len(name) > MAX_NAME_BYTES:
        raise AdkError(
            "invalid_identifier", "agent names match [A-Za-z_][A-Za-z0-9_]* (at most 128)"
        )
    if name.lower() == "user":
        raise AdkError("reserved_user", "'user' names the human in a conversation")
    return name


def registered_name(name: str) -> tuple[str, str]:
    """The registry name of the process serving agent `name`."""
    return ("adk.agent", name)


# -- failed agents ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentFailure:
    """An agent that crashed more than `intensity` times within `period` seconds: its
    restarts stopped there, and only its own process was involved."""

    name: str
    reason: Any
    """The last exit reason, as the kernel reports it (``"killed"``, a bounded
    ``Crash(kind, message)``, or the reason its restart failed to start)."""
    restarts: int
    """Restarts since it was spawned."""
    intensity: int
    period: float
    failed_at: float
    """Wall-clock time (``time.time()``) it was given up on."""
    supervisor: Pid | None
    """The agent supervisor it failed under; a record of an earlier tree is stale."""

    @property
    def kind(self) -> str:
        """The last exit reason as one short, stable word (``killed``, an exception's class
        name, ...), for error reasons."""
        return exit_kind(self.reason)

    def view(self) -> dict[str, Any]:
        """What `agent_info` answers for the failed agent."""
        return {
            "name": self.name,
            "status": "failed",
            "reason": self.reason,
            "restarts": self.restarts,
            "restart_intensity": {"intensity": self.intensity, "period": self.period},
            "failed_at": self.failed_at,
        }

    def error(self) -> AdkError:
        """The error a call to the failed agent raises: ``("agent_failed", kind)``."""
        return AdkError(
            ("agent_failed", self.kind),
            f"the agent exited more than {self.intensity} times within {self.period} s"
            " and was not restarted again; spawn_agent starts it afresh",
        )


def exit_kind(reason: Any) -> str:
    if isinstance(reason, Crash):
        return reason.kind[:64]
    if isinstance(reason, str):
        return reason[:64]
    if isinstance(reason, tuple) and reason and isinstance(reason[0], str):
        return reason[0][:64]
    return type(reason).__name__


_failures: OrderedDict[str, AgentFailure] = OrderedDict()
_failures_lock = threading.Lock()


def record_failure(failure: AgentFailure) -> None:
    """Remember `failure` under its agent's name (replacing an older one)."""
    with _failures_lock:
        _failures.pop(failure.name, None)
        _failures[failure.name] = failure
        while len(_failures) > MAX_FAILURES:
            _failures.popitem(last=False)


def agent_failure(name: str) -> AgentFailure | None:
    """The failure recorded under `name` in the running tree, if any. A running agent of
    that name wins over a record: ask only once the name resolves to no process."""
    with _failures_lock:
        failure = _failures.get(name)
    if failure is None:
        return None
    if failure.supervisor is None or failure.supervisor != whereis(AGENT_SUPERVISOR):
        forget_failure(name, failure)
        return None
    return failure


def forget_failure(name: str, only: AgentFailure | None = None) -> bool:
    """Drop the failure recorded under `name` (only the record `only`, if given);
    True if there was one. A name without a record (every spawn asks) is answered
    without the lock: a dict lookup is atomic, and a record made after it is as new
    to this call as one made after the lock was released."""
    if name not in _failures:
        return False
    with _failures_lock:
        failure = _failures.get(name)
        if failure is None or (only is not None and failure is not only):
            return False
        del _failures[name]
        return True
