"""``python -m adk_actors.daemon``: startup refusals, the listening line, and a drain on
SIGTERM or SIGINT that loses no stored event (real subprocesses, real LMDB)."""

from __future__ import annotations

import io
import json
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

import adk_actors as adk
from adk_actors.daemon.drain import DrainReport, drain
from adk_actors.daemon.listener import stop_listener
from adk_actors.daemon.serve import EXIT_FAILED, EXIT_REFUSED, error_line, main
from adk_actors.observability import sdk
from adk_actors.sessions import LmdbSessionService
from providers.errors import AdkError
from tests.daemon.conftest import TOKEN, DevServer, start_dev_server

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0
AUTH = {"authorization": f"Bearer {TOKEN}"}
ENV = {"ADK_DEV_TOKEN": TOKEN}


class Daemon:
    """A daemon subprocess and what its listening line said."""

    def __init__(self, process: subprocess.Popen[str], line: dict[str, Any]) -> None:
        self.process = process
        self.line = line
        self.url: str = line["url"]

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=AUTH, timeout=10.0)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        self.process.send_signal(signum)
        return self.process.wait(timeout)


def _environ(**extra: str) -> dict[str, str]:
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("ADK_") and key not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    }
    environ["PYTHONPATH"] = str(ROOT)
    return {**environ, **extra}


def _spawn(args: list[str], environ: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "adk_actors.daemon", *args],
        env=environ,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _first_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT)
    if not ready:
        process.kill()
        pytest.fail("the daemon printed nothing in time")
    return process.stdout.readline()


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    """Daemons a test starts; any still running at the end is killed."""
    started: list[Daemon] = []
    yield started
    for daemon in started:
        if daemon.process.poll() is None:
            daemon.process.kill()
            daemon.process.wait(30)
        for stream in (daemon.process.stdout, daemon.process.stderr):
            if stream is not None:
                stream.close()


def _start(daemons: list[Daemon], config: Path, data: Path, **env: str) -> Daemon:
    process = _spawn(
        ["--config", str(config), "--port", "0", "--data", str(data)],
        _environ(ADK_DEV_TOKEN=TOKEN, **env),
    )
    line = _first_line(process)
    if not line:
        assert process.stderr is not None
        pytest.fail(f"the daemon did not start: {process.stderr.read()[-2000:]}")
    daemon = Daemon(process, json.loads(line))
    daemons.append(daemon)
    return daemon


def _config(tmp_path: Path, script: list[dict[str, Any]]) -> Path:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps({"name": "CliAgent", "provider": "scripted", "script": script}))
    return path


def _start_run(daemon: Daemon, session: str, message: str) -> str:
    body = {
        "agent_name": "CliAgent",
        "app_name": "serve_app",
        "user_id": "user-1",
        "session_id": session,
        "message": message,
    }
    with daemon.client() as client:
        response = client.post("/dev/v1/runs", json=body)
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


def _until_running(daemon: Daemon, run_id: str) -> None:
    """Wait until the run's status says it is running (it may still be admitted)."""
    deadline = time.monotonic() + 30
    with daemon.client() as client:
        while time.monotonic() < deadline:
            if client.get(f"/dev/v1/runs/{run_id}").json()["state"] == "running":
                return
            time.sleep(0.02)
    pytest.fail("the run was never seen running")


def _until_refused(daemon: Daemon) -> httpx.Response | None:
    """The first answer after the signal that is a refusal (the signal lands at once,
    the daemon notices it a moment later); None if the daemon was gone first (a
    loaded machine may finish the whole drain between two polls)."""
    deadline = time.monotonic() + 30
    with daemon.client() as client:
        while time.monotonic() < deadline:
            try:
                response = client.get("/dev/v1/agents")
            except httpx.TransportError:
                return None  # refused, reset or closed: it stopped listening
            if response.status_code != 200:
                return response
            time.sleep(0.02)
    pytest.fail("never refused after the signal")


def _session_events(daemon: Daemon, session: str) -> list[dict[str, Any]]:
    with daemon.client() as client:
        response = client.get(f"/dev/v1/sessions/serve_app/user-1/{session}")
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["events"]
    return events


# -- startup ---------------------------------------------------------------------------------


def test_the_daemon_prints_one_listening_line(tmp_path: Path, daemons: list[Daemon]) -> None:
    daemon = _start(daemons, _config(tmp_path, [{"text": "hi"}]), tmp_path / "data")
    line = daemon.line
    assert line["status"] == "listening"
    assert line["agent"] == "CliAgent"
    assert line["pid"] == daemon.process.pid
    assert line["url"].startswith("http://127.0.0.1:")
    assert line["console_url"] == line["url"] + "/dev"
    assert line["api_url"] == line["url"] + "/dev/v1"
    with daemon.client() as client:
        assert client.get("/dev/v1/agents").json()["agents"] == [{"name": "CliAgent"}]
    assert daemon.stop() == 0
    assert daemon.process.stdout is not None
    assert daemon.process.stdout.read() == ""  # one line, nothing else on stdout


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: keeps each export's path and body, answers 200 (an empty
    body is an empty protobuf response)."""

    received: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.received.append((self.path, body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    """A local OTLP/HTTP endpoint's URL and the exports it received."""
    received: list[tuple[str, bytes]] = []
    handler = type("Collector", (_Collector,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_with_an_otlp_endpoint_spans_are_exported_and_flushed_at_stop(
    tmp_path: Path, daemons: list[Daemon], collector: tuple[str, list[tuple[str, bytes]]]
) -> None:
    """``OTEL_EXPORTER_OTLP_ENDPOINT`` set: the daemon starts as usual, a run's spans
    join the request's ``traceparent``, and a SIGTERM still exits 0 after the batch
    still held is flushed to the endpoint (nothing exported before: the batch waits)."""
    endpoint, received = collector
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    daemon = _start(
        daemons,
        _config(tmp_path, [{"text": "SECRET-ANSWER"}]),
        tmp_path / "data",
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_EXPORTER_OTLP_COMPRESSION="none",
        OTEL_SERVICE_NAME="serve-test",
    )
    assert daemon.line["status"] == "listening"
    body = {
        "agent_name": "CliAgent",
        "app_name": "serve_app",
        "user_id": "user-1",
        "session_id": "otlp-1",
        "message": "SECRET-PROMPT",
    }
    with daemon.client() as client:
        started = client.post(
            "/dev/v1/runs",
            json=body,
            headers={"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"},
        )
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        deadline = time.monotonic() + 30
        while client.get(f"/dev/v1/runs/{run_id}").json()["state"] != "completed":
            assert time.monotonic() < deadline, "the run never completed"
            time.sleep(0.02)
        observed = client.get("/dev/v1/observability").json()
    assert observed["content_captured"] is False
    assert daemon.stop() == 0

    traces = b"".join(body for path, body in received if path == "/v1/traces")
    assert bytes.fromhex(trace_id) in traces  # the run's spans are the caller's trace's
    assert b"invoke_agent CliAgent" in traces and b"serve-test" in traces
    assert b"SECRET" not in traces  # metadata only
    assert any(path == "/v1/metrics" for path, _ in received)  # the last collection


def test_otlp_export_without_the_sdk_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sdk, "sdk_installed", False)  # the otlp extra not installed
    out, err = io.StringIO(), io.StringIO()
    environ = {"ADK_DEV_TOKEN": TOKEN, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    code = main(
        _config(tmp_path, [{"text": "hi"}]),
        "127.0.0.1",
        0,
        tmp_path / "data",
        environ,
        out,
        err=err,
    )
    assert code == EXIT_REFUSED
    assert out.getvalue() == ""
    assert json.loads(err.getvalue())["reason"] == "otlp_unavailable"


def test_a_refusal_in_a_subprocess_is_one_json_line_and_exit_2(tmp_path: Path) -> None:
    """Follows adk_cli_test: serve needs the developer token."""
    process = _spawn(
        ["--config", str(_config(tmp_path, [])), "--port", "0", "--data", str(tmp_path / "d")],
        _environ(),
    )
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_REFUSED
    assert stdout == ""
    line = json.loads(stderr.strip().splitlines()[-1])
    assert line == {
        "status": "error",
        "reason": "dev_token_required",
        "message": line["message"],
    }
    assert not (tmp_path / "d").exists()  # nothing started: no store was opened


@pytest.mark.parametrize(
    ("environ", "host", "reason"),
    [
        ({}, "127.0.0.1", "dev_token_required"),
        ({"ADK_DEV_TOKEN": "short"}, "127.0.0.1", "dev_token_too_short"),
        ({"ADK_DEV_TOKEN": TOKEN}, "0.0.0.0", "developer_server_must_bind_loopback"),
        ({"ADK_DEV_TOKEN": TOKEN}, "::", "developer_server_must_bind_loopback"),
        ({"ADK_DEV_TOKEN": TOKEN}, "8.8.8.8", "developer_server_must_bind_loopback"),
        ({"ADK_DEV_TOKEN": TOKEN}, "localhost", "developer_server_must_bind_loopback"),
        (
            {"ADK_DEV_TOKEN": TOKEN, "ADK_DEV_SSE_MAX_EVENTS": "0"},
            "127.0.0.1",
            "invalid_dev_setting",
        ),
    ],
)
def test_refusals_come_before_anything_starts(
    tmp_path: Path, environ: dict[str, str], host: str, reason: str
) -> None:
    """Follows adk_cli_test: serve refuses a non-loopback bind and a missing token."""
    out, err = io.StringIO(), io.StringIO()
    config = _config(tmp_path, [{"text": "hi"}])
    code = main(config, host, 0, tmp_path / "data", environ, out, err=err)
    assert code == EXIT_REFUSED
    assert out.getvalue() == ""
    assert json.loads(err.getvalue())["reason"] == reason
    assert not (tmp_path / "data").exists()


def test_a_bad_agent_file_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "agent.json"
    config.write_text('{"name": "CliAgent", "provider": "scripted", "api_key": "AIza-secret"}')
    err = io.StringIO()
    code = main(config, "127.0.0.1", 0, tmp_path / "data", {"ADK_DEV_TOKEN": TOKEN}, err=err)
    assert code == EXIT_REFUSED
    assert "AIza-secret" not in err.getvalue()
    assert json.loads(err.getvalue())["status"] == "error"


def test_a_port_in_use_is_refused(tmp_path: Path, daemons: list[Daemon]) -> None:
    first = _start(daemons, _config(tmp_path, [{"text": "hi"}]), tmp_path / "one")
    port = first.url.rsplit(":", 1)[1]
    process = _spawn(
        ["--config", str(tmp_path / "agent.json"), "--port", port, "--data", str(tmp_path / "2")],
        _environ(ADK_DEV_TOKEN=TOKEN),
    )
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_REFUSED
    assert stdout == ""
    line = json.loads(stderr.strip().splitlines()[-1])
    assert line["reason"] == "http_listener_bind_failed"
    assert first.stop() == 0


@pytest.mark.parametrize("where", ["file", "file/below"])
def test_a_data_path_that_is_not_a_directory_is_refused(tmp_path: Path, where: str) -> None:
    """``--data`` naming a file, or a path below one: the refusal line and exit 2,
    before anything starts (no traceback, no tree left running)."""
    (tmp_path / "file").write_text("not a directory")
    adk.stop()  # the autouse tree: main must not need one to refuse
    out, err = io.StringIO(), io.StringIO()
    config = _config(tmp_path, [{"text": "hi"}])
    code = main(config, "127.0.0.1", 0, tmp_path / where, ENV, out, err=err, console_logs=False)
    assert code == EXIT_REFUSED
    assert out.getvalue() == ""
    line = json.loads(err.getvalue())
    assert line["reason"] == "data_dir_unusable"
    assert line["details"] == ["enotdir"]
    assert str(tmp_path) not in err.getvalue()  # no argument value in the message
    assert not adk.app.running()


def test_a_data_path_that_is_a_file_is_refused_in_a_subprocess(tmp_path: Path) -> None:
    """The review's case: ``--data /etc/hostname`` was a traceback and exit 1."""
    data = tmp_path / "hostname"
    data.write_text("not a directory")
    process = _spawn(
        ["--config", str(_config(tmp_path, [{"text": "hi"}])), "--port", "0", "--data", str(data)],
        _environ(ADK_DEV_TOKEN=TOKEN),
    )
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_REFUSED
    assert stdout == ""
    assert "Traceback" not in stderr
    assert json.loads(stderr.strip().splitlines()[-1])["reason"] == "data_dir_unusable"


def test_a_composite_reason_is_split_into_reason_and_details() -> None:
    line = error_line(AdkError(("invalid_dev_setting", "ADK_DEV_SSE_MAX_EVENTS"), "bad"))
    assert line == {
        "status": "error",
        "reason": "invalid_dev_setting",
        "details": ["ADK_DEV_SSE_MAX_EVENTS"],
        "message": "bad",
    }


# -- drain -----------------------------------------------------------------------------------


def test_sigterm_drains_and_loses_no_stored_event(tmp_path: Path, daemons: list[Daemon]) -> None:
    """A run in its model call when SIGTERM lands: new requests get 503, the run ends
    within the grace, the process exits 0, and a daemon restarted on the same data
    serves every event the run stored."""
    config = _config(tmp_path, [{"text": "Drained answer.", "delay": 3.0}])
    data = tmp_path / "data"
    daemon = _start(daemons, config, data)
    run_id = _start_run(daemon, "drain-1", "Please answer slowly.")
    _until_running(daemon, run_id)
    daemon.process.send_signal(signal.SIGTERM)
    refused = _until_refused(daemon)
    if refused is not None:
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "developer_api_unavailable"
    assert daemon.process.wait(60) == 0

    again = _start(daemons, config, data)
    events = _session_events(again, "drain-1")
    assert [event["author"] for event in events] == ["user", "CliAgent"]
    assert events[0]["text"] == "Please answer slowly."
    assert events[1]["text"] == "Drained answer."
    assert again.stop(signal.SIGINT) == 0

    stored = LmdbSessionService(data / "sessions")
    try:
        session = stored.get_session("serve_app", "user-1", "drain-1")
    finally:
        stored.close()
    assert [event.id for event in session.events] == [event["id"] for event in events]


def test_a_run_past_the_grace_is_cancelled_and_its_terminal_stored(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    """With a 100 ms grace a 60 s model call is cancelled (``daemon_stopping``): the
    process still exits 0, long before the call would have ended, and the session keeps
    the user's message and the cancellation."""
    config = _config(tmp_path, [{"text": "Never sent.", "delay": 60.0}])
    data = tmp_path / "data"
    daemon = _start(daemons, config, data, ADK_DEV_DRAIN_GRACE_MS="100")
    run_id = _start_run(daemon, "drain-2", "Take forever.")
    _until_running(daemon, run_id)
    assert daemon.stop(signal.SIGINT, timeout=40) == 0

    stored = LmdbSessionService(data / "sessions")
    try:
        events = stored.get_session("serve_app", "user-1", "drain-2").events
    finally:
        stored.close()
    assert events[0].author == "user"
    assert "Never sent." not in json.dumps([event.text() for event in events])
    assert any("daemon_stopping" in json.dumps(msgspec.to_builtins(event)) for event in events[1:])


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"never: {what}")
        time.sleep(0.01)


def test_a_run_started_by_a_request_admitted_before_the_drain_is_cancelled() -> None:
    """A request admitted before the drain starts its run after the drain began (its
    body arrives slowly): the drain waits for the request, then cancels the run it
    started with ``daemon_stopping``, which the session stores. Nothing is left
    running for the tree's stop to kill."""
    adk.spawn_agent("SlowAgent", {"provider": "scripted", "script": [{"text": "x", "delay": 60}]})
    sessions = adk.sessions.InMemorySessionService()
    server, listener = start_dev_server(sessions=sessions, drain_grace=0.1)
    body = json.dumps(
        {
            "agent_name": "SlowAgent",
            "app_name": "drain_app",
            "user_id": "user-1",
            "session_id": "late",
            "message": "Start me late.",
        }
    ).encode()
    go = threading.Event()

    def upload() -> Iterator[bytes]:
        yield body[:10]
        go.wait(30)
        yield body[10:]

    answers: list[httpx.Response] = []
    reports: list[DrainReport] = []
    starter = threading.Thread(
        target=lambda: answers.append(
            server.client.post(
                "/dev/v1/runs", content=upload(), headers={"content-type": "application/json"}
            )
        )
    )
    drainer = threading.Thread(target=lambda: reports.append(drain(server.state)))
    try:
        starter.start()
        _until(lambda: server.state.requests_in_flight == 1, "the start request admitted")
        drainer.start()
        drainer.join(1.0)  # a drain that gave up on the request would be done by now
        go.set()
        starter.join(30)
        drainer.join(60)
    finally:
        go.set()
        server.client.close()
        stop_listener(listener)
    assert [answer.status_code for answer in answers] == [202]
    run_id = answers[0].json()["run_id"]
    assert reports == [DrainReport(ended=0, cancelled=1)]
    assert adk.runs.wait(run_id, 30) == adk.Cancelled("daemon_stopping")
    events = sessions.get_session("drain_app", "user-1", "late").events
    assert events[0].author == "user"
    assert any("daemon_stopping" in json.dumps(msgspec.to_builtins(event)) for event in events[1:])


def test_no_request_is_admitted_once_the_drain_started(probe_server: DevServer) -> None:
    """Admission and the drain flag are one step: a refused request is never counted."""
    state = probe_server.state
    assert state.admit_request()
    state.start_draining()
    assert not state.admit_request()
    assert state.requests_in_flight == 1
    state.request_ended()
    assert state.wait_for_requests(0)


def test_a_tree_that_stops_on_its_own_ends_the_daemon_with_1(tmp_path: Path) -> None:
    """In-process, on a worker thread (no signal handlers): when the tree is gone, the
    daemon says so on stderr and returns 1."""
    out, err = io.StringIO(), io.StringIO()
    stop = threading.Event()
    codes: list[int] = []
    config = _config(tmp_path, [{"text": "hi"}])

    def serve() -> None:
        environ = {"ADK_DEV_TOKEN": TOKEN}
        codes.append(
            main(
                config,
                "127.0.0.1",
                0,
                tmp_path / "data",
                environ,
                out,
                err=err,
                stop=stop,
                console_logs=False,
            )
        )

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert json.loads(out.getvalue())["status"] == "listening"
        adk.stop()  # the tree goes away under the daemon
        thread.join(START_TIMEOUT)
    finally:
        stop.set()
        thread.join(START_TIMEOUT)
    assert codes == [EXIT_FAILED]
    assert json.loads(err.getvalue())["reason"] == "application_stopped"


def test_a_stop_event_drains_and_returns_0(tmp_path: Path) -> None:
    out = io.StringIO()
    stop = threading.Event()
    codes: list[int] = []
    config = _config(tmp_path, [{"text": "hi"}])

    def serve() -> None:
        environ = {"ADK_DEV_TOKEN": TOKEN}
        codes.append(
            main(
                config,
                "127.0.0.1",
                0,
                tmp_path / "data",
                environ,
                out,
                stop=stop,
                console_logs=False,
            )
        )

    thread = threading.Thread(target=serve)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT
    while not out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.02)
    url = json.loads(out.getvalue())["url"]
    with httpx.Client(base_url=url, headers=AUTH) as client:
        assert client.get("/dev/v1/agents").status_code == 200
    stop.set()
    thread.join(START_TIMEOUT)
    assert codes == [0]
    assert not adk.app.running()
    for created in (tmp_path / "data", tmp_path / "data" / "sessions"):  # owner-only
        assert stat.S_IMODE(created.stat().st_mode) == 0o700
