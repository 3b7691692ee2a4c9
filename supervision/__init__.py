"""The OTP kernel on pykka: processes, links, monitors, GenServer, supervisors, timers.

Everything a user or a test needs is importable from here; see `docs/supervision.md`.
"""

from supervision import aio
from supervision.child_spec import ChildInfo, ChildSpec
from supervision.dynamic_supervisor import DynamicSupervisor
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
    From,
    GenServer,
    NoReply,
    Reply,
    Stop,
    call,
    cast,
    reply,
    stop,
)
from supervision.introspection import kernel_stats
from supervision.pid import Pid
from supervision.primitives import demonitor, exit, link, monitor, send, trap_exit, unlink
from supervision.process import receive, self_pid
from supervision.registry import register, registered, unregister, whereis
from supervision.requests import Response, cancel_request, send_request
from supervision.signals import Crash, Down, ExitSignal, Ref, is_normal_exit
from supervision.supervisor import Supervisor
from supervision.timers import TimerRef, cancel_timer, send_after

__all__ = [
    "NO_REPLY",
    "AlreadyStarted",
    "CallTimeout",
    "ChildInfo",
    "ChildSpec",
    "Crash",
    "Down",
    "DynamicSupervisor",
    "ExitSignal",
    "From",
    "GenServer",
    "KernelError",
    "MaxChildrenReached",
    "NameTaken",
    "NoReply",
    "Pid",
    "ProcessExit",
    "Ref",
    "Reply",
    "Response",
    "StartError",
    "Stop",
    "Supervisor",
    "SupervisorError",
    "TimerRef",
    "aio",
    "call",
    "cancel_request",
    "cancel_timer",
    "cast",
    "demonitor",
    "exit",
    "is_normal_exit",
    "kernel_stats",
    "link",
    "monitor",
    "receive",
    "register",
    "registered",
    "reply",
    "self_pid",
    "send",
    "send_after",
    "send_request",
    "stop",
    "trap_exit",
    "unlink",
    "unregister",
    "whereis",
]
