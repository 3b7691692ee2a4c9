"""The OTP kernel on pykka: processes, links, monitors, GenServer, supervisors, timers,
tasks, credit streams, inboxes and fenced leases.

Everything a user, a test or an upper layer needs is importable from here; the
modules behind it are the kernel's own. See `docs/supervision.md`.
"""

from supervision import aio
from supervision.child_spec import ChildInfo, ChildSpec
from supervision.crash_report import RestartReport, on_restart
from supervision.credit_stream import (
    MAX_BUFFERED_CEILING,
    CreditStream,
    StreamDetached,
    StreamError,
    StreamItem,
    StreamTerminal,
    next_message,
)
from supervision.dynamic_supervisor import DynamicSupervisor
from supervision.entropy import MAX_RANDOM_BYTES, random_bytes
from supervision.errors import (
    AlreadyStarted,
    CallTimeout,
    KernelError,
    MaxChildrenReached,
    NameTaken,
    ProcessExit,
    StartError,
    SupervisorError,
)
from supervision.gen_server import (
    NO_REPLY,
    Exit,
    From,
    GenServer,
    Ignore,
    NoReply,
    Reply,
    Stop,
    Timeout,
    call,
    cast,
    get_state,
    replace_state,
    reply,
    stop,
)
from supervision.handoffs import (
    HandoffError,
    HandoffsFull,
    HandoffTaken,
    OneShotHandoffs,
    UnknownHandoff,
)
from supervision.inbox import Inbox
from supervision.introspection import kernel_stats, thread_pool_of, thread_pools
from supervision.leases import (
    Clock,
    Lease,
    LeaseError,
    LeaseStore,
    LmdbLeases,
    MemoryLeases,
    check_fence,
    lease_expired,
    system_clock,
    token_digest,
)
from supervision.logs import RedactingFilter, configure_console, get_logger, redact_loggers
from supervision.pid import Pid
from supervision.primitives import demonitor, exit, link, monitor, send, trap_exit, unlink
from supervision.process import is_fenced_thread, receive, self_pid
from supervision.protocol import Ok, Refused
from supervision.redaction import (
    MAX_REDACT_CHARS,
    REDACTED,
    is_secret_key,
    redact_text,
    redact_value,
)
from supervision.registry import register, registered, unregister, whereis
from supervision.requests import Response, cancel_request, send_request
from supervision.runtime import default_task_supervisor, reactor_loop
from supervision.signals import (
    MAX_CRASH_MESSAGE_CHARS,
    Crash,
    Down,
    ExitSignal,
    Reason,
    Ref,
    is_normal_exit,
)
from supervision.supervisor import Supervisor
from supervision.sync_pool import SyncPool, TaskBusy, default_sync_pool, shared_pool
from supervision.task_supervisor import start_task_supervisor
from supervision.tasks import (
    DEADLINE_REASON,
    Task,
    TaskFailed,
    TaskResult,
    TaskTimeout,
    wait_all,
)
from supervision.timer_service import TimerRef
from supervision.timers import cancel_timer, send_after
from supervision.wakeups import acquire_or_hand_over, before_blocking

# `before_blocking()`: call it in a pooled server's handler just before code that may
# block where the kernel cannot see it (a store's write transaction or fsync, a lock
# another thread may hold, `time.sleep`, sync I/O). A message the handler sent to
# another pooled server waits for this worker until the handler returns; this call
# hands it to an idle thread at once, instead of after the block (or the watchdog's
# next look, up to `block_warning / 2`). Kernel waits (`call`, `receive`, `wait_dead`)
# call it themselves; elsewhere, or when nothing is owed, it is one thread-local read.
# `acquire_or_hand_over(lock)`: acquire a lock another thread may hold, calling
# `before_blocking()` first only if it is held (one non-blocking try otherwise).

__all__ = [
    "DEADLINE_REASON",
    "MAX_BUFFERED_CEILING",
    "MAX_CRASH_MESSAGE_CHARS",
    "MAX_RANDOM_BYTES",
    "MAX_REDACT_CHARS",
    "NO_REPLY",
    "REDACTED",
    "AlreadyStarted",
    "CallTimeout",
    "ChildInfo",
    "ChildSpec",
    "Clock",
    "Crash",
    "CreditStream",
    "Down",
    "DynamicSupervisor",
    "Exit",
    "ExitSignal",
    "From",
    "GenServer",
    "HandoffError",
    "HandoffTaken",
    "HandoffsFull",
    "Ignore",
    "Inbox",
    "KernelError",
    "Lease",
    "LeaseError",
    "LeaseStore",
    "LmdbLeases",
    "MaxChildrenReached",
    "MemoryLeases",
    "NameTaken",
    "NoReply",
    "Ok",
    "OneShotHandoffs",
    "Pid",
    "ProcessExit",
    "Reason",
    "RedactingFilter",
    "Ref",
    "Refused",
    "Reply",
    "Response",
    "RestartReport",
    "StartError",
    "Stop",
    "StreamDetached",
    "StreamError",
    "StreamItem",
    "StreamTerminal",
    "Supervisor",
    "SupervisorError",
    "SyncPool",
    "Task",
    "TaskBusy",
    "TaskFailed",
    "TaskResult",
    "TaskTimeout",
    "Timeout",
    "TimerRef",
    "UnknownHandoff",
    "acquire_or_hand_over",
    "aio",
    "before_blocking",
    "call",
    "cancel_request",
    "cancel_timer",
    "cast",
    "check_fence",
    "configure_console",
    "default_sync_pool",
    "default_task_supervisor",
    "demonitor",
    "exit",
    "get_logger",
    "get_state",
    "is_fenced_thread",
    "is_normal_exit",
    "is_secret_key",
    "kernel_stats",
    "lease_expired",
    "link",
    "monitor",
    "next_message",
    "on_restart",
    "random_bytes",
    "reactor_loop",
    "receive",
    "redact_loggers",
    "redact_text",
    "redact_value",
    "register",
    "registered",
    "replace_state",
    "reply",
    "self_pid",
    "send",
    "send_after",
    "send_request",
    "shared_pool",
    "start_task_supervisor",
    "stop",
    "system_clock",
    "thread_pool_of",
    "thread_pools",
    "token_digest",
    "trap_exit",
    "unlink",
    "unregister",
    "wait_all",
    "whereis",
]
