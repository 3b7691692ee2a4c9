"""The `adk` console script (placeholder until the CLI lands)."""

from __future__ import annotations


def main() -> None:
    raise SystemExit("adk: not yet available")
