"""`adk.a2a.serve`: an agent as an A2A 1.0 server (JSON-RPC + SSE), as supervised processes.

``serve(agent, host="127.0.0.1", port=0, auth_token=... | verifier=...)`` checks its
options (typed errors naming the key), starts the agent's task store
(`adk_actors.a2a.tasks`, a child of the root tree) and then `adk_actors.serving`'s
supervised listener serving `server_http.a2a_routes`: uvicorn on its own thread, bounded
request heads, a JSON 503 past ``max_connections``; restarted on the same port if it
stops on its own. The card is published once the port is known, with the interface URL
``public_url`` (or the listener's URL) + `wire.RPC_PATH`; when the server requires a
credential the card declares the ``bearer`` HTTP scheme (unless ``card`` gives its own).

Authentication is required: ``auth_token`` (a static bearer token of 16+ bytes, kept as
its digest; its principal is ``auth_token``) and/or ``verifier(token) -> principal |
None`` (run off the event loop under ``callback_timeout``, failing closed). Serving with
neither needs ``allow_unauthenticated_loopback=True`` and a loopback host (every caller
is then the principal ``anonymous``). Binding anywhere but loopback needs authentication,
``allow_non_loopback=True`` and TLS (``tls_certfile``/``tls_keyfile``, or
``trusted_tls_proxy=True`` when only a TLS terminator reaches the listener), and a
``public_url`` for a wildcard address. `A2AServer.stop` ends the open streams (each
closes cleanly: no wait for uvicorn's graceful timeout) and refuses new requests (503);
it drains the store (a request already past that check is refused by the store: 503
too), cancels the store's running runs and waits (bounded) for their ends, so each
stores its end event while the sessions are still open and a blocking ``SendMessage``
is answered with its settled task; then it stops the listener and the store (which
closes them).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Annotated, Any
from urllib.parse import urlsplit

import msgspec
from a2a.types import a2a_pb2 as pb
from starlette.responses import JSONResponse
from starlette.routing import Router
from starlette.types import Receive, Scope, Send

from adk_actors import runs
from adk_actors.a2a import wire
from adk_actors.a2a.card import card_for_agent
from adk_actors.a2a.server_http import A2A_AUTH_NAMES, CardSlot, a2a_routes
from adk_actors.a2a.server_options import REASON, A2AServerOptions, server_options
from adk_actors.a2a.server_sse import StreamsClosing
from adk_actors.a2a.task_runs import STORE_STOPPED_REASON
from adk_actors.a2a.tasks import TaskStore, start_task_store, stop_task_store
from adk_actors.agents import AgentRef
from adk_actors.serving import (
    ExposureReasons,
    Listener,
    ListenerNames,
    UvicornOptions,
    check_exposure,
    is_loopback,
    start_listener,
    stop_listener,
)
from adk_actors.serving.auth import BearerAuth, Verifier
from providers.errors import AdkError, decode_options

__all__ = ["A2AServer", "bearer_security", "serve"]

_STOP_TIMEOUT = 10.0
_RUNS_END_TIMEOUT = 5.0
"""How long `A2AServer.stop` waits for the runs it cancelled to store their ends."""
_RUNS_PAGE = 500
_MAX_LISTINGS = 20
"""At most this many listings of the running runs per stop (each cancels what it finds)."""
_BACKLOG = 1024
_NAMES = ListenerNames(
    bind_failed="a2a_server_bind_failed",
    start_failed="a2a_server_start_failed",
    stopped="a2a_listener_stopped",
    log="adk.a2a.server",
    thread="adk-a2a",
    label="A2A listener",
)
A2A_EXPOSURE_REASONS = ExposureReasons(
    requires_auth="a2a_auth_required",
    not_acknowledged="a2a_non_loopback_not_acknowledged",
    requires_tls="a2a_non_loopback_requires_tls",
    label="A2A server",
)
BEARER_SCHEME = "bearer"
"""The security scheme a credentialed server's card declares (HTTP bearer)."""
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})
_ids = itertools.count(1)


class ListenOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`serve`'s plain listener options, checked like `A2AServerOptions`
    (``("invalid_a2a_server_option", key)``)."""

    host: Annotated[str, msgspec.Meta(min_length=1, max_length=255)] = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 0
    allow_unauthenticated_loopback: bool = False
    allow_non_loopback: bool = False
    trusted_tls_proxy: bool = False
    tls_certfile: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)] | None = None
    tls_keyfile: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)] | None = None
    public_url: Annotated[str, msgspec.Meta(min_length=8, max_length=2048)] | None = None
    max_connections: Annotated[int, msgspec.Meta(ge=1, le=65_536)] = 256
    callback_timeout: Annotated[float, msgspec.Meta(ge=0.001, le=30.0)] = 5.0


class A2AServer:
    """A running A2A server: `url` is its base URL (the card at `card_url`, JSON-RPC at
    `rpc_url`; ``public_url`` when given, else `listener_url`); `stop` (or leaving the
    ``with`` block) stops it."""

    def __init__(
        self,
        listener: Listener,
        store: TaskStore,
        auth: BearerAuth,
        url: str,
        closing: StreamsClosing | None = None,
        app_name: str | None = None,
    ) -> None:
        self.pid = listener.pid
        self.child_id = listener.child_id
        self.url = url
        self.listener_url = listener.url
        """Where the listener itself listens (`url` differs when ``public_url`` is given)."""
        self.card_url = url + wire.CARD_PATH
        self.rpc_url = url + wire.RPC_PATH
        self.store = store
        self._listener = listener
        self._auth = auth
        self._closing = closing or StreamsClosing()
        self._app_name = app_name
        self._lock = threading.Lock()
        self._stopped = False

    def __repr__(self) -> str:
        return f"A2AServer({self.url!r})"

    def stop(self) -> None:
        """End the open streams, end the store's runs, stop the listener (the port is
        free once this returns), then the store; a no-op the second time."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._closing.close()  # open streams end; new requests are 503
        try:
            deadline = time.monotonic() + _RUNS_END_TIMEOUT
            # a request already past the 503 check is refused by the store itself, and
            # no run is still being started once this returns (Review2 1)
            self.store.drain(deadline - time.monotonic())
            if self._app_name is not None:  # a blocking SendMessage is answered as it settles
                end_runs(self._app_name, deadline)
        finally:
            try:
                stop_listener(self._listener)
            finally:
                stop_task_store(self.store)
            self._auth.hooks.release_idle()

    def __enter__(self) -> A2AServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def serve(
    agent: str | AgentRef,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    auth_token: str | None = None,
    verifier: Verifier | None = None,
    allow_unauthenticated_loopback: bool = False,
    card: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | A2AServerOptions | None = None,
    allow_non_loopback: bool = False,
    tls_certfile: str | None = None,
    tls_keyfile: str | None = None,
    trusted_tls_proxy: bool = False,
    public_url: str | None = None,
    max_connections: int = 256,
    callback_timeout: float = 5.0,
) -> A2AServer:
    """Serve `agent` over A2A 1.0 (see the module doc); returns once it listens.

    `card`: `card.build_card` overrides (``name``, ``description``, ``version``,
    ``skills``, ``provider``, ``security_schemes``...); `options`: the bounds
    (`A2AServerOptions`)."""
    checked = server_options(options)
    listen = _listen_options(
        host=host,
        port=port,
        allow_unauthenticated_loopback=allow_unauthenticated_loopback,
        allow_non_loopback=allow_non_loopback,
        trusted_tls_proxy=trusted_tls_proxy,
        tls_certfile=tls_certfile,
        tls_keyfile=tls_keyfile,
        public_url=public_url,
        max_connections=max_connections,
        callback_timeout=callback_timeout,
    )
    agent_name = _agent_name(agent)
    auth = BearerAuth(
        auth_token=auth_token,
        verifier=verifier,
        callback_timeout=listen.callback_timeout,
        names=A2A_AUTH_NAMES,
    )
    _check_exposure(listen, auth)
    overrides = _card_overrides(card, auth)
    public = None if listen.public_url is None else _public_url(listen.public_url)
    if public is None and listen.host in _WILDCARDS:
        raise AdkError((REASON, "public_url"), "a wildcard host needs the public_url clients use")
    probe = _card(agent_name, public or "http://127.0.0.1", overrides)  # refused now, if at all
    slot = CardSlot(probe if public is not None else None)
    closing = StreamsClosing()
    number = next(_ids)
    app_name = f"a2a.a2a_tasks_{number}"
    store = start_task_store(agent, checked, child_id=f"a2a_tasks_{number}", app_name=app_name)
    try:
        listener = start_listener(
            lambda: _app(store, slot, auth, checked, closing),
            UvicornOptions(
                max_connections=listen.max_connections,
                graceful_timeout=_STOP_TIMEOUT / 2,
                stop_timeout=_STOP_TIMEOUT,
                backlog=_BACKLOG,
                tls_certfile=listen.tls_certfile,
                tls_keyfile=listen.tls_keyfile,
                names=_NAMES,
            ),
            host=listen.host,
            port=listen.port,
            child_id=f"a2a_server_{number}",
        )
    except BaseException:
        stop_task_store(store)
        raise
    url = public or listener.url
    if public is None:
        slot.publish(_card(agent_name, url, overrides))
    return A2AServer(listener, store, auth, url, closing, app_name)


def end_runs(app_name: str, deadline: float, *, page_size: int = _RUNS_PAGE) -> int:
    """Cancel the running runs of `app_name` (a store's runner) and wait until
    `deadline` for their ends: each stores its end event in its session before the
    store closes the sessions (Review F9). The listing pages by offset, so a run that
    ends meanwhile shifts the pages: it is listed again, each page's runs cancelled,
    until a listing holds no run not yet cancelled (Review2 8). How many it cancelled."""
    seen: set[str] = set()
    cancelled: list[str] = []
    for _ in range(_MAX_LISTINGS):
        fresh = [run_id for run_id in _running(app_name, page_size) if run_id not in seen]
        if not fresh or time.monotonic() >= deadline:
            break
        for run_id in fresh:
            seen.add(run_id)
            try:
                runs.cancel(run_id, reason=STORE_STOPPED_REASON)
            except AdkError:
                continue  # it ended meanwhile
            cancelled.append(run_id)
    for run_id in cancelled:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            runs.wait(run_id, timeout=remaining)
        except AdkError:
            continue  # timed out (the store's stop cancels it again) or already gone
    return len(cancelled)


def _running(app_name: str, page_size: int) -> list[str]:
    """The ids of `app_name`'s running runs, every page (empty once the registry is gone)."""
    running: list[str] = []
    cursor: str | None = None
    try:
        while True:
            page = runs.list(state="running", app_name=app_name, limit=page_size, cursor=cursor)
            running.extend(view["run_id"] for view in page["runs"])
            cursor = page["next_cursor"]
            if cursor is None:
                return running
    except AdkError:
        return running  # the runs registry is gone: nothing left to end


def _listen_options(**values: Any) -> ListenOptions:
    """The checked `ListenOptions` (the TLS files go together)."""
    listen = decode_options(ListenOptions, values, REASON, what="A2A server option")
    if (listen.tls_certfile is None) != (listen.tls_keyfile is None):
        raise AdkError((REASON, "tls"), "tls_certfile and tls_keyfile go together")
    return listen


def _app(
    store: TaskStore,
    slot: CardSlot,
    auth: BearerAuth,
    options: A2AServerOptions,
    closing: StreamsClosing,
) -> Router:
    """A fresh ASGI app over the same store, card, credentials and stream closer (per
    listener start)."""
    return Router(a2a_routes(store, slot, auth, options, closing=closing), default=_not_found)


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32601, "message": "not found"}}
    response = JSONResponse(body, status_code=404, headers={"cache-control": "no-store"})
    await response(scope, receive, send)


def _agent_name(agent: str | AgentRef) -> str:
    if isinstance(agent, AgentRef):
        return agent.name
    if isinstance(agent, str) and agent:
        return agent
    raise AdkError((REASON, "agent"), "agent is an agent name or an AgentRef")


def _check_exposure(listen: ListenOptions, auth: BearerAuth) -> None:
    """The non-loopback rule, then: no credential at all only when asked, on loopback."""
    check_exposure(
        listen.host,
        authenticated=auth.required,
        allow_non_loopback=listen.allow_non_loopback,
        tls=listen.tls_certfile is not None,
        trusted_tls_proxy=listen.trusted_tls_proxy,
        reasons=A2A_EXPOSURE_REASONS,
    )
    if not auth.required and not (
        listen.allow_unauthenticated_loopback and is_loopback(listen.host)
    ):
        raise AdkError(
            "a2a_auth_required",
            "serve needs auth_token or verifier (or allow_unauthenticated_loopback=True on loopback)",
        )


def _card_overrides(card: Mapping[str, Any] | None, auth: BearerAuth) -> dict[str, Any]:
    """`build_card` overrides; a credentialed server declares the bearer scheme."""
    if card is not None and not isinstance(card, Mapping):
        raise AdkError((REASON, "card"), "card is a mapping of build_card overrides")
    overrides = dict(card or {})
    if "url" in overrides:
        raise AdkError((REASON, "card"), "the card's url is the server's (use public_url)")
    if auth.required and "security_schemes" not in overrides:
        declared = bearer_security()
        overrides["security_schemes"] = declared["security_schemes"]
        overrides.setdefault("security_requirements", declared["security_requirements"])
    return overrides


def bearer_security() -> dict[str, Any]:
    """The `build_card` overrides of a server that takes a bearer token: the HTTP
    ``bearer`` scheme, required (``security_schemes`` and ``security_requirements``)."""
    return {
        "security_schemes": {BEARER_SCHEME: {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
        "security_requirements": [{"schemes": {BEARER_SCHEME: {}}}],
    }


def _card(agent_name: str, base_url: str, overrides: Mapping[str, Any]) -> pb.AgentCard:
    """The served agent's card (its one skill named after the agent) at `base_url`."""
    rest = dict(overrides)
    description = rest.pop("description", f"The {agent_name} agent.")
    try:
        return card_for_agent(agent_name, description, base_url + wire.RPC_PATH, **rest)
    except TypeError:
        raise AdkError((REASON, "card"), "card holds build_card's keyword arguments") from None


def _public_url(url: str) -> str:
    """`url` checked (absolute http(s), no credentials, query or fragment), without a
    trailing slash."""
    parts = urlsplit(url)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username
        or parts.password
        or parts.query
        or parts.fragment
    ):
        raise AdkError((REASON, "public_url"), "public_url is an absolute http(s) URL")
    return url.rstrip("/")
