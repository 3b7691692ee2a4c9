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
