"""One set of redaction rules: free text, structured values, errors, crashes and logs."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs

import supervision as sv
from providers import redact
from providers.errors import AdkError, is_secret_key
from supervision import MAX_REDACT_CHARS, REDACTED, get_logger, redact_text, redact_value
from supervision.crash_report import format_reason

S = "s3cr3t-VALUE-42"
"""The secret in every row below: it must be gone after redaction."""

# (text, what redact_text must return)
SECRET_FORMS = [
    (f"Authorization: Bearer {S}", "Authorization: [redacted]"),
    (f"authorization: Basic {S}", "authorization: [redacted]"),
    (f"Proxy-Authorization: Basic {S}\r\nHost: x", "Proxy-Authorization: [redacted]\r\nHost: x"),
    (f"sent Bearer {S} upstream", "sent Bearer [redacted] upstream"),
    ("login Basic dXNlcjpwYXNzd29yZA== failed", "login Basic [redacted] failed"),
    (f"x-goog-api-key: {S}", "x-goog-api-key: [redacted]"),
    (f"X-Goog-Api-Key={S}", "X-Goog-Api-Key=[redacted]"),
    (f"GET https://h/v1/m?key={S}&alt=sse", "GET https://h/v1/m?key=[redacted]&alt=sse"),
    (f"GET https://h/v1/m?alt=sse&key={S}", "GET https://h/v1/m?alt=sse&key=[redacted]"),
    (f"key={S}", "key=[redacted]"),
    (f"https://bob:{S}@db.example.com/x", "https://bob:[redacted]@db.example.com/x"),
    (f"postgres://u:{S}@127.0.0.1:5432/db", "postgres://u:[redacted]@127.0.0.1:5432/db"),
    (f"api_key={S}", "api_key=[redacted]"),
    (f"apikey={S}", "apikey=[redacted]"),
    (f"token={S} is wrong", "token=[redacted] is wrong"),
    (f"access_token={S}&x=1", "access_token=[redacted]&x=1"),
    (f"secret: {S}", "secret: [redacted]"),
    (f"client_secret = {S}", "client_secret = [redacted]"),
    (f"password={S}", "password=[redacted]"),
    (f'password="{S} with spaces" ok', 'password="[redacted]" ok'),
    (f"private_key={S}", "private_key=[redacted]"),
    (f"aws_access_key_id={S}", "aws_access_key_id=[redacted]"),
    (f"AWS_SECRET_ACCESS_KEY={S}", "AWS_SECRET_ACCESS_KEY=[redacted]"),
    (f"api_key: {S}", "api_key: [redacted]"),
    (f'{{"api_key": "{S}", "n": 1}}', '{"api_key": "[redacted]", "n": 1}'),
    (f'{{"accessToken":"{S}"}}', '{"accessToken":"[redacted]"}'),
    (f"{{'api_key': '{S}', 'ok': 1}}", "{'api_key': '[redacted]', 'ok': 1}"),
    (f"{{'password': '{S}'}}", "{'password': '[redacted]'}"),
    (f'{{\\"token\\": \\"{S}\\"}}', '{\\"token\\": \\"[redacted]\\"}'),  # JSON inside a string
    (f"Cookie: sid={S}; theme=dark", "Cookie: [redacted]"),
    (f"Set-Cookie: sid={S}; Path=/; HttpOnly\nnext", "Set-Cookie: [redacted]\nnext"),
    (f"{{'set-cookie': 'sid={S}'}}", "{'set-cookie': '[redacted]'}"),
    (
        f"-----BEGIN RSA PRIVATE KEY-----\nMII{S}\n-----END RSA PRIVATE KEY-----\nafter",
        "-----BEGIN RSA PRIVATE KEY-----[redacted]-----END RSA PRIVATE KEY-----\nafter",
    ),
    (f"-----BEGIN PRIVATE KEY-----\nMII{S} (cut)", "-----BEGIN PRIVATE KEY-----[redacted]"),
    (f"bad key AIzaSy{S}_0123456789abcdef", "bad key [redacted]"),
    (f"ya29.{S}0123456789", "[redacted]"),
    ("AKIAIOSFODNN7EXAMPLE", "[redacted]"),
    ("ghp_" + "a1" * 18, "[redacted]"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig", "[redacted]"),
    (f"İstanbul api_key={S}", "İstanbul api_key=[redacted]"),  # lower() changes the length
]

CLEAN = [
    "keyboard=1",
    "monkey=2",
    "sort_key=3",
    "A plain sentence about supervisors and their children.",
    "max_tokens=5 promptTokenCount=3 token_count=4",
    "the bearer of bad news",
    "Basic authentication is described below",
    "task-123456789012345678901234",
    "unknown options keys: 'api_key', 'model'",
    "https://example.com/path?alt=sse",
    "",
]


@pytest.mark.parametrize(("text", "expected"), SECRET_FORMS)
def test_each_secret_form_is_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert S not in redact_text(text)


@pytest.mark.parametrize("text", CLEAN)
def test_non_secrets_stay_untouched(text: str) -> None:
    assert redact_text(text) is text


def test_redaction_is_idempotent() -> None:
    for text, expected in SECRET_FORMS:
        assert redact_text(expected) == expected, text


def test_redaction_is_bounded_and_cuts_long_text() -> None:
    long = "x" * (MAX_REDACT_CHARS + 10) + f" token={S}"
    result = redact_text(long)
    assert result.endswith("...[truncated]") and len(result) < MAX_REDACT_CHARS + 20
    assert S not in result
    assert redact_text(f"token={S}" + "y" * 100, limit=20) == "token=[redacted]...[truncated]"


def test_clean_text_is_returned_as_is_and_adversarial_text_completes() -> None:
    """Speed lives in benchmarks; here: clean text is not copied (the prefilter's
    promise), and inputs built to make regexes backtrack finish with the right answer."""
    text = "the server exited: normal"
    assert redact_text(text) is text
    for hostile in ("token" * 20_000, '"token":"' * 8_000, "Authorization: " + "\\" * 60_000):
        result = redact_text(hostile)
        assert result.endswith("...[truncated]") or len(result) <= len(hostile)


def test_structured_values_use_the_same_rules() -> None:
    value = {
        "api_key": S,
        "nested": [{"Authorization": f"Bearer {S}", "ok": 1}, ("note", f"token={S}")],
        "promptTokenCount": 3,
        "url": f"https://h?key={S}",
    }
    assert redact_value(value) == {
        "api_key": REDACTED,
        "nested": [{"Authorization": REDACTED, "ok": 1}, ("note", "token=[redacted]")],
        "promptTokenCount": 3,
        "url": "https://h?key=[redacted]",
    }
    assert redact is redact_value  # providers.redact is the kernel's function
    assert is_secret_key is sv.is_secret_key
    assert not is_secret_key("input_token_limit") and not is_secret_key("maxOutputTokens")
    assert redact_value(sv.Crash("E", f"token={S}")) == sv.Crash("E", "token=[redacted]")


def test_adk_error_is_redacted_at_construction() -> None:
    error = AdkError(
        ("http_error", 400, f"api_key={S}"), f"upstream said Authorization: Bearer {S}"
    )
    assert error.reason == ("http_error", 400, "api_key=[redacted]")
    assert error.detail == "upstream said Authorization: [redacted]"
    for shown in (str(error), repr(error), repr(error.reason), *map(str, error.args)):
        assert S not in shown


def test_crash_reasons_and_reports_are_redacted() -> None:
    crash = sv.Crash.from_exception(RuntimeError(f"failed: Bearer {S}"))
    assert crash == sv.Crash("RuntimeError", "failed: Bearer [redacted]")
    assert S not in format_reason(sv.Crash("Handmade", f"password={S}"))
    assert S not in format_reason(("error", {"api_key": S}))
    assert len(sv.Crash.from_exception(ValueError("x" * 10_000)).message) == 512


@pytest.fixture
def root_records() -> Iterator[list[logging.LogRecord]]:
    """Every record reaching the root logger at DEBUG, formatted."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


class _Leaky:
    def __repr__(self) -> str:
        return f"Leaky(token={S})"


def _log_secrets(name: str) -> None:
    try:
        raise RuntimeError(f"Bearer {S}")
    except RuntimeError:
        get_logger(name).error(
            f"event with password={S}",
            api_key=S,
            note=f"Authorization: Bearer {S}",
            nested={"headers": {"x-goog-api-key": S}, "items": [f"key={S}"]},
            thing=_Leaky(),
            exc_info=True,
        )


@pytest.fixture
def structlog_unconfigured() -> Iterator[None]:
    """structlog as an application that never configured it (restored afterwards)."""
    was_configured, old = structlog.is_configured(), structlog.get_config()
    structlog.reset_defaults()
    try:
        yield
    finally:
        structlog.reset_defaults()
        if was_configured:
            structlog.configure(**old)


def test_plain_log_lines_are_redacted(
    root_records: list[logging.LogRecord], structlog_unconfigured: None
) -> None:
    assert not structlog.is_configured()
    _log_secrets("tests.redaction.plain")
    lines = [record.getMessage() for record in root_records]
    assert lines and all(S not in line for line in lines)
    assert "exc_class='RuntimeError'" in lines[0] and "Traceback" not in lines[0]


def test_configured_and_captured_logs_are_redacted(
    root_records: list[logging.LogRecord], structlog_unconfigured: None
) -> None:
    structlog.configure(
        processors=[structlog.processors.format_exc_info, structlog.processors.JSONRenderer()],
        logger_factory=structlog.stdlib.LoggerFactory(),
    )
    try:
        _log_secrets("tests.redaction.configured")
        with capture_logs() as captured:
            _log_secrets("tests.redaction.captured")
    finally:
        structlog.reset_defaults()
    lines = [record.getMessage() for record in root_records]
    assert lines and all(S not in line for line in lines)
    assert captured and all(S not in repr(entry) for entry in captured)
    assert captured[0]["api_key"] == REDACTED


def test_other_libraries_loggers_can_be_redacted(root_records: list[logging.LogRecord]) -> None:
    sv.redact_loggers("tests.redaction.library")
    sv.redact_loggers("tests.redaction.library")  # once is enough: no second filter
    sv.redact_loggers("tests.redaction.trace", first_word_only=True)
    library = logging.getLogger("tests.redaction.library")
    assert len(library.filters) == 1
    library.warning("GET %s failed", f"https://h/v1?key={S}")
    try:
        raise ValueError(S)
    except ValueError:
        library.exception("failed")
    logging.getLogger("tests.redaction.trace").warning(
        "receive_response_headers.complete return_value=[(b'x-echo', b'%s')]", S
    )
    shown = [logging.Formatter().format(record) for record in root_records]
    assert shown == [
        "GET https://h/v1?key=[redacted] failed",
        "failed exc_class=ValueError",
        "receive_response_headers.complete",
    ]
