"""Bounds for evaluation data: eval sets, criteria and results are untrusted JSON.

`check_data` walks a JSON-shaped value without recursion and refuses one that is too
deep, has too many nodes, too long a string, list or mapping, or too many string
bytes in total, before anything else looks at it (the reference's
``adk_eval_limits``). The engine's count ceilings live here too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NoReturn

from providers.errors import AdkError

MAX_CASES = 1000
MAX_TURNS_PER_CASE = 1000
MAX_SAMPLES = 100
MAX_CONCURRENCY = 256
MAX_TOTAL_SAMPLES = 10_000
MAX_METRICS = 64
MAX_TIMEOUT = 3600.0
DEFAULT_MAX_REPORT_BYTES = 16 * 1024 * 1024
MAX_REPORT_BYTES = DEFAULT_MAX_REPORT_BYTES
MAX_ID_CHARS = 256
MAX_TEXT_CHARS = 1_048_576
MAX_TRAJECTORY_STEPS = 1000
MAX_ERROR_CHARS = 512

MAX_DEPTH = 64
MAX_NODES = 100_000
MAX_STRING_BYTES = 1_048_576
MAX_TOTAL_STRING_BYTES = 8_388_608
MAX_LIST_LENGTH = 10_000
MAX_MAP_SIZE = 10_000
EPSILON = 1e-9
"""Float rounding allowed when a computed rate or drop is compared with a bound."""
MAX_PAYLOAD_DEPTH = 32
"""Nesting allowed in adapter output and option metadata: they sit a few levels deep in
a saved result, which must stay within `MAX_DEPTH` to be read back."""
MAX_SAMPLE_STEPS = MAX_LIST_LENGTH
"""Tool steps (and captured events) one sample may accumulate across its turns."""


def result_max_nodes(max_bytes: int) -> int:
    """The values a JSON text of `max_bytes` bytes can hold at most (each value takes at
    least two bytes with its separator), so a result within its byte bound always
    passes the node bound too."""
    return max(MAX_NODES, max_bytes // 2 + 1)


def check_data(
    value: Any,
    reason: str,
    *,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
    max_total_string_bytes: int = MAX_TOTAL_STRING_BYTES,
    allow_objects: bool = False,
) -> None:
    """Refuse `value` as ``(reason, <limit>)`` when it breaks a bound; else return.

    The limits are ``eval_data_depth_exceeded``, ``eval_data_nodes_exceeded``,
    ``eval_string_too_large``, ``eval_string_budget_exceeded``,
    ``eval_list_too_large``, ``eval_map_too_large`` and ``eval_data_not_json`` (a
    value JSON cannot hold: only mappings with string keys, lists, strings, numbers,
    booleans and None are evaluation data; `allow_objects` lets other objects through
    as leaves, for trusted Python callers such as a judge's injected provider).
    """
    nodes = 0
    string_bytes = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if depth > max_depth:
            _refuse(reason, "eval_data_depth_exceeded", f"nested deeper than {max_depth}")
        if nodes > max_nodes:
            _refuse(reason, "eval_data_nodes_exceeded", f"more than {max_nodes} values")
        if isinstance(item, str):
            size = _utf8_size(item, reason)
            if size > MAX_STRING_BYTES:
                _refuse(reason, "eval_string_too_large", f"a string over {MAX_STRING_BYTES} bytes")
            string_bytes += size
            if string_bytes > max_total_string_bytes:
                _refuse(
                    reason,
                    "eval_string_budget_exceeded",
                    f"strings over {max_total_string_bytes} bytes in total",
                )
        elif isinstance(item, Mapping):
            if len(item) > MAX_MAP_SIZE:
                _refuse(reason, "eval_map_too_large", f"a mapping over {MAX_MAP_SIZE} keys")
            for key, child in item.items():
                if not isinstance(key, str):
                    _refuse(reason, "eval_data_not_json", "a mapping key is not a string")
                stack.append((key, depth + 1))
                stack.append((child, depth + 1))
        elif isinstance(item, list | tuple):
            if len(item) > MAX_LIST_LENGTH:
                _refuse(reason, "eval_list_too_large", f"a list over {MAX_LIST_LENGTH} items")
            stack.extend((child, depth + 1) for child in item)
        elif item is not None and not isinstance(item, bool | int | float) and not allow_objects:
            _refuse(reason, "eval_data_not_json", f"a {type(item).__name__} is not JSON data")
        elif isinstance(item, float) and (item != item or item in (float("inf"), float("-inf"))):
            _refuse(reason, "eval_data_not_json", "NaN and infinities are not JSON numbers")


def reason_tag(error: AdkError) -> str:
    """An error's reason as one stable word: the tag of a reason tuple, else the reason."""
    reason = error.reason
    if isinstance(reason, tuple | list) and reason:
        reason = reason[0]
    return reason if isinstance(reason, str) else "invalid"


def is_fraction(value: object) -> bool:
    """A finite number (not a bool) within 0..1: a score, rate, threshold or tolerance."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )


def near(a: float, b: float) -> bool:
    """`a` and `b` are equal up to float rounding (`EPSILON`), for computed rates."""
    return abs(a - b) <= EPSILON


def _utf8_size(text: str, reason: str) -> int:
    """The UTF-8 size of `text`; a lone surrogate (which JSON text can spell as an escape
    but no encoder writes) is refused as ``eval_data_not_json``."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        pass  # refused below, outside the handler (no chained traceback)
    _refuse(reason, "eval_data_not_json", "a string holds a lone surrogate (not UTF-8)")


def _refuse(reason: str, limit: str, detail: str) -> NoReturn:
    raise AdkError((reason, limit), f"evaluation data refused: {detail}")
