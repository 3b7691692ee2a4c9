"""What the span tests share: a span's gen-AI operation, by attribute or older name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

KIND_OF_LEGACY_NAME = {
    "adk.agent.turn": "invoke_agent",
    "adk.model.call": "chat",
    "adk.tool.call": "execute_tool",
}


def kind(span: Any) -> str | None:
    """The span's gen-AI operation (its attribute, or what its older name means)."""
    return span.attributes.get("gen_ai.operation.name") or KIND_OF_LEGACY_NAME.get(span.name)


ROOT = Path(__file__).resolve().parents[3]


def run_fresh(script: Path, source: str) -> None:
    """Run `source` as `script` in a fresh interpreter with no ``OTEL_`` variables (a
    process has one global tracer and meter provider); it must print ``done`` last."""
    script.write_text(source)
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")} | {
        "PYTHONPATH": str(ROOT)
    }
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().splitlines()[-1] == "done"
