"""Deterministic, bounded reports of evaluation results and baseline comparisons.

`render(value, "json" | "markdown")` renders an `EvalResult` or a `Comparison` (or
either one's saved JSON, checked first; a saved schema-1 result too, as far as its
shape is defined: set id and version, ``passed`` and its cases). The same value always renders to the same
text: JSON with its object keys sorted; Markdown with a summary, a metric table, a
per-case table and, for a result, the first failures (at most `MAX_FAILURE_LINES`).
Everything that came from a data set (ids, error words, metadata) is escaped for a
Markdown table and cut to `MAX_CELL_CHARS`. A report larger than ``max_bytes``
(default `DEFAULT_MAX_REPORT_BYTES`, at most `MAX_REPORT_BYTES`) is refused with
``eval_report_too_large`` rather than cut.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import msgspec

from adk_actors.evaluation.compare import (
    Comparison,
    decode_comparison,
    encode_comparison,
    is_comparison_json,
)
from adk_actors.evaluation.limits import DEFAULT_MAX_REPORT_BYTES, MAX_REPORT_BYTES
from adk_actors.evaluation.results import (
    EvalResult,
    decode_legacy_result,
    decode_result,
    encode_result,
    is_legacy_result,
)
from providers.errors import AdkError

ReportFormat = Literal["json", "markdown"]
FORMATS: tuple[ReportFormat, ...] = ("json", "markdown")
MAX_CELL_CHARS = 200
MAX_FAILURE_LINES = 50
MAX_METADATA_LINES = 20
_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "`": "\\`",
        "*": "\\*",
        "[": "\\[",
        "]": "\\]",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
    }
)


def render(
    value: EvalResult | Comparison | Mapping[str, Any],
    fmt: str,
    *,
    max_bytes: int = DEFAULT_MAX_REPORT_BYTES,
) -> str:
    """`value` as a JSON or Markdown report.

    Raises `AdkError`: ``invalid_eval_report_format`` (not ``json``/``markdown``),
    ``invalid_eval_report_limit`` (`max_bytes` not in 1..`MAX_REPORT_BYTES`), the
    decoder's reason for saved JSON that is not a valid result or comparison, and
    ``eval_report_too_large``.
    """
    if fmt not in FORMATS:
        raise AdkError("invalid_eval_report_format", "the format must be json or markdown")
    _check_limit(max_bytes)
    document = _document(value)
    if fmt == "json":
        return render_json(document, max_bytes=max_bytes)
    if document.get("report_type") == "baseline_comparison":
        text = _comparison_markdown(document)
    else:
        text = _result_markdown(document)
    _check_size(text, max_bytes)
    return text


def render_json(document: Mapping[str, Any], *, max_bytes: int = DEFAULT_MAX_REPORT_BYTES) -> str:
    """A JSON document (already checked by its producer) as the deterministic, indented,
    key-sorted report text; ``eval_report_too_large`` past `max_bytes`."""
    _check_limit(max_bytes)
    text = msgspec.json.format(
        msgspec.json.encode(document, order="deterministic"), indent=2
    ).decode("utf-8")
    _check_size(text, max_bytes)
    return text


def _check_limit(max_bytes: int) -> None:
    if (
        isinstance(max_bytes, bool)
        or not isinstance(max_bytes, int)
        or not (0 < max_bytes <= MAX_REPORT_BYTES)
    ):
        raise AdkError(
            "invalid_eval_report_limit", f"max_bytes must be within 1..{MAX_REPORT_BYTES}"
        )


def _check_size(text: str, max_bytes: int) -> None:
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise AdkError(
            ("eval_report_too_large", size, max_bytes),
            f"the report is {size} bytes, past the limit of {max_bytes}",
        )


def report_document(value: EvalResult | Comparison | Mapping[str, Any]) -> dict[str, Any]:
    """The checked JSON document a report shows: a result's or a comparison's saved form."""
    return _document(value)


def _document(value: EvalResult | Comparison | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, Comparison):
        return encode_comparison(value)
    if isinstance(value, EvalResult):
        return encode_result(value)
    if not isinstance(value, Mapping):
        raise AdkError("invalid_eval_report", "expected a result or a comparison")
    if is_comparison_json(value):
        if "result_schema_version" in value:
            raise AdkError("ambiguous_report_kind", "both a result and a comparison")
        return encode_comparison(decode_comparison(value))
    if is_legacy_result(value):
        return decode_legacy_result(value)
    return encode_result(decode_result(value))


# -- Markdown ----------------------------------------------------------------------------------


def _cell(value: object) -> str:
    """A value from the data as inert Markdown inside a table cell or a line."""
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    if len(text) > MAX_CELL_CHARS:
        text = text[: MAX_CELL_CHARS - 1] + "…"
    return text.translate(_ESCAPES) or "-"


def _num(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    return f"{float(value):.4f}"


def _int(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    return str(int(value))


def _word(passed: object) -> str:
    return "PASS" if passed is True else "FAIL"


def _table(header: list[str], align: list[str], rows: Iterable[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def _items(document: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = document.get(key)
    return (
        [item for item in value if isinstance(item, Mapping)]
        if isinstance(value, list | tuple)
        else []
    )


def _result_markdown(result: Mapping[str, Any]) -> str:
    lines = [
        "# Evaluation report",
        "",
        f"Status: **{_word(result.get('passed'))}**",
        "",
        *_table(
            ["Field", "Value"],
            ["---", "---"],
            [
                ["Evaluation set", _cell(result.get("eval_set_id"))],
                ["Version", _cell(result.get("eval_set_version"))],
                [
                    "Pass rate",
                    f"{_num(result.get('pass_rate'))} "
                    f"({_int(result.get('passed_case_count'))}/{_int(result.get('case_count'))} "
                    f"cases; threshold {_num(result.get('pass_rate_threshold'))})",
                ],
                ["Error cases", _int(result.get("error_case_count"))],
                ["Partial cases", _int(result.get("partial_case_count"))],
                ["Samples per case", _int(result.get("sample_count"))],
                ["Duration (ms)", _int(result.get("duration_ms"))],
            ],
        ),
        "",
    ]
    metadata = result.get("metadata")
    if isinstance(metadata, Mapping) and metadata:
        lines += ["## Build metadata", ""]
        for key in sorted(metadata)[:MAX_METADATA_LINES]:
            lines.append(f"- {_cell(key)}: {_cell(metadata[key])}")
        if len(metadata) > MAX_METADATA_LINES:
            lines.append(f"- … {len(metadata) - MAX_METADATA_LINES} more")
        lines.append("")
    lines += [
        "## Metrics",
        "",
        *_table(
            [
                "Metric",
                "Kind",
                "Scope",
                "Average",
                "Threshold",
                "Evaluated",
                "Errors",
                "Not evaluated",
                "Status",
            ],
            ["---", "---", "---", "---:", "---:", "---:", "---:", "---:", "---"],
            (
                [
                    _cell(metric.get("metric_id")),
                    _cell(metric.get("kind")),
                    _cell(metric.get("scope")),
                    _num(metric.get("average_score")),
                    _num(metric.get("threshold")),
                    _int(metric.get("evaluated_count")),
                    _int(metric.get("error_count")),
                    _int(metric.get("not_evaluated_count")),
                    _word(metric.get("passed")),
                ]
                for metric in _items(result, "metrics")
            ),
        ),
        "",
        "## Cases",
        "",
        *_table(
            ["Case", "Status", "Passed samples", "Samples", "Error samples", "Duration (ms)"],
            ["---", "---", "---:", "---:", "---:", "---:"],
            (
                [
                    _cell(case.get("case_id")),
                    _cell(case.get("status")),
                    _int(case.get("passed_sample_count")),
                    _int(case.get("sample_count")),
                    _int(case.get("error_sample_count")),
                    _int(case.get("duration_ms")),
                ]
                for case in _items(result, "cases")
            ),
        ),
        "",
    ]
    failures = _failures(result)
    if failures:
        lines += ["## Failures", ""]
        lines += failures[:MAX_FAILURE_LINES]
        if len(failures) > MAX_FAILURE_LINES:
            lines.append(f"- … {len(failures) - MAX_FAILURE_LINES} more")
        lines.append("")
    return "\n".join(lines)


def _failures(result: Mapping[str, Any]) -> list[str]:
    """One line per failing sample criterion or sample error of a case that did not pass."""
    found: list[str] = []
    for case in _items(result, "cases"):
        if case.get("passed") is True:
            continue
        case_id = _cell(case.get("case_id"))
        for sample in _items(case, "samples"):
            where = f"- case {case_id}, sample {_int(sample.get('sample_index'))}"
            if sample.get("error") is not None:
                found.append(f"{where}: error {_cell(sample.get('error'))}")
            for criterion in _items(sample, "criteria"):
                if criterion.get("passed") is True:
                    continue
                status = criterion.get("status")
                if status == "error":
                    detail = f"error {_cell(criterion.get('error'))}"
                elif status == "ok":
                    detail = (
                        f"scored {_num(criterion.get('score'))} "
                        f"(threshold {_num(criterion.get('threshold'))})"
                    )
                else:
                    detail = "not evaluated"
                found.append(f"{where}: {_cell(criterion.get('metric_id'))} {detail}")
            if len(found) > MAX_FAILURE_LINES:
                return found
    return found


def _comparison_markdown(report: Mapping[str, Any]) -> str:
    lines = [
        "# Evaluation baseline comparison",
        "",
        f"Status: **{_word(report.get('passed'))}**",
        "",
        *_table(
            ["Field", "Value"],
            ["---", "---"],
            [
                ["Evaluation set", _cell(report.get("eval_set_id"))],
                [
                    "Version",
                    f"{_cell(report.get('baseline_version'))} -> "
                    f"{_cell(report.get('current_version'))}",
                ],
                [
                    "Pass rate",
                    f"{_num(report.get('baseline_pass_rate'))} -> "
                    f"{_num(report.get('current_pass_rate'))} (drop "
                    f"{_num(report.get('pass_rate_drop'))}, allowed "
                    f"{_num(report.get('max_pass_rate_drop'))})",
                ],
            ],
        ),
        "",
        "## Metrics",
        "",
        *_table(
            ["Metric", "Baseline", "Current", "Drop", "Tolerance", "Status", "Reason"],
            ["---", "---:", "---:", "---:", "---:", "---", "---"],
            (
                [
                    _cell(diff.get("metric_id")),
                    _num(diff.get("baseline_score")),
                    _num(diff.get("current_score")),
                    _num(diff.get("score_drop")),
                    _num(diff.get("tolerance")),
                    _word(diff.get("regression") is False),
                    _cell(diff.get("reason")),
                ]
                for diff in _items(report, "metric_diffs")
            ),
        ),
        "",
        "## Cases",
        "",
        *_table(
            ["Case", "Baseline", "Current", "Trajectory changed", "Status", "Reason"],
            ["---", "---", "---", "---", "---", "---"],
            (
                [
                    _cell(diff.get("case_id")),
                    _cell(diff.get("baseline_status")),
                    _cell(diff.get("current_status")),
                    "yes" if diff.get("trajectory_changed") is True else "no",
                    _word(diff.get("regression") is False),
                    _cell(diff.get("reason")),
                ]
                for diff in _items(report, "case_diffs")
            ),
        ),
        "",
    ]
    return "\n".join(lines)
