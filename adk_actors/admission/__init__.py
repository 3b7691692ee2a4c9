"""Admission control: global and per-agent concurrency limits with a bounded queue.

One `AdmissionController` per application (``adk.admission``); the invocation worker
calls `acquire` and owns the returned `Permit`, which `release` gives back exactly
once (or the controller's monitor does, when the owner dies). A process that must stay
responsive asks with `request_permit` and gets its answer as a message
(`permit_from_response`); a plain thread may `submit` (for itself or another owner)
and `await_permit` the answer with a timeout. The messages (`Acquire`, `Granted`, `Refused`, ...) are typed.
See `docs/admission.md`.
"""

from adk_actors.admission.api import (
    CHILD_ID,
    NAME,
    AdmissionRequest,
    Permit,
    acquire,
    await_permit,
    cancel,
    child_spec,
    new_request_id,
    permit_from_response,
    release,
    request_permit,
    start_link,
    status,
    submit,
    withdraw,
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
    AcquireArguments,
    AdmissionConfig,
    validate_config,
)
from adk_actors.admission.server import (
    Abandon,
    Acquire,
    AdmissionController,
    Cancel,
    Granted,
    Refused,
    Release,
    Status,
    Withdraw,
)

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
    "Abandon",
    "Acquire",
    "AcquireArguments",
    "AdmissionConfig",
    "AdmissionController",
    "AdmissionRequest",
    "Cancel",
    "Granted",
    "Permit",
    "Refused",
    "Release",
    "Status",
    "Withdraw",
    "acquire",
    "await_permit",
    "cancel",
    "child_spec",
    "new_request_id",
    "permit_from_response",
    "release",
    "request_permit",
    "start_link",
    "status",
    "submit",
    "validate_config",
    "withdraw",
]
