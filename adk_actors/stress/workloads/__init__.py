"""Stress workloads for the in-process target: workflows, ambient triggers, approvals."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from adk_actors.stress.workloads.ambient import AmbientWorkload
from adk_actors.stress.workloads.approvals import ApprovalsWorkload
from adk_actors.stress.workloads.base import Workload
from adk_actors.stress.workloads.workflows import WorkflowsWorkload

WORKLOADS: Mapping[str, Callable[[], Workload]] = MappingProxyType(
    {
        "workflows": WorkflowsWorkload,
        "ambient": AmbientWorkload,
        "approvals": ApprovalsWorkload,
    }
)
"""Workload factories by scenario kind; each call gives a fresh, unopened workload."""

__all__ = [
    "WORKLOADS",
    "AmbientWorkload",
    "ApprovalsWorkload",
    "WorkflowsWorkload",
    "Workload",
]
