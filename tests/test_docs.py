"""The Python examples in the docs run, in order, as one script per page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    "docs/supervision.md",
    "docs/providers.md",
    "docs/agents.md",
    "docs/sessions.md",
    "docs/policy.md",
    "docs/admission.md",
    "docs/runner.md",
    "docs/runs.md",
    "docs/security.md",
    "docs/cli.md",
    "docs/workflows.md",
    "docs/ambient.md",
    "docs/plugins.md",
    "docs/observability.md",
    "docs/evaluation.md",
    "docs/stress.md",
    "docs/mcp.md",
    "docs/a2a.md",
    "README.md",
]


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.parametrize("page", PAGES)
def test_examples_run(page: str, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = _python_blocks((ROOT / page).read_text())
    assert blocks, f"{page} has no python examples"
    namespace: dict[str, object] = {"__name__": f"docs_{Path(page).stem}"}
    for block in blocks:
        exec(compile(block, page, "exec"), namespace)


_SELF_CONTAINED = [
    *PAGES,
    "docs/BENCHMARKS.md",
    "docs/daemon.md",
    "adk_actors/daemon/README.md",
    "adk_actors/cli/README.md",
    "adk_actors/config_file/README.md",
    "adk_actors/workflows/README.md",
    "adk_actors/planning/README.md",
    "adk_actors/graph/README.md",
    "adk_actors/ambient/README.md",
    "adk_actors/plugins/README.md",
    "adk_actors/observability/README.md",
    "supervision/README.md",
    "providers/README.md",
    "adk_actors/README.md",
]
_OUTSIDE_OR_TRACKER = re.compile(
    r"\.\./shared|DESIGN\.md|\(issue[:)]|the next issues?|later issues?|come with the next",
    flags=re.IGNORECASE,
)


@pytest.mark.parametrize("page", _SELF_CONTAINED)
def test_docs_are_self_contained(page: str) -> None:
    """README and docs describe what exists in their own words: no files outside the
    repository, no internal tracker language."""
    found = _OUTSIDE_OR_TRACKER.findall((ROOT / page).read_text())
    assert not found, f"{page}: {found}"


def test_code_has_no_tracker_language() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for package in ("supervision", "providers", "adk_actors", "examples")
        for path in (ROOT / package).rglob("*.py")
        if _OUTSIDE_OR_TRACKER.search(path.read_text())
    ]
    assert not offenders
