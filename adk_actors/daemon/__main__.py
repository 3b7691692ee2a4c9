"""``python -m adk_actors.daemon --config F [--host H] [--port P] [--data DIR]``.

The daemon without the CLI (the ``adk serve`` command runs the same `serve.main`);
exit codes: 0 after a drained stop, 2 when refused at start, 1 if it stopped on its
own.
"""

from __future__ import annotations

import argparse
import sys

from adk_actors.daemon.serve import DEFAULT_DATA_DIR, DEFAULT_HOST, DEFAULT_PORT, main


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m adk_actors.daemon",
        description="The adk daemon: the /dev/v1 API and the browser console at /dev.",
    )
    parser.add_argument("--config", default=None, help="the agent config file to serve")
    parser.add_argument("--host", default=DEFAULT_HOST, help="127.0.0.1 or ::1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="0: any free port")
    parser.add_argument("--data", default=DEFAULT_DATA_DIR, help="where sessions are stored")
    return parser.parse_args(argv)


def run(argv: list[str] | None = None) -> int:
    arguments = _arguments(argv)
    return main(arguments.config, arguments.host, arguments.port, arguments.data)


if __name__ == "__main__":
    sys.exit(run())
