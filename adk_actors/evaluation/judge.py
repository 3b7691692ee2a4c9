"""The LLM rubric judge: one bounded, deadline-bounded model call scores a whole case.

`parse_judge_config` checks a ``kind: "judge"`` criterion's ``config`` strictly: a
``rubric`` with its ``rubric_id`` and ``rubric_version`` are required; the model
defaults to ``gemini-3.1-flash-lite`` on the ``gemini`` provider. ``provider`` (a
registered name or a provider instance) and ``provider_config`` are trusted-Python
injection points: with ``trusted=False`` (the CLI, criteria files) they are refused
as ``("untrusted_judge_option", key)``.

`judge_case_async` asks the provider for structured JSON (``response_mime_type``
``application/json`` and a ``response_schema`` for exactly ``{score, rationale}``) and
accepts only that object, with a finite score in 0..1 and a bounded rationale.
Every failure is an `AdkError` with a stable reason (see `REASONS`), never a pass:
the caller records it as a failing criterion. The call runs under one absolute
deadline (the caller's, cut to ``request_timeout_ms``); when it passes, the provider
call is cancelled (a sync-only provider's thread is abandoned, fenced). `judge_case`
is the blocking form: the same coroutine in a kernel `Task` that is killed at the
deadline. There is no judge server: concurrent calls are independent.

Provider failures are reduced to their structural reason (never a body); sensitive
`provider_config` values and the Gemini API key are kept out of the prompt and
redacted from the rationale. The rationale is still evaluation content: it is stored
in reports and may summarise case data.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping
from typing import Annotated, Any, Final

import msgspec

from adk_actors.evaluation import judge_prompt
from adk_actors.evaluation.judge_prompt import JudgeInput, JudgeTurn
from providers import protocol
from providers.content import Content, TextPart
from providers.errors import AdkError, decode_options
from supervision import Task, TaskFailed, TaskTimeout, redact_text
from supervision.logs import get_logger

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_PROVIDER",
    "JUDGE_SCHEMA_VERSION",
    "REASONS",
    "JudgeConfig",
    "JudgeInput",
    "JudgeTurn",
    "JudgeVerdict",
    "judge_case",
    "judge_case_async",
    "parse_judge_config",
    "response_schema",
]

JUDGE_SCHEMA_VERSION: Final = 1
DEFAULT_PROVIDER: Final = "gemini"
DEFAULT_MODEL: Final = "gemini-3.1-flash-lite"
DEFAULT_REQUEST_TIMEOUT_MS: Final = 30_000
MAX_REQUEST_TIMEOUT_MS: Final = 120_000
DEFAULT_MAX_PROMPT_BYTES: Final = 262_144
MIN_PROMPT_BYTES: Final = 1024
MAX_PROMPT_BYTES: Final = 1_048_576
DEFAULT_MAX_OUTPUT_BYTES: Final = 65_536
MIN_OUTPUT_BYTES: Final = 64
MAX_OUTPUT_BYTES: Final = 262_144
DEFAULT_MAX_RATIONALE_BYTES: Final = 8192
MAX_RATIONALE_BYTES: Final = 32_768
DEFAULT_MAX_OUTPUT_TOKENS: Final = 512
MAX_OUTPUT_TOKENS: Final = 4096
MAX_RUBRIC_BYTES: Final = 65_536
MAX_ID_BYTES: Final = 256
MAX_PROVIDER_CONFIG_BYTES: Final = 262_144
WAIT_GRACE_SECONDS: Final = 0.5
"""How long `judge_case` waits past the deadline for the worker's own timeout answer
before it kills the worker itself."""

TRUSTED_ONLY_KEYS: Final = ("provider", "provider_config")
RESERVED_PROVIDER_KEYS: Final = frozenset(
    {
        "provider",
        "model",
        "instructions",
        "request_timeout",
        "response_mime_type",
        "response_schema",
        "temperature",
        "max_tokens",
        "max_output_tokens",
    }
)
"""What the judge sets itself; a ``provider_config`` (or its ``generation_config``)
naming one is refused."""

REASONS: Final = (
    "invalid_judge_config",
    "untrusted_judge_option",
    "invalid_judge_input",
    "judge_prompt_too_large",
    "judge_timeout",
    "judge_provider_error",
    "judge_output_too_large",
    "invalid_judge_response",
    "judge_score_out_of_range",
)
"""Every reason a judge call fails with (config errors as ``(reason, key)``)."""

_log = get_logger("adk_actors.evaluation")

_Id = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_BYTES)]


class JudgeConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A checked judge criterion config (sizes in bytes, the timeout in milliseconds)."""

    rubric: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_RUBRIC_BYTES)]
    rubric_id: _Id
    rubric_version: _Id
    model: _Id = DEFAULT_MODEL
    provider: Any = DEFAULT_PROVIDER
    provider_config: dict[str, Any] = {}
    request_timeout_ms: Annotated[int, msgspec.Meta(ge=1, le=MAX_REQUEST_TIMEOUT_MS)] = (
        DEFAULT_REQUEST_TIMEOUT_MS
    )
    max_prompt_bytes: Annotated[int, msgspec.Meta(ge=MIN_PROMPT_BYTES, le=MAX_PROMPT_BYTES)] = (
        DEFAULT_MAX_PROMPT_BYTES
    )
    max_output_bytes: Annotated[int, msgspec.Meta(ge=MIN_OUTPUT_BYTES, le=MAX_OUTPUT_BYTES)] = (
        DEFAULT_MAX_OUTPUT_BYTES
    )
    max_rationale_bytes: Annotated[int, msgspec.Meta(ge=1, le=MAX_RATIONALE_BYTES)] = (
        DEFAULT_MAX_RATIONALE_BYTES
    )
    max_output_tokens: Annotated[int, msgspec.Meta(ge=1, le=MAX_OUTPUT_TOKENS)] = (
        DEFAULT_MAX_OUTPUT_TOKENS
    )

    def __repr__(self) -> str:
        """Names only: ``provider_config`` (trusted code's, possibly with a key) and a
        provider instance never appear in a repr, a log line or a traceback."""
        return (
            f"JudgeConfig(rubric_id={self.rubric_id!r}, rubric_version={self.rubric_version!r}, "
            f"model={self.model!r}, provider={self.provider_name!r}, "
            f"request_timeout_ms={self.request_timeout_ms})"
        )

    @property
    def request_timeout(self) -> float:
        """The per-request deadline in seconds."""
        return self.request_timeout_ms / 1000

    @property
    def provider_name(self) -> str:
        """The provider as recorded in metadata: its name, never the instance."""
        if isinstance(self.provider, str):
            return self.provider
        return str(getattr(self.provider, "name", type(self.provider).__name__))[:MAX_ID_BYTES]


class JudgeVerdict(msgspec.Struct, frozen=True):
    """A valid judge answer: score in 0..1, the redacted rationale, and metadata
    (judge schema, provider, model, rubric id/version, rationale)."""

    score: float
    rationale: str
    metadata: dict[str, Any]


# -- configuration ------------------------------------------------------------------------


def parse_judge_config(config: Mapping[str, object], *, trusted: bool) -> JudgeConfig:
    """Check a judge criterion's ``config``; raises ``(invalid_judge_config, key)``,
    ``(untrusted_judge_option, key)`` when not `trusted`."""
    if not isinstance(config, Mapping):
        raise AdkError("invalid_judge_config", "a judge config is a mapping")
    if not trusted:
        for key in TRUSTED_ONLY_KEYS:
            if key in config:
                raise AdkError(
                    ("untrusted_judge_option", key),
                    f"{key} is accepted only from trusted Python code, not from criteria files",
                )
    checked = decode_options(JudgeConfig, config, "invalid_judge_config", what="judge config")
    for key in ("rubric", "rubric_id", "rubric_version", "model"):
        limit = MAX_RUBRIC_BYTES if key == "rubric" else MAX_ID_BYTES
        if len(getattr(checked, key).encode("utf-8", "surrogatepass")) > limit:
            raise AdkError(("invalid_judge_config", key), f"{key} is at most {limit} bytes")
    if checked.max_rationale_bytes > checked.max_output_bytes:
        raise AdkError(
            ("invalid_judge_config", "max_rationale_bytes"),
            "max_rationale_bytes is at most max_output_bytes",
        )
    _check_provider(checked.provider)
    _check_provider_config(checked.provider_config)
    return checked


def _check_provider(provider: Any) -> None:
    """A registered provider name, or (trusted only) an instance with ``generate``."""
    if isinstance(provider, str):
        if not provider or len(provider) > MAX_ID_BYTES:
            raise AdkError(("invalid_judge_config", "provider"), "provider is a provider name")
        if provider != DEFAULT_PROVIDER:  # the default loads on its first call
            try:
                protocol.resolve_provider({"provider": provider})
            except AdkError:
                raise AdkError(
                    ("invalid_judge_config", "provider"), "provider is not a registered provider"
                ) from None
        return
    if not callable(getattr(provider, "generate", None)):
        raise AdkError(
            ("invalid_judge_config", "provider"), "provider is a provider name or instance"
        )


def _check_provider_config(provider_config: Mapping[str, Any]) -> None:
    """JSON-safe, bounded, and free of the keys the judge sets itself."""
    failure = ("invalid_judge_config", "provider_config")
    nested = provider_config.get("generation_config", {})
    if not isinstance(nested, Mapping):
        raise AdkError(failure, "provider_config.generation_config is a mapping")
    reserved = sorted((set(provider_config) | set(nested)) & RESERVED_PROVIDER_KEYS)
    if reserved:
        raise AdkError(failure, f"provider_config may not set {', '.join(reserved)}")
    try:
        size = len(msgspec.json.encode(provider_config))
    except (TypeError, ValueError, OverflowError):
        raise AdkError(failure, "provider_config is JSON-safe") from None
    if size > MAX_PROVIDER_CONFIG_BYTES:
        raise AdkError(failure, f"provider_config is at most {MAX_PROVIDER_CONFIG_BYTES} bytes")


def response_schema(config: JudgeConfig) -> dict[str, Any]:
    """The JSON Schema the judge forces for `config`: exactly ``{score, rationale}``."""
    return judge_prompt.response_schema(config.max_rationale_bytes)


# -- the call ---------------------------------------------------------------------------


def judge_case(config: JudgeConfig, case: JudgeInput, *, deadline: float) -> JudgeVerdict:
    """Score `case`, blocking; `deadline` is `time.monotonic()`-based. The call runs as
    a kernel task owned by the caller, killed at the deadline (or when the caller dies)."""
    stop = _stop_at(config, deadline)
    task = Task.start(_caught, config, case, stop, deadline=stop + WAIT_GRACE_SECONDS)
    try:
        ok, value = task.wait(max(0.0, stop - time.monotonic()) + WAIT_GRACE_SECONDS)
    except TaskTimeout:
        task.kill()
        raise _timeout() from None
    except TaskFailed:
        raise AdkError("judge_provider_error", "the judge worker failed") from None
    if not ok:
        raise value
    verdict: JudgeVerdict = value
    return verdict


async def judge_case_async(
    config: JudgeConfig, case: JudgeInput, *, deadline: float
) -> JudgeVerdict:
    """Score `case` on the running loop; the provider call is cancelled at the deadline."""
    stop = _stop_at(config, deadline)
    seeds = judge_prompt.secret_seeds(
        config.provider_config, gemini=config.provider == DEFAULT_PROVIDER
    )
    rubric = {
        "rubric_id": config.rubric_id,
        "rubric_version": config.rubric_version,
        "rubric": config.rubric,
    }
    history = judge_prompt.build_history(
        rubric, judge_prompt.checked_case(case), seeds, config.max_prompt_bytes
    )
    left = stop - time.monotonic()
    if left <= 0:
        raise _timeout()
    request = _request_config(config, left)
    started = time.monotonic()
    scope = asyncio.timeout(left)
    try:
        async with scope:
            result = await protocol.agenerate(request, history, ())
    except TimeoutError:
        if scope.expired():
            raise _timeout() from None
        raise _provider_failure("timeout") from None
    except AdkError as error:
        raise _provider_failure(error.reason) from None
    except Exception as error:  # a custom provider's bug: its type only, never its text
        raise _provider_failure(type(error).__name__) from None
    verdict = _verdict(config, result, seeds)
    _log.debug(
        "adk.eval.judged",
        rubric_id=config.rubric_id,
        seconds=round(time.monotonic() - started, 4),
        score=verdict.score,
    )
    return verdict


async def _caught(
    config: JudgeConfig, case: JudgeInput, stop: float
) -> tuple[bool, JudgeVerdict | AdkError]:
    """`judge_case_async` for a task: a typed failure crosses back as a value."""
    try:
        return True, await judge_case_async(config, case, deadline=stop)
    except AdkError as error:
        return False, error


def _stop_at(config: JudgeConfig, deadline: float) -> float:
    """The call's absolute deadline: the caller's, cut to ``request_timeout_ms``."""
    if not isinstance(config, JudgeConfig):
        raise AdkError("invalid_judge_config", "config is a JudgeConfig (parse_judge_config)")
    if isinstance(deadline, bool) or not isinstance(deadline, int | float):
        raise AdkError("invalid_judge_input", "deadline is a time.monotonic() instant")
    if math.isnan(deadline):
        raise AdkError("invalid_judge_input", "deadline is a time.monotonic() instant")
    return min(float(deadline), time.monotonic() + config.request_timeout)


def _timeout() -> AdkError:
    return AdkError("judge_timeout", "the judge did not answer before its deadline")


def _provider_failure(reason: Any) -> AdkError:
    """A provider error as its structure only: the reason's name and an HTTP status."""
    if reason == "timeout":
        return _timeout()
    shape = reason if isinstance(reason, str) else None
    if isinstance(reason, tuple) and reason and isinstance(reason[0], str):
        codes = [str(item) for item in reason[1:] if isinstance(item, int)]
        shape = " ".join([reason[0], *codes])
    tag = reason[0] if isinstance(reason, tuple) and reason else reason
    message = f"the judge provider failed ({(shape or '?')[:64]})"
    if isinstance(tag, str) and tag.isidentifier() and len(tag) <= 64:
        return AdkError(("judge_provider_error", tag), message)
    return AdkError("judge_provider_error", message)


# -- the request ----------------------------------------------------------------------------


def _request_config(config: JudgeConfig, left: float) -> dict[str, Any]:
    """The provider config: the trusted extras, then the judge's own settings (forced
    JSON output, temperature 0, token cap, the time left as ``request_timeout``)."""
    extras = dict(config.provider_config)
    generation = {
        **dict(extras.pop("generation_config", {})),
        "temperature": 0.0,
        "max_output_tokens": config.max_output_tokens,
        "response_mime_type": "application/json",
        "response_schema": response_schema(config),
    }
    timeout_ms = max(1, min(config.request_timeout_ms, math.ceil(left * 1000)))
    return {
        **extras,
        "provider": config.provider,
        "model": config.model,
        "generation_config": generation,
        "request_timeout": timeout_ms,
    }


# -- the answer -----------------------------------------------------------------------------


def _verdict(config: JudgeConfig, result: protocol.ModelOutput, seeds: list[str]) -> JudgeVerdict:
    """Accept exactly ``{"score": 0..1, "rationale": str}``; anything else is refused."""
    output, provider_metadata = protocol.unwrap(result)
    if isinstance(output, str):
        text = output
    elif isinstance(output, Content) and all(isinstance(p, TextPart) for p in output.parts):
        text = output.text_value()
    else:
        raise AdkError("invalid_judge_response", "the judge answered with something not text")
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raise AdkError("invalid_judge_response", "the judge answer is not UTF-8 text") from None
    if len(raw) > config.max_output_bytes:
        raise AdkError(
            "judge_output_too_large", f"the judge answer is over {config.max_output_bytes} bytes"
        )
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        raise AdkError("invalid_judge_response", "the judge answer is not JSON") from None
    if not isinstance(value, dict) or set(value) != {"score", "rationale"}:
        raise AdkError(
            "invalid_judge_response", "the judge answer is not exactly {score, rationale}"
        )
    score, rationale = value["score"], value["rationale"]
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise AdkError("invalid_judge_response", "score is not a number")
    if not isinstance(rationale, str):
        raise AdkError("invalid_judge_response", "rationale is not a string")
    if not math.isfinite(score) or not 0 <= score <= 1:
        raise AdkError("judge_score_out_of_range", "score is outside 0..1")
    if len(rationale.encode("utf-8", "surrogatepass")) > config.max_rationale_bytes:
        raise AdkError(
            "invalid_judge_response", f"rationale is over {config.max_rationale_bytes} bytes"
        )
    cleaned = judge_prompt.clean(rationale, seeds)
    if len(cleaned.encode("utf-8", "surrogatepass")) > config.max_rationale_bytes:
        raise AdkError("judge_output_too_large", "the redacted rationale outgrew its bound")
    metadata: dict[str, Any] = {
        "judge": "llm_rubric",
        "judge_schema_version": JUDGE_SCHEMA_VERSION,
        "rubric_id": config.rubric_id,
        "rubric_version": config.rubric_version,
        "provider": config.provider_name,
        "model": config.model,
        "rationale": cleaned,
    }
    version = _model_version(provider_metadata)
    if version is not None:
        metadata["provider_model_version"] = version
    return JudgeVerdict(score=float(score), rationale=cleaned, metadata=metadata)


def _model_version(provider_metadata: dict[str, Any] | None) -> str | None:
    inner = provider_metadata.get("metadata") if provider_metadata else None
    version = inner.get("model_version") if isinstance(inner, dict) else None
    if isinstance(version, str) and 0 < len(version) <= MAX_ID_BYTES:
        return redact_text(version)
    return None
