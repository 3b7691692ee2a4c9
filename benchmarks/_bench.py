"""What the peer benchmarks (`mcp_calls.py`, `a2a_tasks.py`) share: a server in a child
process that prints its URL, and the table's first line."""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import subprocess
import sys
from collections.abc import Iterator
from typing import IO, Any


@contextlib.contextmanager
def url_process(argv: list[str], name: str, *, stderr: IO[Any] | None = None) -> Iterator[str]:
    """Run `argv`, a server that prints its URL as its first line and serves until its
    stdin closes; yield that URL, then close stdin and wait (killed after 15 s)."""
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the {name} server did not start")
        yield url
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def print_header(benchmark: str, package: str) -> None:
    """``# <benchmark> benchmark  <date>  <package> <version>  python <version>``."""
    print(
        f"# {benchmark} benchmark  {datetime.date.today()}"
        f"  {package} {importlib.metadata.version(package)}  python {sys.version.split()[0]}"
    )
