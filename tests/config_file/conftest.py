"""Config file tests: a fresh application tree per test, a file writer, and a tool
module that shows whether it was imported."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import adk_actors as adk

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def app(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(REPO)  # tool import paths such as examples.agent_tools resolve here
    adk.start()
    yield
    adk.stop()


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[Any], Path]:
    """Write a value as a JSON config file; returns its path."""
    counter = iter(range(1_000_000))

    def write(value: Any) -> Path:
        path = tmp_path / f"agent-{next(counter)}.json"
        path.write_text(value if isinstance(value, str) else json.dumps(value))
        return path

    return write


def write_probe_tools(directory: Path, module: str) -> Path:
    """Write `module`.py (one tool, ``probe``) into `directory`; importing it writes
    the marker file whose path is returned, so a test sees whether its code ran."""
    (directory / f"{module}.py").write_text(
        "from pathlib import Path\n"
        "import adk_actors as adk\n"
        "Path(__file__).with_name('imported.marker').write_text('ran')\n"
        "@adk.tool\n"
        "def probe(city: str) -> str:\n"
        '    """Probe.\n\n    Args:\n        city: where\n    """\n'
        "    return city\n"
    )
    return directory / "imported.marker"
