"""Admission control: global and per-agent concurrency limits with a bounded queue.

One `AdmissionController` per application (``adk.admission``); the invocation worker
calls `acquire` and owns the returned `Permit`, which `release` gives back exactly
once (or the controller's monitor does, when the owner dies). See `docs/admission.md`.
"""

from adk_actors.admission.api import (
    CHILD_ID,
    NAME,
    Permit,
    acquire,
    cancel,
    child_spec,
    new_request_id,
    release,
    start_link,
    status,
)
from adk_actors.admission.config import (
    DEFAULT_AGENT_LIMIT,
    DEFAULT_GLOBAL_LIMIT,
    DEFAULT_MAX_QUEUE,
    DEFAULT_OVERFLOW,
    DEFAULT_QUEUE_TIMEOUT,
    MAX_AGENT_LIMIT_ENTRIES,
    MAX_LIMIT,
    MAX_QUEUE_CEILING,
    MAX_TIMEOUT,
    AdmissionConfig,
    validate_config,
)
from adk_actors.admission.server import AdmissionController

__all__ = [
    "CHILD_ID",
    "DEFAULT_AGENT_LIMIT",
    "DEFAULT_GLOBAL_LIMIT",
    "DEFAULT_MAX_QUEUE",
    "DEFAULT_OVERFLOW",
    "DEFAULT_QUEUE_TIMEOUT",
    "MAX_AGENT_LIMIT_ENTRIES",
    "MAX_LIMIT",
    "MAX_QUEUE_CEILING",
    "MAX_TIMEOUT",
    "NAME",
    "AdmissionConfig",
    "AdmissionController",
    "Permit",
    "acquire",
    "cancel",
    "child_spec",
    "new_request_id",
    "release",
    "start_link",
    "status",
    "validate_config",
]
