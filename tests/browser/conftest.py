"""Browser tests of the console: Debian's chromium driven by playwright, against a real
``adk serve`` daemon (``python -m adk_actors.daemon``) in a subprocess.

One browser per module; one daemon per test, each with its own scripted agent config
(so every test knows exactly what the model answers). Chromium must be installed at
`CHROMIUM` (`make test` installs it as root): its absence fails the tests, loudly.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    Request,
    sync_playwright,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / ".artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "browser-test-token-0123456789abcdef"
AGENT_NAME = "ConsoleAgent"
APPROVAL_TOOL = "tests.browser.console_tools:publish_release"
EXPORT_TOOL = "tests.browser.console_tools:start_export"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0

# Page hooks installed before any page script runs: CSP violations are recorded.
_RECORD_CSP = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (event) => {
  window.__cspViolations.push(event.violatedDirective + ' ' + event.blockedURI);
});
"""


@dataclass
class Daemon:
    """A running ``adk serve`` subprocess and where it listens."""

    url: str
    process: subprocess.Popen[bytes]
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:]


def agent_config(script: list[Any], *, tools: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    """A scripted agent config file's content, named `AGENT_NAME`."""
    return {
        "name": AGENT_NAME,
        "provider": "scripted",
        "script": script,
        "tools": list(tools),
        **extra,
    }


def _daemon_command(config_path: Path, data_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "adk_actors.daemon",
        "--config",
        str(config_path),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--data",
        str(data_dir),
    ]


def start_daemon(directory: Path, config: dict[str, Any], env: dict[str, str]) -> Daemon:
    """Start the daemon on `config` and wait for its one JSON line with the URL."""
    config_path = directory / "agent.json"
    config_path.write_text(json.dumps(config))
    stderr_path = directory / "daemon.stderr"
    environ = {**os.environ, "ADK_DEV_TOKEN": TOKEN, **env}
    environ.pop("GEMINI_API_KEY", None)
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            _daemon_command(config_path, directory / "data"),
            cwd=REPO_ROOT,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    daemon = Daemon("", process, stderr_path)
    line = _first_line(process, START_TIMEOUT)
    if not line:
        stop_daemon(daemon)
        pytest.fail(f"the daemon printed no line within {START_TIMEOUT} s:\n{daemon.stderr()}")
    status = json.loads(line)
    assert status.get("status") == "listening", status
    daemon.url = str(status["url"])
    return daemon


def _first_line(process: subprocess.Popen[bytes], timeout: float) -> str:
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    data = b""
    try:
        while b"\n" not in data:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                return ""
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                return ""
            data += chunk
    finally:
        selector.close()
    return data.split(b"\n", 1)[0].decode()


def stop_daemon(daemon: Daemon) -> None:
    """SIGTERM (the daemon drains and stops), then SIGKILL if it does not."""
    process = daemon.process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT)
    if process.stdout is not None:
        process.stdout.close()


@dataclass
class Console:
    """One page of the console on one daemon, with what the page did recorded."""

    daemon: Daemon
    context: BrowserContext
    page: Page
    requests: list[Request] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def open(self) -> None:
        self.page.goto(self.daemon.url + "/dev")
        self.page.wait_for_selector("body[data-ready='true']")

    def use_token(self, token: str = TOKEN) -> None:
        self.page.fill("#token", token)
        self.page.click("#token-save")

    def events_requests(self) -> list[Request]:
        return [r for r in self.requests if r.url.split("?")[0].endswith("/events")]

    def trace_items(self) -> list[tuple[str, str, str]]:
        """(run, seq, kind) of every numbered trace row, in order."""
        rows = self.page.locator("[data-testid=trace-row]")
        items = rows.evaluate_all(
            "rows => rows.map(r => [r.dataset.run, r.dataset.seq, r.dataset.kind])"
        )
        return [tuple(item) for item in items if item[1]]

    def assert_clean(self) -> None:
        """No script error, no CSP violation, and the token never left page memory
        except in an Authorization header."""
        violations = self.page.evaluate("window.__cspViolations || []")
        assert violations == [], violations
        assert self.errors == [], self.errors
        stored = self.page.evaluate(
            "() => JSON.stringify([Object.entries(sessionStorage), Object.entries(localStorage),"
            " document.cookie, location.href])"
        )
        assert TOKEN not in stored
        for request in self.requests:
            assert TOKEN not in request.url
            if "/dev/v1/" in request.url:
                assert request.headers.get("authorization") == f"Bearer {TOKEN}", request.url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} is missing: the console's browser tests need Debian's chromium "
            "(`make test` installs it as root; or `apt-get install -y chromium`)"
        )
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def open_console(browser: Browser, tmp_path: Path) -> Iterator[Callable[..., Console]]:
    """`open_console(script, tools=(), env={}, **config)`: a daemon on that scripted
    agent (or on `config_file`), and a page on it."""
    opened: list[Console] = []

    def open_one(
        script: list[Any] | None = None,
        *,
        tools: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        config_file: Path | None = None,
        **config: Any,
    ) -> Console:
        if config_file is not None:
            content = json.loads(config_file.read_text())
        else:
            content = agent_config(script or [], tools=tools, **config)
        daemon = start_daemon(tmp_path, content, env or {})
        context = browser.new_context()
        context.add_init_script(_RECORD_CSP)
        page = context.new_page()
        page.set_default_timeout(15_000)
        console = Console(daemon, context, page)
        opened.append(console)
        page.on("request", lambda request: console.requests.append(request))
        page.on("pageerror", lambda error: console.errors.append(f"pageerror: {error}"))
        page.on("console", lambda message: _record_console(console, message))
        console.open()
        return console

    yield open_one
    for console in opened:
        console.context.close()
        stop_daemon(console.daemon)
    for console in opened:
        # What the page did never made the daemon log an error, and it stopped cleanly.
        log = console.daemon.stderr()
        assert "[error" not in log and "[critical" not in log, log
        assert console.daemon.process.returncode == 0, log


def _record_console(console: Console, message: ConsoleMessage) -> None:
    # A refused request (an expected 4xx) is logged by the browser itself; not a page bug.
    if message.type == "error" and not message.text.startswith("Failed to load resource"):
        console.errors.append(f"console: {message.text}")


def save_screenshot(page: Page, name: str = "console.png") -> Path:
    """One screenshot for people to look at: ``.artifacts/<name>``."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.set_viewport_size({"width": 1440, "height": 900})
    page.screenshot(path=str(path), full_page=True)
    return path
