"""The controller's bookkeeping: granted permits, waiting requests, per-agent counts.

Plain data owned by the admission controller process and touched only by its
handlers, so it needs no locks. It decides who may run next (the oldest waiter
whose agent is below its limit, while the global limit has room) but sends no
messages: the server does the kernel work (replies, monitors, timers).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from adk_actors.admission.config import AdmissionConfig
from supervision import From, Pid, TimerRef

Scope = Literal["agent", "global"]


@dataclass(slots=True)
class Grant:
    """One granted permit: who owns it and for which agent."""

    permit_id: str
    request_id: str
    agent: str
    owner: Pid


@dataclass(slots=True)
class Waiter:
    """One queued request: its deferred reply, owner (who will hold the permit),
    requester (who waits for the answer; usually the owner), absolute deadline, expiry
    timer, and `lane`: the metrics label of the limit that made it wait (its agent, or
    ``"_global"``), kept so it leaves the queue under the label it entered with."""

    request_id: str
    agent: str
    owner: Pid
    requester: Pid
    from_: From
    seq: int
    deadline: float
    lane: str
    timer: TimerRef | None = None


@dataclass(slots=True)
class Ledger:
    """Every permit and waiter of one controller; indexes by request, agent and owner."""

    config: AdmissionConfig
    grants: dict[str, Grant] = field(default_factory=dict)
    requests: dict[str, Grant | Waiter] = field(default_factory=dict)
    agent_active: Counter[str] = field(default_factory=Counter)
    waiting: dict[str, dict[str, Waiter]] = field(default_factory=dict)
    owners: dict[Pid, set[str]] = field(default_factory=dict)
    queued: int = 0
    next_seq: int = 0

    @property
    def active(self) -> int:
        """Permits currently granted."""
        return len(self.grants)

    def blocked_by(self, agent: str) -> Scope | None:
        """Why a new request for `agent` cannot run now (None: it can)."""
        if self.agent_active[agent] >= self.config.limit_for(agent):
            return "agent"
        if len(self.grants) >= self.config.global_limit:
            return "global"
        return None

    def grant(self, permit_id: str, request_id: str, agent: str, owner: Pid) -> Grant:
        """Record a granted permit (the caller checked `blocked_by` first)."""
        grant = Grant(permit_id, request_id, agent, owner)
        self.grants[permit_id] = grant
        self.requests[request_id] = grant
        self.agent_active[agent] += 1
        self.owners.setdefault(owner, set()).add(request_id)
        return grant

    def release(self, permit_id: str) -> Grant | None:
        """Forget a granted permit; None if it is not (or no longer) granted."""
        grant = self.grants.pop(permit_id, None)
        if grant is None:
            return None
        del self.requests[grant.request_id]
        self.agent_active[grant.agent] -= 1
        if self.agent_active[grant.agent] <= 0:
            del self.agent_active[grant.agent]
        self._drop_owner_item(grant.owner, grant.request_id)
        return grant

    def enqueue(
        self,
        request_id: str,
        agent: str,
        owner: Pid,
        requester: Pid,
        from_: From,
        deadline: float,
        lane: str,
    ) -> Waiter:
        """Queue a request behind every earlier one (the caller checked `max_queue`);
        it is indexed under its owner and its requester, the processes it depends on."""
        self.next_seq += 1
        waiter = Waiter(request_id, agent, owner, requester, from_, self.next_seq, deadline, lane)
        self.waiting.setdefault(agent, {})[request_id] = waiter
        self.requests[request_id] = waiter
        self.owners.setdefault(owner, set()).add(request_id)
        self.owners.setdefault(requester, set()).add(request_id)
        self.queued += 1
        return waiter

    def dequeue(self, request_id: str) -> Waiter | None:
        """Remove a queued request; None if it is not queued."""
        waiter = self.requests.get(request_id)
        if not isinstance(waiter, Waiter):
            return None
        del self.requests[request_id]
        queue = self.waiting[waiter.agent]
        del queue[request_id]
        if not queue:
            del self.waiting[waiter.agent]
        self.queued -= 1
        self._drop_owner_item(waiter.owner, request_id)
        self._drop_owner_item(waiter.requester, request_id)
        return waiter

    def next_eligible(self) -> Waiter | None:
        """The oldest waiter whose agent has room, if the global limit has room."""
        if len(self.grants) >= self.config.global_limit:
            return None
        best: Waiter | None = None
        for agent, queue in self.waiting.items():
            if self.agent_active[agent] >= self.config.limit_for(agent):
                continue
            head = next(iter(queue.values()))
            if best is None or head.seq < best.seq:
                best = head
        return best

    def owner_items(self, owner: Pid) -> tuple[list[Grant], list[Waiter]]:
        """The permits `owner` holds and the queued requests it owns or waits for,
        oldest first."""
        grants: list[Grant] = []
        waiters: list[Waiter] = []
        for request_id in self.owners.get(owner, ()):
            item = self.requests[request_id]
            if isinstance(item, Grant):
                grants.append(item)
            else:
                waiters.append(item)
        waiters.sort(key=lambda waiter: waiter.seq)
        return grants, waiters

    def waiters(self) -> list[Waiter]:
        """Every queued request (in no particular order)."""
        return [item for item in self.requests.values() if isinstance(item, Waiter)]

    def has_owner(self, owner: Pid) -> bool:
        """True while `owner` holds a permit, or owns or waits for a queued request."""
        return owner in self.owners

    def status(self) -> dict[str, Any]:
        """JSON-safe counts and limits: no pids, request ids or permit ids."""
        names = set(self.agent_active) | set(self.waiting) | set(self.config.agent_limits)
        agents = {
            name: {
                "active": self.agent_active.get(name, 0),
                "queued": len(self.waiting.get(name, ())),
                "limit": self.config.limit_for(name),
            }
            for name in sorted(names)
        }
        return {
            "active": len(self.grants),
            "queued": self.queued,
            "global_limit": self.config.global_limit,
            "default_agent_limit": self.config.default_agent_limit,
            "overflow": self.config.overflow,
            "max_queue": self.config.max_queue,
            "default_queue_timeout": self.config.default_queue_timeout,
            "agents": agents,
        }

    def _drop_owner_item(self, owner: Pid, request_id: str) -> None:
        items = self.owners.get(owner)
        if items is None:
            return
        items.discard(request_id)
        if not items:
            del self.owners[owner]
