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
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from adk_actors.evaluation import judge
from adk_actors.evaluation.adapter import EvalAdapter, TurnOutput
from adk_actors.evaluation.criteria import MetricSpec, ScoredTurn, ToolCall, score
from adk_actors.evaluation.evalset import EvalCase, EvalSet
from adk_actors.evaluation.limits import (
    MAX_CONCURRENCY,
    MAX_ERROR_CHARS,
    MAX_TEXT_CHARS,
    MAX_TOTAL_SAMPLES,
    MAX_TRAJECTORY_STEPS,
    check_data,
)
from adk_actors.evaluation.options import EvalOptions, check_options
from adk_actors.evaluation.results import (
    RESULT_SCHEMA_VERSION,
    CaseResult,
    CriterionResult,
    EvalResult,
    MetricSummary,
    SampleResult,
    TrajectoryStep,
    TurnResult,
    case_status,
    encode_result,
    ratio,
    statistics,
)
from providers.errors import AdkError, prune
from supervision import aio
from supervision.logs import get_logger

CLOSE_GRACE = 10.0
"""Seconds a timed-out sample's `close_sample` may take before the engine moves on."""
REPORT_RESERVE_BYTES = 4096
_log = get_logger(__name__)


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
    ``empty_eval_criteria``, ``("eval_sample_limit_exceeded", total, ceiling)``.
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
        self.budget = options.max_report_bytes - REPORT_RESERVE_BYTES - 1024 * len(eval_set.cases)
        self.over_budget = False
        self.running = asyncio.Semaphore(MAX_CONCURRENCY)
        """Samples in flight across cases: at most the blocking pool's threads, so a
        sample's deadline starts when it can run, not while it queues for a thread."""

    async def run(self) -> EvalResult:
        cases = asyncio.Semaphore(self.options.concurrency)
        results = await asyncio.gather(
            *(self._case(index, case, cases) for index, case in enumerate(self.eval_set.cases))
        )
        if self.over_budget:
            raise AdkError("eval_report_budget_exceeded", "the results outgrew max_report_bytes")
        result = self._summary(list(results))
        size = len(msgspec.json.encode(encode_result(result)))
        if size > self.options.max_report_bytes:
            raise AdkError("eval_report_too_large", f"the result is {size} bytes")
        return result

    async def _case(self, index: int, case: EvalCase, cases: asyncio.Semaphore) -> CaseResult:
        async with cases:
            samples = asyncio.Semaphore(self.options.sample_concurrency)
            results = await asyncio.gather(
                *(self._sample(case, i, samples) for i in range(self.options.sample_count))
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
                output = await aio.run_blocking(self.adapter.run_turn, handle, turn, deadline)
                _check_output(output)
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
            return _criterion(metric, "error", None, _reason(error, "judge_failed"), {})
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
            criteria=tuple(
                _case_criterion(
                    metric, [c for s in samples for c in s.criteria if c.metric_id == metric.id]
                )
                for metric in self.metrics
                if any(c.metric_id == metric.id for s in samples for c in s.criteria)
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
            metrics=tuple(_metric_summary(metric, cases) for metric in self.metrics),
            cases=tuple(cases),
        )


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


def _case_criterion(metric: MetricSpec, results: list[CriterionResult]) -> CriterionResult:
    """One metric across a case's samples (the reference's aggregate status)."""
    scores = [r.score for r in results if r.status == "ok" and r.score is not None]
    errors = sum(r.status == "error" for r in results)
    skipped = sum(r.status == "not_evaluated" for r in results)
    if not scores:
        status = "error" if errors else "not_evaluated"
    else:
        status = "ok" if errors == 0 and skipped == 0 else "partial"
    stats = statistics(scores)
    return _criterion(
        metric,
        status,
        sum(scores) / len(scores) if scores else None,
        None,
        {
            "sample_count": len(results),
            "error_count": errors,
            "not_evaluated_count": skipped,
            "statistics": None if stats is None else msgspec.to_builtins(stats),
        },
    )


def _metric_summary(metric: MetricSpec, cases: list[CaseResult]) -> MetricSummary:
    results = [
        c
        for case in cases
        for sample in case.samples
        for c in sample.criteria
        if c.metric_id == metric.id
    ]
    scores = [r.score for r in results if r.status == "ok" and r.score is not None]
    errors = sum(r.status == "error" for r in results)
    skipped = sum(r.status == "not_evaluated" for r in results)
    average = sum(scores) / len(scores) if scores else None
    return MetricSummary(
        metric_id=metric.id,
        kind=metric.kind,
        scope="case",
        average_score=average,
        threshold=metric.threshold,
        passed=average is not None and errors == 0 and skipped == 0 and average >= metric.threshold,
        evaluated_count=len(scores),
        error_count=errors,
        not_evaluated_count=skipped,
        statistics=statistics(scores),
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


def _check_output(output: Any) -> None:
    """Refuse an adapter answer outside the contract (``invalid_adapter_result``)."""
    if not isinstance(output, TurnOutput):
        raise AdkError("invalid_adapter_result", "run_turn returns a TurnOutput")
    if output.text is not None and (
        not isinstance(output.text, str) or len(output.text) > MAX_TEXT_CHARS
    ):
        raise AdkError("invalid_adapter_result", "the text is a bounded string")
    if len(output.trajectory) > MAX_TRAJECTORY_STEPS or not all(
        isinstance(step, TrajectoryStep) for step in output.trajectory
    ):
        raise AdkError("invalid_adapter_result", "the trajectory is bounded TrajectorySteps")
    try:
        steps = msgspec.to_builtins(output.trajectory)
    except (TypeError, ValueError):
        raise AdkError("invalid_adapter_result", "tool arguments are JSON data") from None
    check_data([steps, output.metadata, output.events], "invalid_adapter_result")


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
        reason = error.reason
        tag = reason[0] if isinstance(reason, tuple) and reason else reason
        return str(tag)[:MAX_ERROR_CHARS]
    _log.warning("eval_adapter_exception", kind=type(error).__name__, fallback=fallback)
    return fallback


def _elapsed_ms(started: float) -> int:
    return max(0, int((time.monotonic() - started) * 1000))
