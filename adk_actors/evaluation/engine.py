"""The evaluation engine: `run` / `run_async` an adapter over a set with criteria.

Cases run concurrently up to ``concurrency`` and the samples of a case up to
``sample_concurrency`` (asyncio semaphores on the caller's loop; never more than
`MAX_CONCURRENCY` samples in flight in all); the turns of a sample run in order.
Adapter calls are blocking and run on the kernel's blocking pool
(`supervision.aio.run_blocking`), never on the loop. Each sample has a deadline
(``case_timeout``, never past the overall ``timeout``): at it the sample is recorded
as an error and its adapter resources are still closed, also when `open_sample`
returns only afterwards. Scoring, aggregation and the gates follow the reference's
strict accounting (`adk_actors.evaluation.results`).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from adk_actors.evaluation import judge
from adk_actors.evaluation.adapter import EvalAdapter, TurnOutput
from adk_actors.evaluation.criteria import MetricSpec, ScoredTurn, ToolCall, score
from adk_actors.evaluation.evalset import EvalCase, EvalSet
from adk_actors.evaluation.limits import (
    MAX_CONCURRENCY,
    MAX_ERROR_CHARS,
    MAX_MAP_SIZE,
    MAX_PAYLOAD_DEPTH,
    MAX_SAMPLE_STEPS,
    MAX_TOTAL_SAMPLES,
    MAX_TRAJECTORY_STEPS,
    check_data,
    reason_tag,
)
from adk_actors.evaluation.options import EvalOptions, check_options
from adk_actors.evaluation.results import (
    RESULT_SCHEMA_VERSION,
    CaseResult,
    CriterionResult,
    EvalResult,
    SampleResult,
    TrajectoryStep,
    TurnResult,
    case_criteria,
    case_status,
    encode_result,
    metric_summary,
    ratio,
)
from providers.errors import AdkError, prune
from supervision import aio
from supervision.logs import get_logger

CLOSE_GRACE = 10.0
"""Seconds a timed-out sample's `close_sample` may take before the engine moves on."""
REPORT_RESERVE_BYTES = 4096
REPORT_CASE_BYTES = 1024
MIN_SAMPLE_BYTES = 1024
"""A report budget must leave room for at least this much sample data."""
_log = get_logger(__name__)
_T = TypeVar("_T")


def run(
    adapter: EvalAdapter,
    eval_set: EvalSet,
    metrics: Sequence[MetricSpec],
    options: EvalOptions | Mapping[str, Any] | None = None,
) -> EvalResult:
    """Evaluate, blocking (its own event loop); use `run_async` inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_async(adapter, eval_set, metrics, options))
    raise AdkError("eval_run_in_event_loop", "inside an event loop, await run_async")


async def run_async(
    adapter: EvalAdapter,
    eval_set: EvalSet,
    metrics: Sequence[MetricSpec],
    options: EvalOptions | Mapping[str, Any] | None = None,
) -> EvalResult:
    """Evaluate `adapter` on every case of `eval_set`, `sample_count` times each.

    Refusals before anything runs: ``invalid_eval_set``, ``invalid_eval_adapter``,
    ``invalid_eval_metrics``, ``("invalid_eval_options", key)``,
    ``empty_eval_criteria``, ``("eval_sample_limit_exceeded", total, ceiling)``
    (``("invalid_eval_options", "max_report_bytes")`` also for a budget too small
    for the set's cases).
    During the run: ``eval_report_budget_exceeded`` / ``eval_report_too_large``.
    """
    if not isinstance(eval_set, EvalSet):
        raise AdkError("invalid_eval_set", "run a loaded EvalSet (load_eval_set)")
    if not all(callable(getattr(adapter, name, None)) for name in _ADAPTER_CALLS):
        raise AdkError("invalid_eval_adapter", "an adapter has open_sample, run_turn, close_sample")
    if not isinstance(metrics, Sequence) or not all(_runnable(m) for m in metrics):
        raise AdkError("invalid_eval_metrics", "metrics are MetricSpec values (load_metrics)")
    if len({m.id for m in metrics}) != len(metrics):
        raise AdkError("invalid_eval_metrics", "metric ids are unique")
    checked = check_options(options)
    if not metrics and checked.empty_criteria == "error":
        raise AdkError("empty_eval_criteria", 'no criteria: give some, or empty_criteria="pass"')
    reserve = report_reserve(len(eval_set.cases))
    if checked.max_report_bytes < reserve + MIN_SAMPLE_BYTES:
        raise AdkError(
            ("invalid_eval_options", "max_report_bytes"),
            f"max_report_bytes is at least {reserve + MIN_SAMPLE_BYTES} for this set",
        )
    total = len(eval_set.cases) * checked.sample_count
    if total > MAX_TOTAL_SAMPLES:
        raise AdkError(
            ("eval_sample_limit_exceeded", total, MAX_TOTAL_SAMPLES),
            f"at most {MAX_TOTAL_SAMPLES} samples in one evaluation",
        )
    return await _Evaluation(adapter, eval_set, list(metrics), checked).run()


_ADAPTER_CALLS = ("open_sample", "run_turn", "close_sample")


def _runnable(metric: object) -> bool:
    """A `MetricSpec` the engine can score: a judge with its config, or a criterion."""
    if not isinstance(metric, MetricSpec):
        return False
    if metric.kind == "judge":
        return isinstance(metric.judge, judge.JudgeConfig)
    return metric.criterion is not None


def report_reserve(cases: int) -> int:
    """Report bytes held back for the summary and `cases` case aggregates."""
    return REPORT_RESERVE_BYTES + REPORT_CASE_BYTES * cases


def sample_id(eval_set: EvalSet, case: EvalCase, sample_index: int) -> str:
    """A sample's stable id: the same set revision, case and index give the same id."""
    identity = "\0".join((eval_set.id, eval_set.version, case.id, str(sample_index)))
    return "sample-" + hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:24]


class _Slot:
    """A sample's adapter handle, closed exactly once whoever gets there first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.handle: Any = None
        self.opened = False
        self.abandoned = False

    def take(self) -> tuple[bool, Any]:
        """Mark the sample abandoned; (True, handle) if it is open and not yet taken."""
        with self.lock:
            self.abandoned = True
            opened, self.opened = self.opened, False
            return opened, self.handle


class _Evaluation:
    """One run: its options, budgets and the per-sample work."""

    def __init__(
        self,
        adapter: EvalAdapter,
        eval_set: EvalSet,
        metrics: list[MetricSpec],
        options: EvalOptions,
    ) -> None:
        self.adapter = adapter
        self.eval_set = eval_set
        self.metrics = metrics
        self.options = options
        self.started = time.monotonic()
        self.deadline = self.started + options.timeout
        self.budget = options.max_report_bytes - report_reserve(len(eval_set.cases))
        self.over_budget = False
        self.running = asyncio.Semaphore(MAX_CONCURRENCY)
        """Samples in flight across cases: at most the blocking pool's threads, so a
        sample's deadline starts when it can run, not while it queues for a thread."""

    async def run(self) -> EvalResult:
        cases = asyncio.Semaphore(self.options.concurrency)
        results = await _settled(
            [self._case(index, case, cases) for index, case in enumerate(self.eval_set.cases)]
        )
        if self.over_budget:
            raise AdkError("eval_report_budget_exceeded", "the results outgrew max_report_bytes")
        result = self._summary(list(results))
        # measured as the JSON report renders it (indented), so every result the engine
        # returns also renders, and reads back, within max_report_bytes
        size = len(msgspec.json.format(msgspec.json.encode(encode_result(result)), indent=2))
        if size > self.options.max_report_bytes:
            raise AdkError("eval_report_too_large", f"the result is {size} bytes")
        return result

    async def _case(self, index: int, case: EvalCase, cases: asyncio.Semaphore) -> CaseResult:
        async with cases:
            samples = asyncio.Semaphore(self.options.sample_concurrency)
            results = await _settled(
                [self._sample(case, i, samples) for i in range(self.options.sample_count)]
            )
        return self._aggregate(index, case, list(results))

    async def _sample(self, case: EvalCase, index: int, samples: asyncio.Semaphore) -> SampleResult:
        async with samples, self.running:
            started = time.monotonic()
            if self.over_budget or started >= self.deadline:
                return self._failed(case, index, "timeout", started)
            deadline = min(self.deadline, started + self.options.case_timeout)
            slot = _Slot()
            try:
                result = await asyncio.wait_for(
                    self._body(case, index, slot, deadline, started), deadline - started
                )
            except TimeoutError:
                result = self._failed(case, index, "timeout", started)
            finally:
                await self._close(slot)
            self._charge(result)
            return result

    async def _body(
        self, case: EvalCase, index: int, slot: _Slot, deadline: float, started: float
    ) -> SampleResult:
        try:
            handle = await aio.run_blocking(self._open, case, index, slot)
        except Exception as failure:
            return self._failed(case, index, _reason(failure, "adapter_open_failed"), started)
        turns: list[TurnResult] = []
        outputs: list[TurnOutput] = []
        error: str | None = None
        for turn_index, turn in enumerate(case.turns):
            turn_started = time.monotonic()
            try:
                answer = await aio.run_blocking(self.adapter.run_turn, handle, turn, deadline)
                output = _check_output(answer)
                _check_growth(outputs, output)
            except Exception as failure:
                error = _reason(failure, "adapter_turn_failed")
                turns.append(_turn(turn_index, turn, None, "error", error, turn_started))
                break
            outputs.append(_pruned(output))
            turns.append(_turn(turn_index, turn, output.text, "ok", None, turn_started))
        closed = await self._close(slot)
        if error is None and closed is not None:
            error = closed
        steps = [step for output in outputs for step in output.trajectory]
        trajectory = tuple(self._public(step) for step in steps)
        metadata: dict[str, Any] = {}
        for output in outputs:
            metadata.update(output.metadata)
        events = (
            tuple(event for output in outputs for event in output.events)
            if self.options.capture_events
            else ()
        )
        criteria: tuple[CriterionResult, ...] = ()
        if error is None:
            criteria = await self._criteria(case, turns, steps, deadline)
        passed = error is None and all(criterion.passed for criterion in criteria)
        return SampleResult(
            sample_id=sample_id(self.eval_set, case, index),
            sample_index=index,
            status="error" if error is not None else "passed" if passed else "failed",
            passed=passed,
            error=error,
            duration_ms=_elapsed_ms(started),
            adapter_metadata=metadata,
            trajectory=trajectory,
            criteria=criteria,
            turns=tuple(turns),
            events=events,
        )

    def _open(self, case: EvalCase, index: int, slot: _Slot) -> Any:
        """Open the sample; if it was abandoned (timed out) meanwhile, close it here."""
        handle = self.adapter.open_sample(case, index)
        with slot.lock:
            if not slot.abandoned:
                slot.handle, slot.opened = handle, True
                return handle
        self.adapter.close_sample(handle)
        raise AdkError("timeout", "the sample timed out while it opened")

    async def _close(self, slot: _Slot) -> str | None:
        """Close the sample's handle once; the close failure's reason, if any."""
        opened, handle = slot.take()
        if not opened:
            return None
        closing = asyncio.ensure_future(self._closing(handle))
        try:
            return await asyncio.shield(closing)
        except asyncio.CancelledError:
            await asyncio.wait([closing])  # a cancelled run still waits for its teardown
            raise

    async def _closing(self, handle: Any) -> str | None:
        """`close_sample` on the blocking pool, within `CLOSE_GRACE`."""
        try:
            await asyncio.wait_for(aio.run_blocking(self.adapter.close_sample, handle), CLOSE_GRACE)
        except TimeoutError:
            _log.warning("eval_sample_close_slow", grace=CLOSE_GRACE)
            return "adapter_close_timeout"
        except Exception as error:
            return _reason(error, "adapter_close_failed")
        return None

    async def _criteria(
        self, case: EvalCase, turns: list[TurnResult], steps: list[TrajectoryStep], deadline: float
    ) -> tuple[CriterionResult, ...]:
        scored = [ScoredTurn(expected=t.expected, actual=t.actual) for t in turns]
        calls = [ToolCall(s.tool, dict(s.args or {})) for s in steps if s.kind == "tool_call"]
        results = []
        for metric in self.metrics:
            if metric.judge is not None:
                results.append(
                    await self._judge(metric, metric.judge, case, turns, calls, deadline)
                )
                continue
            verdict = score(metric, case, scored, calls)
            results.append(
                _criterion(metric, verdict.status, verdict.score, None, verdict.metadata)
            )
        return tuple(results)

    async def _judge(
        self,
        metric: MetricSpec,
        config: judge.JudgeConfig,
        case: EvalCase,
        turns: list[TurnResult],
        calls: list[ToolCall],
        deadline: float,
    ) -> CriterionResult:
        case_input = judge.JudgeInput(
            case_id=case.id,
            turns=[judge.JudgeTurn(t.input, t.expected, t.actual) for t in turns],
            tool_names=list(dict.fromkeys(call.name for call in calls)),
        )
        try:
            verdict = await judge.judge_case_async(config, case_input, deadline=deadline)
        except AdkError as error:
            return _criterion(metric, "error", None, _judge_reason(error), {})
        metadata = {**verdict.metadata, "rationale": verdict.rationale}
        return _criterion(metric, "ok", verdict.score, None, prune(metadata))

    def _public(self, step: TrajectoryStep) -> TrajectoryStep:
        if self.options.capture_tool_content:
            return step
        return msgspec.structs.replace(step, args=None, response=None)

    def _failed(self, case: EvalCase, index: int, error: str, started: float) -> SampleResult:
        return SampleResult(
            sample_id=sample_id(self.eval_set, case, index),
            sample_index=index,
            status="error",
            passed=False,
            error=error,
            duration_ms=_elapsed_ms(started),
            adapter_metadata={},
            trajectory=(),
            criteria=(),
            turns=(),
        )

    def _charge(self, sample: SampleResult) -> None:
        """Count a finished sample against the report budget; past it, stop starting
        new samples (the run then fails with ``eval_report_budget_exceeded``)."""
        self.budget -= 2 * len(msgspec.json.encode(sample)) + 256
        if self.budget < 0:
            self.over_budget = True

    def _aggregate(self, index: int, case: EvalCase, samples: list[SampleResult]) -> CaseResult:
        errors = sum(sample.status == "error" for sample in samples)
        successful = len(samples) - errors
        passed_samples = sum(sample.passed for sample in samples)
        rate = ratio(passed_samples, successful)
        gate = (
            successful >= self.options.required_successes
            and rate >= self.options.sample_pass_rate_threshold
        )
        return CaseResult(
            case_id=case.id,
            case_index=index,
            status=case_status(gate, successful, errors),
            passed=gate,
            sample_count=len(samples),
            successful_sample_count=successful,
            passed_sample_count=passed_samples,
            error_sample_count=errors,
            sample_pass_rate=rate,
            sample_pass_rate_threshold=self.options.sample_pass_rate_threshold,
            min_successful_samples=self.options.required_successes,
            duration_ms=sum(sample.duration_ms for sample in samples),
            criteria=case_criteria(
                [(metric.id, metric.kind, metric.threshold) for metric in self.metrics], samples
            ),
            samples=tuple(samples),
        )

    def _summary(self, cases: list[CaseResult]) -> EvalResult:
        passed = sum(case.passed for case in cases)
        rate = ratio(passed, len(cases))
        return EvalResult(
            result_schema_version=RESULT_SCHEMA_VERSION,
            eval_set_schema_version=self.eval_set.schema_version,
            eval_set_id=self.eval_set.id,
            eval_set_version=self.eval_set.version,
            passed=rate >= self.options.pass_rate_threshold,
            pass_rate=rate,
            pass_rate_threshold=self.options.pass_rate_threshold,
            case_count=len(cases),
            passed_case_count=passed,
            error_case_count=sum(case.status == "error" for case in cases),
            partial_case_count=sum(case.status == "partial" for case in cases),
            sample_count=self.options.sample_count,
            duration_ms=_elapsed_ms(self.started),
            metadata=self.options.metadata,
            metrics=tuple(
                metric_summary(metric.id, metric.kind, metric.threshold, cases)
                for metric in self.metrics
            ),
            cases=tuple(cases),
        )


async def _settled(calls: list[Coroutine[Any, Any, _T]]) -> list[_T]:
    """Every call's result once all have finished: a cancelled or failed run returns
    only after each sample's teardown (plain `gather` returns at the first one)."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


def _criterion(
    metric: MetricSpec,
    status: Any,
    value: float | None,
    error: str | None,
    metadata: dict[str, Any],
) -> CriterionResult:
    return CriterionResult(
        metric_id=metric.id,
        kind=metric.kind,
        scope="case",
        status=status,
        score=value,
        threshold=metric.threshold,
        passed=status == "ok" and value is not None and value >= metric.threshold,
        error=error,
        metadata=metadata,
    )


def _turn(
    index: int, turn: Any, actual: str | None, status: Any, error: str | None, started: float
) -> TurnResult:
    return TurnResult(
        turn_id=turn.id,
        turn_index=index,
        input=turn.input,
        expected=turn.expected_response,
        actual=actual,
        status=status,
        error=error,
        duration_ms=_elapsed_ms(started),
    )


def _check_output(output: Any) -> TurnOutput:
    """The adapter's answer checked at the boundary, as a new strictly typed value:
    every step's kind, tool, ids and arguments, the metadata and events as bounded JSON
    (struct fields are not type-checked when built, so the value goes through JSON and
    back, strictly); else ``invalid_adapter_result`` (the sample's error, never the
    run's)."""
    if not isinstance(output, TurnOutput):
        raise AdkError("invalid_adapter_result", "run_turn returns a TurnOutput")
    trajectory = output.trajectory
    if (
        not isinstance(trajectory, list | tuple)
        or len(trajectory) > MAX_TRAJECTORY_STEPS
        or not all(isinstance(step, TrajectoryStep) for step in trajectory)
    ):
        raise AdkError("invalid_adapter_result", "the trajectory is bounded TrajectorySteps")
    try:
        data = msgspec.to_builtins(output)
    except (TypeError, ValueError, RecursionError):
        raise AdkError("invalid_adapter_result", "the output is not JSON data") from None
    check_data(data, "invalid_adapter_result", max_depth=MAX_PAYLOAD_DEPTH + 3)
    try:
        checked: TurnOutput = msgspec.json.decode(
            msgspec.json.encode(data), type=TurnOutput, strict=True
        )
    except (msgspec.MsgspecError, TypeError, ValueError) as error:
        raise AdkError(
            ("invalid_adapter_result", "schema"), f"the output is malformed: {str(error)[:200]}"
        ) from None
    return checked


def _check_growth(outputs: list[TurnOutput], output: TurnOutput) -> None:
    """Bound what one sample accumulates across its turns (``eval_sample_too_large``)."""
    steps = len(output.trajectory) + sum(len(o.trajectory) for o in outputs)
    events = len(output.events) + sum(len(o.events) for o in outputs)
    keys = set(output.metadata).union(*(o.metadata for o in outputs))
    if steps > MAX_SAMPLE_STEPS or events > MAX_SAMPLE_STEPS or len(keys) > MAX_MAP_SIZE:
        raise AdkError(
            "eval_sample_too_large",
            f"a sample keeps at most {MAX_SAMPLE_STEPS} tool steps and events",
        )


def _pruned(output: TurnOutput) -> TurnOutput:
    """`output` without secret-named keys in its arguments, responses, metadata, events
    (they are neither scored nor saved, like the set's own)."""
    steps = [
        msgspec.structs.replace(
            step,
            args=None if step.args is None else prune(step.args),
            response=None if step.response is None else prune(step.response),
        )
        for step in output.trajectory
    ]
    return msgspec.structs.replace(
        output, trajectory=steps, metadata=prune(output.metadata), events=prune(output.events)
    )


def _reason(error: BaseException, fallback: str) -> str:
    """A failure as a short stable string: an `AdkError`'s reason tag, else `fallback`."""
    if isinstance(error, AdkError):
        return reason_tag(error)[:MAX_ERROR_CHARS]
    _log.warning("eval_adapter_exception", kind=type(error).__name__, fallback=fallback)
    return fallback


def _judge_reason(error: AdkError) -> str:
    """A judge failure's tag, with its structural sub-reason when it has one
    (``judge_provider_error:missing_api_key``)."""
    reason = error.reason
    tag = reason_tag(error)
    if isinstance(reason, tuple) and len(reason) > 1 and isinstance(reason[1], str):
        word = reason[1]
        if word.isidentifier() and len(word) <= 64:
            return f"{tag}:{word}"
    return tag[:MAX_ERROR_CHARS]


def _elapsed_ms(started: float) -> int:
    return max(0, int((time.monotonic() - started) * 1000))
