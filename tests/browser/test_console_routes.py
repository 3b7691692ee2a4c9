"""The console's HTTP routes: the page and its assets, their headers, and the rules
the static files keep (checked on the files themselves, without a browser)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import httpx
import pytest

from adk_actors.daemon.routes_console import ASSETS, CONTENT_SECURITY_POLICY
from tests.browser.conftest import TOKEN, Daemon, agent_config, start_daemon, stop_daemon


def _static(name: str) -> bytes:
    return resources.files("adk_actors.daemon").joinpath("static", name).read_bytes()


def _scripts() -> str:
    return "\n".join(_static(name).decode() for name in ASSETS if name.endswith(".js"))


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    running = start_daemon(tmp_path_factory.mktemp("console"), agent_config([{"text": "hi"}]), {})
    yield running
    stop_daemon(running)


@pytest.fixture
def http(daemon: Daemon) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=daemon.url, timeout=10.0) as client:
        yield client


def _assert_security_headers(response: httpx.Response) -> None:
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("path", ["/dev", "/dev/"])
def test_the_page_needs_no_token_and_carries_a_strict_policy(http: httpx.Client, path: str):
    """Follows adk_dev_http_test: static_ui_case (no token needed or shown, same-origin
    connections only, a CSP without inline script; here, no nonce either)."""
    response = http.get(path)
    assert TOKEN not in response.text
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.content == _static("index.html")
    _assert_security_headers(response)
    policy = dict(
        part.strip().split(" ", 1) for part in CONTENT_SECURITY_POLICY.split(";") if part.strip()
    )
    assert policy["default-src"] == "'self'"
    assert policy["script-src"] == "'self'"
    assert policy["style-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["require-trusted-types-for"] == "'script'"
    assert "unsafe" not in CONTENT_SECURITY_POLICY


@pytest.mark.parametrize(("name", "media_type"), sorted(ASSETS.items()))
def test_assets_are_served_from_the_package(http: httpx.Client, name: str, media_type: str):
    response = http.get(f"/dev/static/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"] == media_type
    assert response.content == _static(name)
    _assert_security_headers(response)


@pytest.mark.parametrize(
    "path",
    [
        "/dev/static/index.html",
        "/dev/static/README.md",
        "/dev/static/..%2Froutes_console.py",
        "/dev/static/%2e%2e%2fapp.py",
        "/dev/static/console.js.map",
        "/dev/static/",
        "/dev/static/sub/console.js",
    ],
)
def test_only_whitelisted_names_are_served(http: httpx.Client, path: str):
    response = http.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert b"import" not in response.content


def test_other_methods_are_refused(http: httpx.Client):
    """Follows adk_dev_http_test: static_ui_case (POST /dev is 405)."""
    response = http.post("/dev", content=b"x")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    head = http.head("/dev/static/console.js")
    assert head.status_code == 200 and head.content == b""


def test_the_api_still_needs_the_token(http: httpx.Client):
    response = http.get("/dev/v1/agents")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


class _Markup(HTMLParser):
    """Collects what the CSP rules out: inline scripts, inline styles, event handlers,
    and any resource from another origin."""

    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self.ids: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if "id" in values:
            self.ids.append(str(values["id"]))
        if tag == "style":
            self.problems.append("inline <style>")
        if tag == "script":
            self._in_script = True
            if not values.get("src", "").startswith("/dev/static/"):
                self.problems.append("script without a same-origin src")
        for name, value in attrs:
            if name == "style" or name.startswith("on"):
                self.problems.append(f"{tag} {name}=")
            foreign = value and value != "data:," and re.match(r"^[a-z]+:", value)
            if name in ("src", "href") and foreign:
                self.problems.append(f"{tag} {name}={value}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.problems.append("inline script")


def test_the_page_has_no_inline_code_and_unique_ids():
    markup = _Markup()
    markup.feed(_static("index.html").decode())
    assert markup.problems == []
    assert len(markup.ids) == len(set(markup.ids))
    for wanted in re.findall(r"(?:\$|field)\('([a-z-]+)'\)", _scripts()):
        assert wanted in markup.ids, wanted


def test_the_scripts_keep_server_text_out_of_html_and_the_token_in_memory():
    code = "\n".join(line for line in _scripts().splitlines() if not line.lstrip().startswith("//"))
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "localStorage",
        "document.cookie",
        "EventSource",
    ):
        assert sink not in code, sink
    # The token lives in api.js alone, which stores nothing and sends it in one header.
    for name in ASSETS:
        if name.endswith(".js") and name != "api.js":
            lines = [line.split("//")[0] for line in _static(name).decode().splitlines()]
            code_only = re.sub(r"'[^'\n]*'|`[^`]*`", "''", "\n".join(lines))
            assert not re.search(r"\btoken\b", code_only), name
    client = _static("api.js").decode()
    assert "Storage" not in client
    assert "authorization: 'Bearer ' + token" in client
    assert client.count("+ token") == 1


def test_the_static_files_name_no_other_origin():
    folder = Path(str(resources.files("adk_actors.daemon").joinpath("static")))
    names = sorted(path.name for path in folder.iterdir() if path.is_file())
    assert names == sorted([*ASSETS, "index.html"])
    for name in names:
        text = _static(name).decode()
        assert not re.search(r"https?://", text), name
        assert "@import" not in text and "url(" not in text, name
