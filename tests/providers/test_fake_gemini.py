"""The loopback fake Gemini server itself: sockets, delays, bounds and the standalone CLI."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

import providers.fake_gemini as fake_gemini
from providers.fake_gemini import FakeGemini, FakeResponse, RecordedRequest, candidate

ROOT = Path(__file__).resolve().parents[2]
GENERATE = "/v1beta/models/m:generateContent"


def ask(text: str) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}]}


def answer_text(response: httpx.Response) -> str:
    return str(response.json()["candidates"][0]["content"]["parts"][0]["text"])


def echo(request: RecordedRequest) -> FakeResponse:
    return FakeResponse.json(candidate([{"text": request.body["contents"][0]["parts"][0]["text"]}]))


def test_accepted_sockets_have_tcp_nodelay_and_keep_alive_reuses_the_connection():
    with FakeGemini() as fake, httpx.Client(base_url=fake.base_url) as client:
        fake.handler = echo
        texts = [answer_text(client.post(GENERATE, json=ask(f"call {i}"))) for i in range(20)]
        assert texts == [f"call {i}" for i in range(20)]
        assert fake.connections_accepted == 1  # keep-alive: one connection for all 20 calls
        assert fake.nodelay_flags() == [True]  # read back from the server-side socket


def test_one_send_answers_pipelined_requests_in_order():
    with FakeGemini() as fake:
        fake.handler = echo
        body = json.dumps(ask("x")).encode()

        def request(text: str) -> bytes:
            payload = body.replace(b'"x"', json.dumps(text).encode())
            head = f"POST {GENERATE} HTTP/1.1\r\nHost: f\r\nContent-Length: {len(payload)}\r\n"
            return head.encode() + b"\r\n" + payload

        port = int(fake.base_url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request("first") + request("second"))
            received = b""
            while received.count(b"fake-gemini") < 2:
                chunk = sock.recv(65536)
                assert chunk, "the fake closed the connection early"
                received += chunk
        assert received.startswith(b"HTTP/1.1 200 OK\r\n")
        assert received.index(b"first") < received.index(b"second")
        assert [r.body["contents"][0]["parts"][0]["text"] for r in fake.requests] == [
            "first",
            "second",
        ]


@pytest.mark.parametrize("where", ["server", "response"])
def test_delays_overlap_instead_of_blocking(where):
    fake = FakeGemini(delay=0.5 if where == "server" else 0.0)
    if where == "response":
        fake.handler = lambda r: FakeResponse(body=candidate([{"text": "ok"}]), delay=0.5)
    else:
        fake.handler = lambda r: FakeResponse.json(candidate([{"text": "ok"}]))

    async def calls() -> list[int]:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(base_url=fake.base_url, limits=limits, timeout=30) as client:
            responses = await asyncio.gather(
                *(client.post(GENERATE, json=ask(str(i))) for i in range(200))
            )
        return [response.status_code for response in responses]

    with fake:
        assert asyncio.run(calls()) == [200] * 200
        # Without a delay each answer is written before the next request is read (at most
        # 1 in flight); with it, the server held most of the 200 calls at once.
        assert fake.max_in_flight > 100
        assert fake.in_flight == 0


def test_the_handler_runs_on_the_loop_thread_and_its_failure_is_a_500():
    threads: list[str] = []

    def handler(request: RecordedRequest) -> FakeResponse:
        threads.append(threading.current_thread().name)
        raise RuntimeError("boom")

    with FakeGemini() as fake, httpx.Client(base_url=fake.base_url) as client:
        fake.handler = handler
        response = client.post(GENERATE, json=ask("hi"))
        assert response.status_code == 500 and "boom" in response.json()["error"]["message"]
        assert threads == ["fake-gemini"]


def test_request_recording_is_bounded():
    with pytest.raises(ValueError):
        FakeGemini(max_recorded=-1)
    for bound, kept in [(3, ["call 2", "call 3", "call 4"]), (0, [])]:
        with FakeGemini(max_recorded=bound) as fake, httpx.Client(base_url=fake.base_url) as c:
            fake.handler = echo
            for i in range(5):
                assert c.post(GENERATE, json=ask(f"call {i}")).status_code == 200
            assert [r.body["contents"][0]["parts"][0]["text"] for r in fake.requests] == kept
    assert fake_gemini.DEFAULT_MAX_RECORDED == FakeGemini().max_recorded == 10_000


def test_size_cap_unknown_paths_and_malformed_requests(monkeypatch):
    monkeypatch.setattr(fake_gemini, "MAX_REQUEST_BYTES", 1000)
    with FakeGemini() as fake, httpx.Client(base_url=fake.base_url) as client:
        too_big = client.post(GENERATE, content=b"x" * 2000)
        assert too_big.status_code == 413 and too_big.headers["connection"] == "close"
        assert client.post("/v1beta/nowhere", json={}).status_code == 404
        assert client.put(GENERATE, json={}).status_code == 501
        assert [r.path for r in fake.requests] == ["/v1beta/nowhere", GENERATE]
        port = int(fake.base_url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"NOT HTTP\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 400 ")


def test_stop_closes_open_connections_and_drops_pending_answers():
    fake = FakeGemini(delay=30).start()
    fake.handler = echo
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            httpx.post(fake.base_url + GENERATE, json=ask("hi"), timeout=60)
        except httpx.HTTPError as error:
            outcome.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    while fake.in_flight == 0:
        threading.Event().wait(0.01)
    fake.stop()
    caller.join(timeout=10)
    assert not caller.is_alive() and len(outcome) == 1
    fake.stop()  # idempotent


# -- the standalone server ---------------------------------------------------------------


@contextmanager
def serve(tmp_path: Path, script: Any, *args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Run ``python -m providers.fake_gemini`` on a free port; yield its URL and process."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    command = [sys.executable, "-m", "providers.fake_gemini", "--port", "0", "--script", str(path)]
    process = subprocess.Popen(
        [*command, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = json.loads(process.stdout.readline())
        assert line["status"] == "listening" and line["url"].startswith("http://127.0.0.1:")
        yield line["url"], process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


def client_for(url: str) -> genai.Client:
    return genai.Client(api_key="k", http_options=types.HttpOptions(base_url=url))


def test_cli_answers_the_script_in_order_then_the_default(tmp_path):
    script = {
        "responses": [
            {"text": "one"},
            {"parts": [{"text": "thinking", "thought": True}, {"text": "two"}]},
            {"error": {"status": 429, "message": "slow down"}},
            {"stream": ["a", "b"], "delay": 0.01},
            {"json": {"candidates": []}},
        ],
        "default": {"text": "fallback"},
    }
    with serve(tmp_path, script) as (url, process):
        client = client_for(url)
        assert client.models.generate_content(model="m", contents="hi").text == "one"
        assert client.models.generate_content(model="m", contents="hi").text == "two"
        with pytest.raises(genai_errors.APIError) as info:
            client.models.generate_content(model="m", contents="hi")
        assert info.value.code == 429 and info.value.message == "slow down"
        chunks = client.models.generate_content_stream(model="m", contents="hi")
        assert [chunk.text for chunk in chunks] == ["a", "b"]
        assert client.models.generate_content(model="m", contents="hi").candidates == []
        for _ in range(2):
            assert client.models.generate_content(model="m", contents="hi").text == "fallback"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0


@pytest.mark.parametrize("stop_with", [signal.SIGTERM, signal.SIGINT])
def test_cli_echo_mode_and_an_exhausted_script(tmp_path, stop_with):
    with serve(tmp_path, {"echo": True}, "--delay", "0.01") as (url, process):
        client = client_for(url)
        answer = client.models.generate_content(model="m", contents="hello there")
        assert answer.text == "hello there"
        chunks = client.models.generate_content_stream(model="m", contents="streamed")
        assert [chunk.text for chunk in chunks] == ["streamed"]
        process.send_signal(stop_with)
        assert process.wait(timeout=30) == 0
    with serve(tmp_path, [{"text": "only"}]) as (url, process):
        client = client_for(url)
        assert client.models.generate_content(model="m", contents="hi").text == "only"
        with pytest.raises(genai_errors.APIError) as info:
            client.models.generate_content(model="m", contents="hi")
        assert info.value.code == 500
        process.send_signal(stop_with)
        assert process.wait(timeout=30) == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "bad script"),
        ('{"responses": [{"txt": "x"}]}', "responses[0]"),
        ('{"responses": [{"error": {"status": 200}}]}', "'error' must be"),
        ('{"default": {"text": "x"}, "echo": true}', "exclude each other"),
        ('{"responses": [{"text": "x", "delay": -1}]}', "'delay'"),
        ('"just a string"', "list of steps or an object"),
    ],
)
def test_cli_refuses_a_malformed_script(tmp_path, content, message):
    path = tmp_path / "script.json"
    path.write_text(content)
    done = subprocess.run(
        [sys.executable, "-m", "providers.fake_gemini", "--port", "0", "--script", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and done.stdout == ""
    assert "bad script" in done.stderr and message in done.stderr


def test_load_script_accepts_the_documented_forms(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"text": "a"}, {"json": {"x": 1}, "status": 418}]))
    script = fake_gemini.load_script(path)
    request = RecordedRequest("POST", GENERATE, {}, {}, ask("q"))
    first, second = script.answer(request), script.answer(request)
    assert first is not None and first.body["candidates"][0]["content"]["parts"] == [{"text": "a"}]
    assert second is not None and (second.status, second.body) == (418, {"x": 1})
    assert script.answer(request) is None  # exhausted: the server answers 500


def test_the_documented_script_example_loads(tmp_path):
    page = (ROOT / "docs" / "providers.md").read_text()
    (example,) = re.findall(r"```json\n(.*?)```", page, flags=re.DOTALL)
    path = tmp_path / "script.json"
    path.write_text(example)
    script = fake_gemini.load_script(path)
    assert len(script.responses) == 5 and script.default == {"text": "ok"}
    streaming = RecordedRequest("POST", "/v1beta/models/m:streamGenerateContent", {}, {}, ask("q"))
    answers = [script.answer(streaming) for _ in range(6)]
    assert all(answer is not None and answer.frames for answer in answers[:3])
    assert answers[3] is not None and answers[3].status == 429


def test_an_error_answer_can_carry_extra_headers():
    with FakeGemini() as fake, httpx.Client(base_url=fake.base_url) as client:
        fake.reply_error(401, "bad key k-123", "UNAUTHENTICATED", headers={"Set-Cookie": "sid=1"})
        answer = client.post(GENERATE, json=ask("x"))
        assert answer.status_code == 401 and answer.headers["set-cookie"] == "sid=1"
        assert answer.json()["error"] == {
            "code": 401,
            "message": "bad key k-123",
            "status": "UNAUTHENTICATED",
        }
